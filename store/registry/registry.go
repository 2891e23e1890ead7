// Package registry opens a store from one string. It is the only code that knows the
// backends: a new backend is a subpackage of store plus one case in Parse, and
// store/storetest is the conformance suite it must pass.
//
// Locations:
//
//	/var/lib/sendonce/sendonce.db   a SQLite file (a relative path works too)
//	file:/var/lib/sendonce/sendonce.db
//	file:///var/lib/sendonce/sendonce.db
//	postgres://sendonce@db.example.org/sendonce?sslmode=verify-full   a shared PostgreSQL store
//	                                (postgresql:// too; never a password in it: PGPASSFILE)
//
// Anything that looks like a URL scheme but is not one of these (postgres:/x, sqlite:,
// s3://...) is refused as bad input, never taken as a relative path; so is a file:
// location with query parameters (nobody gets a private in-memory store by accident).
package registry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/internal/files"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/store/postgres"
	"github.com/sendonce/sendonce/store/sqlite"
)

// Options tune how a store is opened.
type Options struct {
	// LockTimeout is how long to wait for another process's transaction before failing
	// closed; the backend's default when zero.
	LockTimeout time.Duration
	// Clock is the workstation's clock: a SQLite store's one clock. A shared store keeps
	// the database's, unless LeasesOnClock (a test's control: it must break fencing
	// between workstations whose clocks disagree).
	Clock         func() time.Time
	LeasesOnClock bool
	// LongLived says the store stays open for many transactions (a service): a shared
	// store then prepares its statements and keeps their plans.
	LongLived bool
}

func (o Options) sqlite() sqlite.Options {
	return sqlite.Options{LockTimeout: o.LockTimeout, Clock: o.Clock}
}

func (o Options) postgres() postgres.Options {
	p := postgres.Options{LockTimeout: o.LockTimeout, PrepareStatements: o.LongLived}
	if o.LeasesOnClock && o.Clock != nil {
		p.WorkstationClock = o.Clock
	}
	return p
}

// Location is a parsed store location.
type Location struct {
	Backend string // "sqlite" or "postgres"
	Path    string // the SQLite file, as given (relative paths stay relative)
	URL     string // the PostgreSQL URL (without a password: Parse refuses one)
}

// String is the location as a person would type it again, without secrets.
func (l Location) String() string {
	if l.Backend == "postgres" {
		return postgres.Redacted(l.URL)
	}
	return l.Path
}

// Dir is the folder that holds the store's own files, where per-store defaults (the
// evidence root) live; "" for a shared store, which has none on this workstation.
func (l Location) Dir() string {
	if l.Backend == "postgres" {
		return ""
	}
	return filepath.Dir(l.Path)
}

var schemeLike = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// Parse reads a location. Bad input wraps gate.ErrInvalid.
func Parse(loc string) (Location, error) {
	switch {
	case loc == "":
		return Location{}, fmt.Errorf("%w: no store location given", gate.ErrInvalid)
	case strings.HasPrefix(loc, "postgres://"), strings.HasPrefix(loc, "postgresql://"):
		if err := postgres.CheckURL(loc); err != nil {
			return Location{}, err
		}
		return Location{Backend: "postgres", URL: loc}, nil
	case strings.HasPrefix(loc, "file:"):
		u, err := url.Parse(loc)
		if err != nil {
			return Location{}, fmt.Errorf("%w: store location %q: %v", gate.ErrInvalid, loc, err)
		}
		if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
			return Location{}, fmt.Errorf("%w: store location %q: query parameters and fragments are not accepted (the store sets its own)", gate.ErrInvalid, loc)
		}
		if u.Host != "" && u.Host != "localhost" {
			return Location{}, fmt.Errorf("%w: store location %q names host %q; a SQLite store is a local file", gate.ErrInvalid, loc, u.Host)
		}
		p := u.Opaque
		if p == "" {
			p = u.Path
		}
		if p == "" {
			return Location{}, fmt.Errorf("%w: store location %q names no file", gate.ErrInvalid, loc)
		}
		return Location{Backend: "sqlite", Path: p}, nil
	case schemeLike.MatchString(loc):
		return Location{}, fmt.Errorf("%w: store location %q starts like a URL with a scheme this sendonce does not know (known: a file path, file:PATH); write ./%s for a relative file of that name", gate.ErrInvalid, loc, loc)
	}
	return Location{Backend: "sqlite", Path: loc}, nil
}

// Opened is a store and where it lives.
type Opened struct {
	Store    *store.Store
	Location Location
	// Display is the store as printed: a SQLite file's absolute path.
	Display       string
	SchemaVersion int
	// Replication is what a shared store's server said, at open, of its standbys (nil
	// for a SQLite store).
	Replication *postgres.Replication
}

// Open opens the existing store at loc. A missing one is store.ErrNotInitialized, one
// on an older schema store.ErrUpgradeNeeded, and every failure to open wraps
// store.ErrUnavailable: callers fail closed. A store file that is a symbolic link, is
// not owned by this user, or can be written by group or others is refused, and so is a
// store folder that another user could change (internal/files).
func Open(ctx context.Context, loc string, opt Options) (Opened, error) {
	l, err := Parse(loc)
	if err != nil {
		return Opened{}, err
	}
	if l.Backend == "postgres" {
		b, err := postgres.Open(ctx, l.URL, opt.postgres())
		if err != nil {
			return Opened{}, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
		return sharedOpened(b, l), nil
	}
	if l.Path, err = checkFile(l.Path); err != nil {
		return Opened{}, err
	}
	b, err := sqlite.Open(ctx, l.Path, opt.sqlite())
	if err != nil {
		return Opened{}, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return Opened{Store: store.New(b), Location: l, Display: b.Path(), SchemaVersion: sqlite.SchemaVersion}, nil
}

// checkFile applies the file rules to an existing store (a missing one is left to the
// backend, which says it is not initialized), and returns the path through the store
// folder's resolved path.
func checkFile(path string) (string, error) {
	if _, err := os.Lstat(path); os.IsNotExist(err) {
		return path, nil
	}
	if err := files.CheckPrivateFile(path, os.Getuid()); err != nil {
		return "", fmt.Errorf("%w: the store %s is refused: %v", store.ErrUnavailable, path, err)
	}
	dir, err := files.CheckPrivateDir(filepath.Dir(path), os.Getuid())
	if err != nil {
		return "", fmt.Errorf("%w: the store's folder is refused: %v", store.ErrUnavailable, err)
	}
	return filepath.Join(dir, filepath.Base(path)), nil
}

// Initialized is what Create did.
type Initialized struct {
	Opened
	Created       bool // a new store was made
	Upgraded      bool // an older schema was migrated (only with upgrade)
	UpgradeNeeded bool // the schema is older, and upgrade was not asked for: nothing changed
	FoundVersion  int  // the schema the store had before
}

// Create makes the store at loc, in a folder (created private, 0700, when missing) that
// only this user can change. On an existing store of this user's it changes nothing,
// and says whether its schema needs an upgrade, unless upgrade is set: then it migrates.
// It never adopts a file it did not create: an existing file that is not a sendonce
// store, or that fails the file rules, is refused (store.ErrUnavailable).
func Create(ctx context.Context, loc string, opt Options, upgrade bool) (Initialized, error) {
	l, err := Parse(loc)
	if err != nil {
		return Initialized{}, err
	}
	if l.Backend == "postgres" {
		return createShared(ctx, l, opt, upgrade)
	}
	dir := filepath.Dir(l.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Initialized{}, fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	real, err := files.CheckPrivateDir(dir, os.Getuid())
	if err != nil {
		return Initialized{}, fmt.Errorf("%w: the store's folder is refused: %v", store.ErrUnavailable, err)
	}
	l.Path = filepath.Join(real, filepath.Base(l.Path)) // no name is looked up again through a link
	sopt := opt.sqlite()
	if _, err := os.Lstat(l.Path); os.IsNotExist(err) {
		b, err := sqlite.Create(ctx, l.Path, sopt)
		if err != nil {
			return Initialized{}, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
		return Initialized{Opened: opened(b, l), Created: true}, nil
	}
	if _, err := checkFile(l.Path); err != nil {
		return Initialized{}, err
	}
	b, err := sqlite.Open(ctx, l.Path, sopt)
	switch {
	case err == nil:
		return Initialized{Opened: opened(b, l), FoundVersion: sqlite.SchemaVersion}, nil
	case errors.Is(err, store.ErrNotInitialized):
		return Initialized{}, fmt.Errorf("%w: %s exists and is not a sendonce store; init never adopts a file it did not create: remove it or name another file", store.ErrUnavailable, l.Path)
	case !errors.Is(err, store.ErrUpgradeNeeded):
		return Initialized{}, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	case !upgrade:
		return Initialized{UpgradeNeeded: true, Opened: Opened{Location: l, Display: absPath(l.Path), SchemaVersion: sqlite.SchemaVersion}}, nil
	}
	b, found, err := sqlite.Upgrade(ctx, l.Path, sopt)
	if err != nil {
		return Initialized{}, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return Initialized{Opened: opened(b, l), Upgraded: found != sqlite.SchemaVersion, FoundVersion: found}, nil
}

func opened(b *sqlite.Backend, l Location) Opened {
	return Opened{Store: store.New(b), Location: l, Display: b.Path(), SchemaVersion: sqlite.SchemaVersion}
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// createShared makes (or upgrades, with upgrade) the sendonce schema in a PostgreSQL
// database, under the schema's lock.
func createShared(ctx context.Context, l Location, opt Options, upgrade bool) (Initialized, error) {
	popt := opt.postgres()
	b, err := postgres.Create(ctx, l.URL, popt)
	switch {
	case err == nil:
		return Initialized{Opened: sharedOpened(b, l), Created: b.Found() == 0, FoundVersion: b.Found()}, nil
	case !errors.Is(err, store.ErrUpgradeNeeded):
		return Initialized{}, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	case !upgrade:
		return Initialized{UpgradeNeeded: true, Opened: Opened{Location: l, Display: l.String(), SchemaVersion: postgres.SchemaVersion}}, nil
	}
	b, found, err := postgres.Upgrade(ctx, l.URL, popt)
	if err != nil {
		return Initialized{}, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return Initialized{Opened: sharedOpened(b, l), Upgraded: found != postgres.SchemaVersion, FoundVersion: found}, nil
}

func sharedOpened(b *postgres.Backend, l Location) Opened {
	r := b.Replication()
	return Opened{Store: store.New(b), Location: l, Display: b.Display(), SchemaVersion: postgres.SchemaVersion, Replication: &r}
}

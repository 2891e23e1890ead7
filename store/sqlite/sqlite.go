// Package sqlite is the store.Backend for one workstation: a SQLite file in WAL mode
// with synchronous FULL, shared by every process on the machine. Claims run in
// BEGIN IMMEDIATE transactions, so of many processes claiming at once exactly one
// commits first.
package sqlite

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	sysclock "github.com/sendonce/sendonce/internal/clock"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/internal/files"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/store/internal/sqltx"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Options tune a backend. The zero value is what the CLI uses.
type Options struct {
	// LockTimeout is how long to wait for another process's transaction before failing
	// closed. Default 10s.
	LockTimeout time.Duration
	// Clock is the one clock every lease is measured by. Default time.Now.
	Clock func() time.Time

	// synchronous replaces PRAGMA synchronous=FULL; only this package's durability
	// test sets it ("OFF"), to show that the test notices weakened durability.
	synchronous string
}

// Backend is a SQLite store.Backend.
type Backend struct {
	db *sql.DB // owns conn; nothing runs statements on it (they would bypass turn)
	// conn is the one connection every transaction of this process runs on, one at a
	// time (turn); the backend begins and ends them itself (transaction.go).
	conn         *sql.Conn
	turn         turn
	unusable     error             // set, under turn, once the connection is closed or broken
	statements   *sqltx.Statements // prepared once on conn, reused by every transaction
	checkpoints  *checkpointer
	clock        func() time.Time
	path         string
	opened       os.FileInfo // the file as it was opened: it must still be the one at path
	foundVersion int         // the schema found when opened, before any migration
}

// Create makes a new store at path (its folder must exist): the file is created
// exclusively, mode 0600, without following a link, so a file someone else put there is
// never adopted. Only 'sendonce init' calls it: every other command opens with Open, so
// a typo in a path never silently makes a second store.
func Create(ctx context.Context, path string, opt Options) (*Backend, error) {
	f, err := files.CreateExclusive(path, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", path, err)
	}
	f.Close()
	b, err := open(path, opt, "rw")
	if err == nil {
		if err = b.migrate(ctx, migrateCreate); err != nil {
			b.Close()
		}
	}
	if err != nil {
		os.Remove(path) // ours, just made: a failed init leaves nothing to refuse later
		os.Remove(path + "-wal")
		os.Remove(path + "-shm")
		return nil, err
	}
	return b, nil
}

// Open opens an existing store. A missing, empty or foreign file is ErrNotInitialized;
// a schema older than this program's is store.ErrUpgradeNeeded (only Upgrade migrates),
// and one newer than it knows is an error too.
func Open(ctx context.Context, path string, opt Options) (*Backend, error) {
	return openExisting(ctx, path, opt, migrateNone)
}

// Upgrade opens an existing store and migrates it to this program's schema; it reports
// the schema it found.
func Upgrade(ctx context.Context, path string, opt Options) (*Backend, int, error) {
	b, err := openExisting(ctx, path, opt, migrateUpgrade)
	if err != nil {
		return nil, 0, err
	}
	return b, b.foundVersion, nil
}

// migration modes: what migrate may do with the schema it finds.
type migration int

const (
	migrateNone    migration = iota // open: only this program's schema
	migrateCreate                   // a new file: create the whole schema
	migrateUpgrade                  // an older sendonce schema: migrate it (never a file that is not a store)
)

func openExisting(ctx context.Context, path string, opt Options, mode migration) (*Backend, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%s does not exist: %w", path, store.ErrNotInitialized)
	case err != nil:
		return nil, err
	case fi.IsDir():
		return nil, fmt.Errorf("%s is a directory: %w", path, store.ErrNotInitialized)
	case fi.Size() == 0:
		return nil, fmt.Errorf("%s is empty: %w", path, store.ErrNotInitialized)
	}
	b, err := open(path, opt, "rw")
	if err != nil {
		return nil, openError(path, err)
	}
	if err := b.migrate(ctx, mode); err != nil {
		b.Close()
		return nil, openError(path, err)
	}
	if err := b.View(ctx, func(store.Tx) error { return nil }); err != nil { // a retired store fails here
		b.Close()
		return nil, openError(path, err)
	}
	return b, nil
}

// openError is an error opening the store at path as the user reads it: naming the
// file (SQLite's own, "unable to open database file (14)", names nothing), and what
// this user lacks when that is the cause.
func openError(path string, err error) error {
	if errors.Is(err, store.ErrUpgradeNeeded) || errors.Is(err, store.ErrNotInitialized) || strings.Contains(err.Error(), path) {
		return err // already says which store and what to do
	}
	return fmt.Errorf("the store %s cannot be opened: %w%s", path, err, accessHint(path))
}

// accessHint says what keeps this user from reading and writing the store: the file
// itself, its folder (SQLite makes its -wal and -shm files there), or one of those
// two files; "" when none of these is the cause.
func accessHint(path string) string {
	if f, err := os.OpenFile(path, os.O_RDWR, 0); errors.Is(err, fs.ErrPermission) {
		return fmt.Sprintf(" (this user cannot read and write the file: %v; run sendonce as the store's owner, or let it: chmod 600 %s)", errors.Unwrap(err), path)
	} else if err != nil {
		return fmt.Sprintf(" (the file cannot be opened for writing: %v)", errors.Unwrap(err))
	} else {
		f.Close()
	}
	for _, side := range []string{path + "-wal", path + "-shm"} {
		fi, err := os.Lstat(side)
		switch {
		case err == nil && !fi.Mode().IsRegular():
			return fmt.Sprintf(" (%s is not a regular file: SQLite keeps its write-ahead log there; remove what is in its place while no sendonce runs)", side)
		case err == nil:
			if f, err := os.OpenFile(side, os.O_RDWR, 0); err != nil {
				return fmt.Sprintf(" (this user cannot read and write %s: %v; run sendonce as the store's owner, or chmod 600 it)", side, errors.Unwrap(err))
			} else {
				f.Close()
			}
		}
	}
	dir := filepath.Dir(path)
	probe, err := os.CreateTemp(dir, ".sendonce-probe-*")
	if err != nil {
		return fmt.Sprintf(" (this user cannot create files in %s, where SQLite keeps the store's -wal and -shm files: %v)", dir, errors.Unwrap(err))
	}
	probe.Close()
	os.Remove(probe.Name())
	return ""
}

func open(path string, opt Options, mode string) (*Backend, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	lock := opt.LockTimeout
	if lock <= 0 {
		lock = 10 * time.Second
	}
	synchronous := cmp.Or(opt.synchronous, "FULL")
	db, err := sql.Open("sqlite", dataSource(abs, mode, lock, synchronous))
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(context.Background()) // connects: the file is open from here on
	if err != nil {
		db.Close()
		return nil, err
	}
	opened, err := os.Stat(abs)
	if err != nil {
		conn.Close()
		db.Close()
		return nil, err
	}
	turn := make(turn, 1)
	checkpoints, err := startCheckpointer(dataSource(abs, mode, restartWait, synchronous), 256, turn)
	if err != nil {
		conn.Close()
		db.Close()
		return nil, err
	}
	clock := opt.Clock
	if clock == nil {
		clock = sysclock.System
	}
	return &Backend{db: db, conn: conn, turn: turn, statements: sqltx.NewStatements(conn, 256), checkpoints: checkpoints,
		clock: clock, path: abs, opened: opened}, nil
}

// dataSource is the driver's name for a connection to the file at abs, through
// modernc's driver and SQLite's own unix VFS, unmodified: a lock is waited for up to
// busy, commits are synced as synchronous says, SQLite's own checkpoints are off (the
// checkpointer's job, off the claim path), and database/sql's transactions (migrations,
// tests) take the write lock at BEGIN, as the backend's own do.
func dataSource(abs, mode string, busy time.Duration, synchronous string) string {
	q := url.Values{}
	q.Set("mode", mode)
	q.Set("_txlock", "immediate")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "synchronous("+synchronous+")")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "wal_autocheckpoint(0)")
	return (&url.URL{Scheme: "file", Path: abs, RawQuery: q.Encode()}).String()
}

// Path is the store's absolute path.
func (b *Backend) Path() string { return b.path }

// Close closes the database; a transaction still running in another goroutine ends
// first, and every later one fails closed.
func (b *Backend) Close() error {
	b.checkpoints.close() // before the turn: a restart checkpoint may be waiting for it
	b.turn.take(context.Background())
	defer b.turn.give()
	if b.unusable == errClosed {
		return nil
	}
	b.unusable = errClosed
	b.statements.Close()
	b.conn.Close()
	return b.db.Close() // the last connection to the file checkpoints it and removes the WAL
}

// pageSize is a new store's page size in bytes.
const pageSize = 1024

// SchemaVersion is the newest schema this program knows.
const SchemaVersion = 7

// migrations[i] moves the schema from version i to i+1.
func migrations() []string {
	return []string{`
CREATE TABLE intents (
	id         INTEGER PRIMARY KEY,
	created_at INTEGER NOT NULL,
	revision   INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE keys (
	key       TEXT PRIMARY KEY,
	intent_id INTEGER NOT NULL REFERENCES intents(id),
	version   TEXT NOT NULL,
	strength  TEXT NOT NULL CHECK (strength IN ('strong', 'weak')),
	bound_at  INTEGER NOT NULL
);
CREATE INDEX keys_intent ON keys(intent_id);
CREATE TABLE token_counter (id INTEGER PRIMARY KEY CHECK (id = 1), last INTEGER NOT NULL);
INSERT INTO token_counter VALUES (1, 0);
CREATE TABLE attempts (
	token            INTEGER PRIMARY KEY,
	intent_id        INTEGER NOT NULL REFERENCES intents(id),
	revision         INTEGER NOT NULL,
	task             TEXT NOT NULL,
	dispatch_id      TEXT NOT NULL UNIQUE,
	claimed_at       INTEGER NOT NULL,
	lease_expires_at INTEGER NOT NULL,
	delivery         TEXT CHECK (delivery IN ('pending', 'confirmed', 'failed')),
	acceptance       TEXT CHECK (acceptance IN ('pending', 'accepted', 'rejected')),
	ended_at         INTEGER,
	evidence         TEXT NOT NULL DEFAULT '',
	chain_head       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX attempts_intent ON attempts(intent_id, token);
CREATE TABLE crossings (
	token      INTEGER NOT NULL REFERENCES attempts(token),
	boundary   TEXT NOT NULL,
	at         INTEGER NOT NULL,
	chain_head TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (token, boundary)
);
CREATE TABLE authorizers (name TEXT PRIMARY KEY, public_key BLOB NOT NULL, added_at INTEGER NOT NULL);
CREATE TABLE used_nonces (nonce TEXT PRIMARY KEY, used_at INTEGER NOT NULL);
CREATE TABLE events (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	at          INTEGER NOT NULL,
	intent_id   INTEGER NOT NULL,
	kind        TEXT NOT NULL,
	key         TEXT NOT NULL DEFAULT '',
	task        TEXT NOT NULL DEFAULT '',
	token       INTEGER NOT NULL DEFAULT 0,
	dispatch_id TEXT NOT NULL DEFAULT '',
	revision    INTEGER NOT NULL DEFAULT 0,
	detail      TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX events_intent ON events(intent_id, seq);
CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
CREATE TRIGGER tokens_only_increase BEFORE UPDATE ON token_counter WHEN NEW.last <= OLD.last BEGIN SELECT RAISE(ABORT, 'fencing tokens only increase'); END;
`, `
CREATE TABLE display_leases (
	display          TEXT PRIMARY KEY,
	task             TEXT NOT NULL,
	token            INTEGER NOT NULL,
	lease_expires_at INTEGER NOT NULL,
	released         INTEGER NOT NULL DEFAULT 0
);
`, `
CREATE TABLE provider_objects (
	object_id   TEXT PRIMARY KEY,
	dispatch_id TEXT NOT NULL,
	bound_at    INTEGER NOT NULL
);
`, `
CREATE TABLE store_meta (id INTEGER PRIMARY KEY CHECK (id = 1), store_id TEXT NOT NULL);
ALTER TABLE authorizers ADD COLUMN revoked_at INTEGER;
`, `
CREATE TABLE workstations (id TEXT PRIMARY KEY, public_key BLOB NOT NULL, registered_at INTEGER NOT NULL);
`, `
CREATE TABLE requests (
	scope       TEXT NOT NULL,
	id          TEXT NOT NULL,
	fingerprint TEXT NOT NULL,
	response    BLOB NOT NULL,
	at          INTEGER NOT NULL,
	PRIMARY KEY (scope, id)
);
`, `
ALTER TABLE attempts ADD COLUMN workstation TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN file_name TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN size INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN copied_from TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN source_token INTEGER NOT NULL DEFAULT 0;
ALTER TABLE store_meta ADD COLUMN retired_to TEXT NOT NULL DEFAULT '';
ALTER TABLE store_meta ADD COLUMN retired_at INTEGER NOT NULL DEFAULT 0;
`}
}

// afterMigration[v] runs in the same transaction right after the schema reaches v:
// the steps SQL alone cannot do.
var afterMigration = map[int]func(ctx context.Context, tx *sql.Tx) error{
	4: func(ctx context.Context, tx *sql.Tx) error {
		// A random id names this store in every signed statement, so one signature is
		// never accepted by two stores.
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO store_meta (id, store_id) VALUES (1, ?)", hex.EncodeToString(id[:])); err != nil {
			return err
		}
		return bindCurrentKeys(ctx, tx)
	},
}

// bindCurrentKeys binds, beside every key of an older scheme, the current scheme's key
// of the same destination and bytes to the same intent: after an upgrade every spelling
// that reached a consumed intent still reaches it.
func bindCurrentKeys(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, "SELECT key, intent_id, strength, bound_at FROM keys WHERE version != ?", gate.KeyVersion)
	if err != nil {
		return err
	}
	type row struct {
		key, strength string
		intent, at    int64
	}
	var old []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.key, &r.intent, &r.strength, &r.at); err != nil {
			rows.Close()
			return err
		}
		old = append(old, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, r := range old {
		k, err := gate.ParseKey(r.key)
		if err != nil {
			return fmt.Errorf("the stored key %q does not parse: %w", r.key, err)
		}
		up, err := k.Upgrade()
		if err != nil {
			continue // the current scheme refuses the identity: no current key can name it
		}
		var bound int64
		err = tx.QueryRowContext(ctx, "SELECT intent_id FROM keys WHERE key = ?", up.String()).Scan(&bound)
		switch {
		case err == nil && bound != r.intent:
			// Two spellings v1 kept apart are one destination now. Which intent the key
			// belongs to is for a person to decide: stop, and name them.
			return fmt.Errorf("the v1 keys of intents %d and %d name one destination under %s (%s): the store cannot be upgraded until a person settles which delivery it is; nothing was changed", bound, r.intent, gate.KeyVersion, up)
		case err == nil:
			continue
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO keys (key, intent_id, version, strength, bound_at) VALUES (?, ?, ?, ?, ?)",
			up.String(), r.intent, up.Version(), r.strength, r.at); err != nil {
			return err
		}
	}
	return nil
}

func (b *Backend) migrate(ctx context.Context, mode migration) error {
	var version int
	if err := b.conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("reading %s: %w", b.path, err)
	}
	b.foundVersion = version
	ms := migrations()
	switch {
	case version > len(ms):
		return fmt.Errorf("%s has schema version %d, newer than this sendonce knows (%d): upgrade sendonce", b.path, version, len(ms))
	case version == len(ms):
		return nil
	case version == 0 && mode != migrateCreate:
		return fmt.Errorf("%s: %w", b.path, store.ErrNotInitialized)
	case mode == migrateNone:
		return fmt.Errorf("%s has schema %d, older than this sendonce's %d: %w", b.path, version, len(ms), store.ErrUpgradeNeeded)
	}
	if version == 0 {
		// page_size and journal_mode are properties of the file, set before its first
		// table; neither can change inside a transaction. Small pages make a commit cheap:
		// a claim touches about a dozen pages, and the fsync that makes it durable costs
		// in proportion to the bytes of their WAL frames (see docs/benchmarks-history.md,
		// the gate store's cost per claim, 2026-12-01).
		if _, err := b.conn.ExecContext(ctx, fmt.Sprintf("PRAGMA page_size=%d", pageSize)); err != nil {
			return err
		}
		if _, err := b.conn.ExecContext(ctx, "PRAGMA journal_mode=WAL"); err != nil {
			return err
		}
	}
	if err := b.turn.take(ctx); err != nil {
		return err
	}
	defer b.turn.give()
	tx, err := b.conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// Read the version again under the write lock: another init may have won.
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return err
	}
	for ; version < len(ms); version++ {
		if _, err := tx.ExecContext(ctx, ms[version]); err != nil {
			return fmt.Errorf("migrating %s to schema %d: %w", b.path, version+1, err)
		}
		if after := afterMigration[version+1]; after != nil {
			if err := after(ctx, tx); err != nil {
				return fmt.Errorf("migrating %s to schema %d: %w", b.path, version+1, err)
			}
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", version+1)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// stillOpened fails closed if the file at the store's path is no longer the one this
// process opened (moved away, replaced by a restore, deleted): a long-lived process
// would otherwise go on deciding on a file nobody else reads.
func (b *Backend) stillOpened() error {
	now, err := os.Stat(b.path)
	if err == nil && os.SameFile(now, b.opened) {
		return nil
	}
	return fmt.Errorf("%w: %s is no longer the file this process opened (moved, replaced or deleted since): restart this process so that it opens the store that is there now", store.ErrUnavailable, b.path)
}

// checkRetired fails closed on a store that was copied into another: every command on
// it names the store it went to. A copy's own source transaction reads it itself.
func (b *Backend) checkRetired(t *sqltx.Tx) error {
	to, at, err := t.Retired()
	if err != nil || to == "" {
		return err
	}
	return fmt.Errorf("%w: %s was copied into %s at %s and retired; every workstation uses that store now: give --store %s (or SENDONCE_STORE)",
		store.ErrRetired, b.path, to, at.UTC().Format(time.RFC3339), to)
}

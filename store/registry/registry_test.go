package registry

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		path string // "" when refused as bad input
	}{
		{"/var/lib/sendonce/sendonce.db", "/var/lib/sendonce/sendonce.db"},
		{"sendonce.db", "sendonce.db"},
		{"./postgres:x", "./postgres:x"},
		{"state/with?question.db", "state/with?question.db"}, // a plain path is a path
		{"file:/var/lib/s.db", "/var/lib/s.db"},
		{"file:rel/s.db", "rel/s.db"},
		{"file:///var/lib/s.db", "/var/lib/s.db"},
		{"file://localhost/var/lib/s.db", "/var/lib/s.db"},
		{"file:/var/lib/s.db?mode=memory", ""}, // no private in-memory store by accident
		{"file:s.db?", ""},
		{"file:s.db#x", ""},
		{"file://otherhost/s.db", ""},
		{"file:", ""},
		{"postgres:/x", ""},
		{"postgres://me:secret@db/sendonce", ""}, // a password on a command line: refused
		{"postgresql://db/sendonce?password=secret", ""},
		{"sqlite:", ""},
		{"s3://bucket/s.db", ""},
		{"C:x", ""},
		{"", ""},
	} {
		l, err := Parse(tc.in)
		if strings.HasPrefix(tc.in, "postgres") && err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("Parse(%q): the error repeats the password: %v", tc.in, err)
		}
		switch {
		case tc.path == "" && !errors.Is(err, gate.ErrInvalid):
			t.Errorf("Parse(%q) = %+v, %v; want bad input", tc.in, l, err)
		case tc.path != "" && (err != nil || l.Path != tc.path || l.Backend != "sqlite"):
			t.Errorf("Parse(%q) = %+v, %v; want sqlite %q", tc.in, l, err, tc.path)
		}
	}
}

func TestParseSharedStore(t *testing.T) {
	for _, in := range []string{"postgres://sendonce@db.example.org/sendonce?sslmode=verify-full", "postgresql://db/sendonce"} {
		l, err := Parse(in)
		if err != nil || l.Backend != "postgres" || l.URL != in || l.Dir() != "" {
			t.Errorf("Parse(%q) = %+v, %v; want the postgres backend, no folder", in, l, err)
		}
	}
}

// TestOpenNeverCreates: only Create makes a store; Open of a missing one is
// ErrNotInitialized (and fails closed).
func TestOpenNeverCreates(t *testing.T) {
	ctx := context.Background()
	loc := filepath.Join(t.TempDir(), "sub", "s.db")
	if _, err := Open(ctx, loc, Options{}); !errors.Is(err, store.ErrNotInitialized) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open of a missing store: %v; want ErrNotInitialized and ErrUnavailable", err)
	}
	i, err := Create(ctx, "file:"+loc, Options{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if !i.Created {
		t.Fatalf("Create of a new store: %+v", i)
	}
	i.Store.Close()
	o, err := Open(ctx, loc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Store.Close()
	if o.Display != loc || o.Location.Dir() != filepath.Dir(loc) {
		t.Fatalf("opened %+v", o)
	}
}

// TestFileRules: every command refuses a store that is a link, is writable by group or
// others, or is owned by another user; init never adopts a file it did not create, and
// on our own store changes nothing.
func TestFileRules(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	loc := filepath.Join(dir, "s.db")
	i, err := Create(ctx, loc, Options{}, false)
	if err != nil {
		t.Fatal(err)
	}
	i.Store.Close()
	again, err := Create(ctx, loc, Options{}, false)
	if err != nil || again.Created || again.Upgraded || again.UpgradeNeeded {
		t.Fatalf("init on our own store: %+v, %v; want nothing changed", again, err)
	}
	again.Store.Close()

	refused := func(what, loc string) {
		t.Helper()
		if o, err := Open(ctx, loc, Options{}); !errors.Is(err, store.ErrUnavailable) {
			if err == nil {
				o.Store.Close()
			}
			t.Errorf("%s: Open = %v; want refused (fail closed)", what, err)
		}
	}
	link := filepath.Join(dir, "link.db")
	os.Symlink(loc, link)
	refused("a store named by a symbolic link", link)

	os.Chmod(loc, 0o660)
	refused("a group-writable store", loc)
	os.Chmod(loc, 0o600)

	if os.Getuid() == 0 {
		os.Chown(loc, 64001, 64001)
		refused("a store owned by another user", loc)
		os.Chown(loc, 0, 0)
	}

	foreign := filepath.Join(dir, "foreign.db")
	os.WriteFile(foreign, []byte("not a store"), 0o600)
	if _, err := Create(ctx, foreign, Options{}, false); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("init on a file that is not a sendonce store: %v; want refused", err)
	}
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	if _, err := Create(ctx, filepath.Join(open, "s.db"), Options{}, false); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("init in a folder everyone can write: %v; want refused", err)
	}
}

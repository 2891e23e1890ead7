package registry

import (
	"context"
	"errors"
	"path/filepath"
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
		{"postgres://db/sendonce", ""}, // not supported yet
		{"postgresql://db/sendonce", ""},
		{"sqlite:", ""},
		{"s3://bucket/s.db", ""},
		{"C:x", ""},
		{"", ""},
	} {
		l, err := Parse(tc.in)
		switch {
		case tc.path == "" && !errors.Is(err, gate.ErrInvalid):
			t.Errorf("Parse(%q) = %+v, %v; want bad input", tc.in, l, err)
		case tc.path != "" && (err != nil || l.Path != tc.path || l.Backend != "sqlite"):
			t.Errorf("Parse(%q) = %+v, %v; want sqlite %q", tc.in, l, err, tc.path)
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
	o, err := Create(ctx, "file:"+loc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	o.Store.Close()
	o, err = Open(ctx, loc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Store.Close()
	if o.Display != loc || o.Location.Dir() != filepath.Dir(loc) {
		t.Fatalf("opened %+v", o)
	}
}

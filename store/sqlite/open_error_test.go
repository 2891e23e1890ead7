package sqlite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/store"
)

// TestOpenErrorsNameTheStore: a store SQLite cannot open says which file and what is in
// the way, not SQLite's bare "unable to open database file (14)": here its -wal and
// -shm names are taken by folders (which root cannot open either), and, for a user
// other than root, the file is unreadable or read-only.
func TestOpenErrorsNameTheStore(t *testing.T) {
	ctx := context.Background()
	newStore := func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "s.db")
		b, err := Create(ctx, path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		b.Close()
		os.Remove(path + "-wal")
		os.Remove(path + "-shm")
		return path
	}
	type tc struct {
		name  string
		spoil func(path string)
		want  []string
	}
	cases := []tc{
		{"its -wal and -shm are folders", func(path string) { os.Mkdir(path+"-wal", 0o700); os.Mkdir(path+"-shm", 0o700) },
			[]string{"-wal is not a regular file", "remove what is in its place"}},
	}
	if os.Geteuid() != 0 { // root reads and writes whatever the mode says
		cases = append(cases,
			tc{"unreadable", func(path string) { os.Chmod(path, 0) }, []string{"cannot read and write the file", "chmod 600 "}},
		)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := newStore(t)
			c.spoil(path)
			b, err := Open(ctx, path, Options{})
			if err == nil {
				b.Close()
				t.Fatal("opened; want it refused")
			}
			msg := err.Error()
			if !strings.Contains(msg, "the store "+path+" cannot be opened") {
				t.Errorf("%v; want it to name the store %s", err, path)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%v; want it to say %q", err, w)
				}
			}
			if errors.Is(err, store.ErrNotInitialized) {
				t.Errorf("%v: an existing store read as none", err)
			}
		})
	}
}

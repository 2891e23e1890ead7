//go:build unix

package files

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// privateTree is a private folder (0700) with a file, a nested file, and the traps
// each case needs; outside is a folder beside it holding a marker file.
func privateTree(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root, outside = filepath.Join(base, "allowed"), filepath.Join(base, "outside")
	for _, d := range []string{root, filepath.Join(root, "sub"), outside} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "a.txt"), "inside")
	write(filepath.Join(root, "sub", "b.txt"), "nested")
	write(filepath.Join(outside, "marker"), "OUTSIDE-MARKER")
	return root, outside
}

// TestOpenBeneath: a file opens beneath the folder only by names, with no link followed
// at any step, through folders only the user can change.
func TestOpenBeneath(t *testing.T) {
	root, outside := privateTree(t)
	os.Symlink(filepath.Join(outside, "marker"), filepath.Join(root, "link.txt"))
	os.Symlink(outside, filepath.Join(root, "dirlink"))
	os.Symlink(filepath.Join(root, "a.txt"), filepath.Join(root, "innerlink.txt"))
	os.Mkdir(filepath.Join(root, "open"), 0o700)
	os.Chmod(filepath.Join(root, "open"), 0o777)
	os.WriteFile(filepath.Join(root, "open", "c.txt"), []byte("c"), 0o644)
	os.Mkdir(filepath.Join(root, "groupw"), 0o700)
	os.Chmod(filepath.Join(root, "groupw"), 0o770)
	os.WriteFile(filepath.Join(root, "groupw", "c.txt"), []byte("c"), 0o644)
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(root, "theirs"), 0o700)
	os.WriteFile(filepath.Join(root, "theirs", "c.txt"), []byte("c"), 0o644)
	otherUID := os.Getuid() + 1
	if os.Getuid() == 0 {
		otherUID = 64001
		os.Chown(filepath.Join(root, "theirs"), otherUID, otherUID)
	}
	d, err := OpenPrivateDir(root, os.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, c := range []struct {
		rel, want, refusal string
		notExist           bool
	}{
		{rel: "a.txt", want: "inside"},
		{rel: "sub/b.txt", want: "nested"},
		{rel: "sub//b.txt", want: "nested"},
		{rel: "link.txt", refusal: "is a link"},
		{rel: "innerlink.txt", refusal: "is a link"},
		{rel: "dirlink/marker", refusal: "is a link"},
		{rel: "sub/../a.txt", refusal: "without . or .."},
		{rel: "../outside/marker", refusal: "without . or .."},
		{rel: "./a.txt", refusal: "without . or .."},
		{rel: filepath.Join(outside, "marker"), refusal: "not a path beneath"},
		{rel: "", refusal: "not a path beneath"},
		{rel: "fifo", refusal: "not a regular file"},
		{rel: "sub", refusal: "is a folder"},
		{rel: "open/c.txt", refusal: "writable by its group and everyone"},
		{rel: "groupw/c.txt", refusal: "writable by its group"},
		{rel: "missing.txt", notExist: true},
		{rel: "a.txt/x", notExist: true},
		{rel: "nodir/x", notExist: true},
	} {
		f, err := d.Open(c.rel)
		switch {
		case c.want != "":
			if err != nil {
				t.Errorf("%q: %v; want it opened", c.rel, err)
				continue
			}
			b, _ := io.ReadAll(f)
			if string(b) != c.want || f.Name() != filepath.Join(d.Path(), filepath.FromSlash(filepath.Clean(c.rel))) {
				t.Errorf("%q: read %q as %s; want %q", c.rel, b, f.Name(), c.want)
			}
			f.Close()
		case c.notExist:
			if !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%q: %v; want fs.ErrNotExist", c.rel, err)
			}
		default:
			if err == nil {
				f.Close()
			}
			if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), c.refusal) {
				t.Errorf("%q: %v; want ErrUnsafe saying %q", c.rel, err, c.refusal)
			}
		}
	}
	if os.Getuid() == 0 {
		if _, err := d.Open("theirs/c.txt"); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "owned by uid 64001") {
			t.Errorf("a folder of another user's on the way: %v; want ErrUnsafe", err)
		}
	} else if d2, err := OpenPrivateDir(root, otherUID); err == nil {
		d2.Close()
		t.Errorf("a folder opened for a user who does not own it")
	}
	sub, err := d.Sub("sub")
	if err != nil {
		t.Fatal(err)
	}
	if f, err := sub.Open("b.txt"); err != nil {
		t.Errorf("b.txt beneath sub: %v", err)
	} else {
		f.Close()
	}
	sub.Close()
	if _, err := d.Sub("dirlink"); !errors.Is(err, ErrUnsafe) {
		t.Errorf("Sub through a link: %v; want ErrUnsafe", err)
	}
}

// TestOpenPrivateDirRefusesOthersWriting: the folder itself may not be writable by
// anyone else (as staging's may not).
func TestOpenPrivateDirRefusesOthersWriting(t *testing.T) {
	for _, mode := range []fs.FileMode{0o777, 0o770, 0o702, 0o1777} {
		dir := filepath.Join(t.TempDir(), "allowed")
		os.Mkdir(dir, 0o700)
		os.Chmod(dir, mode)
		if d, err := OpenPrivateDir(dir, os.Getuid()); !errors.Is(err, ErrUnsafe) {
			if err == nil {
				d.Close()
			}
			t.Errorf("mode %04o: %v; want ErrUnsafe", mode, err)
		}
	}
	dir := t.TempDir()
	d, err := OpenPrivateDir(dir, os.Getuid())
	if err != nil {
		t.Fatalf("a private folder: %v", err)
	}
	d.Close()
}

// TestOpenBeneathRace: while the name is swapped for a link to a file outside and back,
// as fast as it goes, every open reads the inside file or is refused: never the
// outside file's bytes.
func TestOpenBeneathRace(t *testing.T) {
	root, outside := privateTree(t)
	d, err := OpenPrivateDir(root, os.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	name := filepath.Join(root, "sub", "b.txt")
	real := filepath.Join(root, "sub", "real.txt")
	os.WriteFile(real, []byte("nested"), 0o644)
	marker := []byte("OUTSIDE-MARKER")
	var stop atomic.Bool
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // swaps the file name, and the folder on the way, for links out and back
		defer wg.Done()
		for i := 0; !stop.Load() || i < 1000; i++ {
			tmp := name + ".swap"
			os.Symlink(filepath.Join(outside, "marker"), tmp)
			os.Rename(tmp, name)
			os.Link(real, tmp)
			os.Rename(tmp, name)
			os.Rename(filepath.Join(root, "sub"), filepath.Join(root, "sub.away"))
			os.Symlink(outside, filepath.Join(root, "sub"))
			os.Remove(filepath.Join(root, "sub"))
			os.Rename(filepath.Join(root, "sub.away"), filepath.Join(root, "sub"))
			swaps.Add(1)
		}
	}()
	opened, refused := 0, 0
	for i := 0; i < 4000 || swaps.Load() < 1000; i++ {
		f, err := d.Open("sub/b.txt")
		if err != nil {
			refused++
			continue
		}
		b, _ := io.ReadAll(f)
		f.Close()
		if bytes.Contains(b, marker) {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("open %d read the file outside", i)
		}
		opened++
	}
	stop.Store(true)
	wg.Wait()
	if opened == 0 || refused == 0 {
		t.Errorf("%d opens read the file, %d were refused, over %d swaps: the race was not run both ways", opened, refused, swaps.Load())
	}
}

// TestOpenatNoFollow: the step used where openat2 is missing (kernels before 5.6, other
// Unix systems) refuses a link to a file or a folder, and opens a file.
func TestOpenatNoFollow(t *testing.T) {
	root, outside := privateTree(t)
	os.Symlink(filepath.Join(outside, "marker"), filepath.Join(root, "link.txt"))
	os.Symlink(outside, filepath.Join(root, "dirlink"))
	dir, err := os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	fd := int(dir.Fd())
	for _, c := range []struct {
		name  string
		flags int
	}{{"link.txt", syscall.O_RDONLY}, {"dirlink", syscall.O_RDONLY | syscall.O_DIRECTORY}} {
		if got, err := openatNoFollow(fd, c.name, c.flags); err == nil {
			syscall.Close(got)
			t.Errorf("%s: opened through a link", c.name)
		}
	}
	got, err := openatNoFollow(fd, "a.txt", syscall.O_RDONLY)
	if err != nil {
		t.Fatalf("a.txt: %v", err)
	}
	syscall.Close(got)
}

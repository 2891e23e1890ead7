//go:build unix

package evidence

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A bundle folder or archive someone else prepared: verify, classify and report never
// follow a link, never open a FIFO (it would hang them), cap every file, and an archive
// is refused before anything is written when it holds too many or too large entries,
// links, or the same entry twice.

// withTimeout fails the test if f does not return: a reader stuck on a FIFO would hang.
func withTimeout(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s did not return: it is stuck on what it opened", what)
		return nil
	}
}

func TestHostileBundleFolders(t *testing.T) {
	intact := filepath.Join(bundlesDir, "intact")
	for _, tc := range []struct {
		name   string
		mangle func(dir string)
		want   string
	}{
		{"the manifest is a link to a file elsewhere", func(dir string) {
			os.Rename(filepath.Join(dir, "manifest.json"), filepath.Join(dir, "..", "manifest.json"))
			os.Symlink(filepath.Join(dir, "..", "manifest.json"), filepath.Join(dir, "manifest.json"))
		}, "symbolic link"},
		{"the steps are a FIFO", func(dir string) {
			os.Remove(filepath.Join(dir, "steps.jsonl"))
			syscall.Mkfifo(filepath.Join(dir, "steps.jsonl"), 0o600)
		}, "FIFO"},
		{"the seal is a FIFO", func(dir string) {
			os.Remove(filepath.Join(dir, "seal.json"))
			syscall.Mkfifo(filepath.Join(dir, "seal.json"), 0o600)
		}, "FIFO"},
		{"a frame is a link", func(dir string) {
			frames, _ := filepath.Glob(filepath.Join(dir, "frames", "*.png"))
			os.Rename(frames[0], filepath.Join(dir, "..", "frame.png"))
			os.Symlink(filepath.Join(dir, "..", "frame.png"), frames[0])
		}, "not a regular file"},
		{"the manifest is huge", func(dir string) {
			f, _ := os.OpenFile(filepath.Join(dir, "manifest.json"), os.O_WRONLY|os.O_APPEND, 0)
			f.Truncate(maxManifestBytes + 1)
			f.Close()
		}, "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "b")
			copyDir(t, intact, dir)
			tc.mangle(dir)
			err := withTimeout(t, "Verify", func() error { _, err := Verify(dir, VerifyOptions{}); return err })
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Verify: %v; want ErrInvalid saying %q", err, tc.want)
			}
			err = withTimeout(t, "Open", func() error { _, _, err := Open(dir, VerifyOptions{}); return err })
			if err == nil {
				t.Fatal("Open accepted it")
			}
		})
	}
	t.Run("the bundle path is a link", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "b")
		copyDir(t, intact, dir)
		link := filepath.Join(t.TempDir(), "link")
		os.Symlink(dir, link)
		if _, err := Verify(link, VerifyOptions{}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Verify through a link: %v; want refused", err)
		}
	})
	t.Run("an archive that is a FIFO", func(t *testing.T) {
		fifo := filepath.Join(t.TempDir(), "b.tar.gz")
		syscall.Mkfifo(fifo, 0o600)
		err := withTimeout(t, "Open", func() error { _, _, err := Open(fifo, VerifyOptions{}); return err })
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "FIFO") {
			t.Fatalf("Open of a FIFO: %v; want refused", err)
		}
	})
}

// archive writes a .tar.gz of the given entries (name, size, typeflag; content zeros).
func archive(t *testing.T, entries []tar.Header) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, h := range entries {
		h := h
		h.Mode = 0o600
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg && h.Size < 1<<20 {
			tw.Write(make([]byte, h.Size))
		}
	}
	tw.Flush()
	zw.Close() // a too-large entry leaves the stream short: Unpack must refuse before reading it
	p := filepath.Join(t.TempDir(), "b.tar.gz")
	os.WriteFile(p, buf.Bytes(), 0o600)
	return p
}

func TestHostileArchives(t *testing.T) {
	reg := func(name string, size int64) tar.Header {
		return tar.Header{Name: name, Size: size, Typeflag: tar.TypeReg}
	}
	many := make([]tar.Header, 0, maxEntries+1)
	for i := 0; i <= maxEntries; i++ {
		many = append(many, reg("b/frames/"+strings.Repeat("a", 8)+string(rune('a'+i%26))+itoa(i)+".png", 0))
	}
	for _, tc := range []struct {
		name    string
		entries []tar.Header
		want    string
	}{
		{"too many entries", many, "more than"},
		{"an entry larger than a bundle file may be", []tar.Header{reg("b/frames/x.png", maxFrameBytes+1)}, "more than a bundle file"},
		{"a huge manifest", []tar.Header{reg("b/manifest.json", maxManifestBytes+1)}, "more than a bundle file"},
		{"the same entry twice", []tar.Header{reg("b/manifest.json", 2), reg("b/manifest.json", 2)}, "appears twice"},
		{"a symbolic link", []tar.Header{{Name: "b/steps.jsonl", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}}, "not a regular file"},
		{"an entry outside the bundle", []tar.Header{reg("b/../../evil", 1)}, "unsafe path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dest := t.TempDir()
			_, err := Unpack(archive(t, tc.entries), dest)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Unpack: %v; want ErrInvalid saying %q", err, tc.want)
			}
			if es, _ := os.ReadDir(dest); len(es) != 0 {
				t.Fatalf("Unpack wrote %d entries before refusing", len(es))
			}
		})
	}
}

func itoa(n int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
		if n == 0 {
			return string(b)
		}
	}
}

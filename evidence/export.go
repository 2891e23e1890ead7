package evidence

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/files"
)

// Export writes the bundle in dir as a gzip-compressed tar archive to w, files in a
// fixed order under one top folder named like the bundle.
func Export(dir string, w io.Writer) error {
	files, err := hashFiles(dir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "seal.json")); err == nil {
		files["seal.json"] = ""
	}
	names := sortedNames(files)
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	top := filepath.Base(filepath.Clean(dir))
	for _, rel := range names {
		b, err := readRegular(filepath.Join(dir, filepath.FromSlash(rel)), maxFileBytes(rel))
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: path.Join(top, rel), Mode: fileMode, Size: int64(len(b)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// maxArchive bounds what Unpack extracts, so a hostile archive cannot fill the disk;
// maxEntries bounds how many files it may hold.
const (
	maxArchive = 1 << 30
	maxEntries = 20000
)

// Unpack extracts an exported archive into a new folder under dest and returns the
// bundle's folder. It accepts only regular files under one top folder, with no absolute
// paths, no "..", no links.
func Unpack(archive, dest string) (string, error) {
	fi, err := os.Lstat(archive)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", invalid("%s is %s, not an archive", archive, describeMode(fi.Mode()))
	}
	// First every entry is checked, and nothing is written; then it is extracted.
	top := ""
	seen := map[string]bool{}
	var total int64
	err = eachEntry(archive, func(hdr *tar.Header, _ io.Reader) error {
		name := path.Clean(hdr.Name)
		first, rest, _ := strings.Cut(name, "/")
		total += hdr.Size
		switch {
		case hdr.Typeflag != tar.TypeReg:
			return invalid("archive entry %s is not a regular file", hdr.Name)
		case path.IsAbs(name) || strings.HasPrefix(name, "..") || rest == "" || strings.Contains(rest, ".."):
			return invalid("archive entry %s has an unsafe path", hdr.Name)
		case top != "" && first != top:
			return invalid("archive holds more than one bundle")
		case seen[name]:
			return invalid("archive entry %s appears twice", hdr.Name)
		case len(seen) >= maxEntries:
			return invalid("archive holds more than %d files", maxEntries)
		case hdr.Size < 0 || hdr.Size > maxFileBytes(rest):
			return invalid("archive entry %s is %d bytes, more than a bundle file may hold", hdr.Name, hdr.Size)
		case total > maxArchive:
			return invalid("archive is larger than %d bytes", maxArchive)
		}
		top, seen[name] = first, true
		return nil
	})
	if err != nil {
		return "", err
	}
	if top == "" {
		return "", invalid("archive %s is empty", archive)
	}
	err = eachEntry(archive, func(hdr *tar.Header, content io.Reader) error {
		first, rest, _ := strings.Cut(path.Clean(hdr.Name), "/")
		target := filepath.Join(dest, first, filepath.FromSlash(rest))
		if err := os.MkdirAll(filepath.Dir(target), dirMode); err != nil {
			return err
		}
		out, err := files.CreateExclusive(target, fileMode)
		if err != nil {
			return invalid("archive entry %s: %v", hdr.Name, err)
		}
		_, err = io.Copy(out, io.LimitReader(content, hdr.Size))
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return invalid("archive entry %s is truncated or unreadable: %v", hdr.Name, err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	dir := filepath.Join(dest, top)
	for _, sub := range []string{"frames", "ocr"} {
		os.MkdirAll(filepath.Join(dir, sub), dirMode) // empty folders are not archived
	}
	return dir, nil
}

// eachEntry reads the archive's entries in order (the file opened without following a
// link), stopping at the first error fn returns.
func eachEntry(archive string, fn func(*tar.Header, io.Reader) error) error {
	f, err := files.OpenNoFollow(archive, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return invalid("%s is not a gzip archive: %v", archive, err)
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return invalid("%s is truncated or unreadable: %v", archive, err)
		}
		if err := fn(hdr, tr); err != nil {
			return err
		}
	}
}

// maxFileBytes is the cap for a bundle file by its name.
func maxFileBytes(rel string) int64 {
	switch rel {
	case "manifest.json":
		return maxManifestBytes
	case "seal.json":
		return maxSealBytes
	case "steps.jsonl":
		return maxStepsBytes
	}
	return maxFrameBytes
}

// Open verifies a bundle folder, or an exported .tar.gz archive unpacked into a
// temporary folder that cleanup removes.
func Open(pathname string, opt VerifyOptions) (b *Bundle, cleanup func(), err error) {
	fi, err := os.Lstat(pathname)
	if err != nil {
		return nil, func() {}, invalid("%v", err)
	}
	if fi.IsDir() {
		b, err := Verify(pathname, opt)
		return b, func() {}, err
	}
	tmp, err := os.MkdirTemp("", "sendonce-bundle-")
	if err != nil {
		return nil, func() {}, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	dir, err := Unpack(pathname, tmp)
	if err != nil {
		cleanup()
		return nil, func() {}, fmt.Errorf("%s: %w", pathname, err)
	}
	b, err = Verify(dir, opt)
	if err != nil {
		cleanup()
		return nil, func() {}, err
	}
	return b, cleanup, nil
}

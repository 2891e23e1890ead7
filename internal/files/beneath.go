package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrFolder is Open's refusal of a name that is a folder (with ErrUnsafe).
var ErrFolder = errors.New("is a folder")

// Dir is an open folder that only one user (and root) can change, for opening what is
// beneath it by names that are resolved from the open folder, one step at a time, with
// no link followed: once it is open, nothing done to names above it or beside it
// changes what a name beneath it opens, and nothing a name beneath it leads to is
// outside it.
type Dir struct {
	f    *os.File
	path string // the folder's path, for names and errors
	uid  int
	// held are the folders between the first Dir and this one, kept open (on Windows an
	// open folder cannot be renamed or removed, which is what holds the chain there).
	held []*os.File
}

// OpenPrivateDir checks dir as CheckPrivateDir does (it, and every folder above it,
// only uid and root can change) and opens it. Close it when done.
func OpenPrivateDir(dir string, uid int) (*Dir, error) {
	real, err := CheckPrivateDir(dir, uid)
	if err != nil {
		return nil, err
	}
	f, err := openDir(real)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.IsDir() {
		err = fmt.Errorf("%w: %s is not a folder", ErrUnsafe, real)
	}
	if err == nil {
		err = checkStep(f, fi, real, uid) // what was checked by name is what is open
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Dir{f: f, path: real, uid: uid}, nil
}

// Path is the folder's path (its links resolved).
func (d *Dir) Path() string { return d.path }

// Close closes the folder.
func (d *Dir) Close() error {
	for _, h := range d.held {
		h.Close()
	}
	return d.f.Close()
}

// ReadDir lists the folder's entries, once per Dir.
func (d *Dir) ReadDir() ([]fs.DirEntry, error) { return d.f.ReadDir(-1) }

// Open opens the regular file at rel beneath the folder: rel is a relative path (with
// "/" or the OS's separator) of names, none of them "." or "..". No link is followed at
// any step (a link is refused, ErrUnsafe); every folder on the way must be owned by the
// user and not writable by its group or others (ErrUnsafe otherwise: another user could
// put a file of theirs there); the file must be a regular file (a FIFO or a device is
// refused, without waiting on it). The file's Name is the folder's path joined with rel.
// A name that is not there is fs.ErrNotExist.
func (d *Dir) Open(rel string) (*os.File, error) {
	f, chain, err := d.walk(rel, false)
	for _, h := range chain {
		h.Close()
	}
	return f, err
}

// Sub opens the folder at rel beneath the folder, by Open's rules.
func (d *Dir) Sub(rel string) (*Dir, error) {
	f, chain, err := d.walk(rel, true)
	if err != nil {
		return nil, err
	}
	held := append([]*os.File{}, d.held...)
	if holdChain {
		held = append(append(held, d.f), chain...)
	} else {
		for _, h := range chain {
			h.Close()
		}
	}
	return &Dir{f: f, path: f.Name(), uid: d.uid, held: held}, nil
}

// splitRel splits a relative path into its names, refusing what could leave the
// folder or name it twice.
func splitRel(rel string) ([]string, error) {
	if rel == "" || filepath.IsAbs(rel) || filepath.VolumeName(rel) != "" {
		return nil, fmt.Errorf("%w: %q is not a path beneath a folder", ErrUnsafe, rel)
	}
	names := strings.FieldsFunc(rel, func(r rune) bool { return r == '/' || r == filepath.Separator })
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: %q names no file", ErrUnsafe, rel)
	}
	for _, n := range names {
		if n == "." || n == ".." || !validName(n) {
			return nil, fmt.Errorf("%w: %q has the name %q, which is not a file's name: give the path without . or ..", ErrUnsafe, rel, n)
		}
	}
	return names, nil
}

// walk opens each name of rel in turn from the folder; the folders it opened on the way
// (the last one excluded) are returned for the caller to close or hold.
func (d *Dir) walk(rel string, wantDir bool) (*os.File, []*os.File, error) {
	names, err := splitRel(rel)
	if err != nil {
		return nil, nil, err
	}
	cur, path := d.f, d.path
	var chain []*os.File
	fail := func(err error) (*os.File, []*os.File, error) {
		for _, h := range chain {
			h.Close()
		}
		return nil, nil, err
	}
	for i, name := range names {
		folder := i < len(names)-1 || wantDir
		next := filepath.Join(path, name)
		f, err := openStep(cur, next, name, folder)
		switch {
		case err != nil && isLinkError(err), errors.Is(err, ErrUnsafe):
			return fail(fmt.Errorf("%w: %s is a link: no link is followed beneath %s; name the file itself", ErrUnsafe, next, d.path))
		case err != nil && isNotFolder(err) && stepIsLink(cur, next, name):
			return fail(fmt.Errorf("%w: %s is a link: no link is followed beneath %s; name the file itself", ErrUnsafe, next, d.path))
		case err != nil && isNotFolder(err):
			return fail(fmt.Errorf("%s is not a folder: %w", next, fs.ErrNotExist))
		case err != nil:
			return fail(&fs.PathError{Op: "open", Path: next, Err: unwrapPath(err)})
		}
		fi, err := f.Stat()
		switch {
		case err != nil:
		case folder && !fi.IsDir():
			err = fmt.Errorf("%s is not a folder: %w", next, fs.ErrNotExist)
		case folder:
			err = checkStep(f, fi, next, d.uid)
		case fi.IsDir():
			err = fmt.Errorf("%w: %s %w; name a file", ErrUnsafe, next, ErrFolder)
		case !fi.Mode().IsRegular():
			err = fmt.Errorf("%w: %s is not a regular file", ErrUnsafe, next)
		}
		if err != nil {
			f.Close()
			return fail(err)
		}
		if i < len(names)-1 {
			chain = append(chain, f)
		}
		cur, path = f, next
	}
	return cur, chain, nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

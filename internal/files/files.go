// Package files holds the file-system rules that keep other local users out: a folder
// whose contents only its owner can change, files opened and created without following
// links, and renames that never replace. Each rule has an implementation per OS with
// the same guarantee: owners and mode bits on Unix (Linux, macOS), owners and access
// control lists on Windows.
package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrUnsafe marks a folder or file another local user could change.
var ErrUnsafe = errors.New("unsafe path")

// CheckPrivateDir says whether dir is a folder that only uid (and root) can change: dir
// itself is owned by uid and not writable by group or others, and every folder above
// it, up to the root, is owned by uid or root and not writable by group or others,
// except a sticky-bit folder such as /tmp (where others cannot rename or remove what is
// not theirs). The path is checked as given, every link on it included (a link must be
// uid's or root's: another user could point it elsewhere after the check), and as its
// links resolve. It returns the resolved path: use that one from then on, so that
// nothing is looked up again through a name. dir must exist.
//
// On Windows uid is not used: the owner must be this process's user, "root" is the
// system, the administrators and TrustedInstaller, "others" and what they may do are read
// from each folder's access list, and a link or junction on the way is refused
// (checkOwn).
func CheckPrivateDir(dir string, uid int) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%w: %s is not a folder", ErrUnsafe, dir)
	}
	if err := checkOwn(real, fi, uid, false); err != nil {
		return "", err
	}
	if lfi, err := os.Lstat(abs); err != nil {
		return "", err
	} else if lfi.Mode()&(fs.ModeSymlink|fs.ModeIrregular) != 0 { // a link, or a Windows junction
		if err := checkOwn(abs, lfi, uid, true); err != nil { // the link itself
			return "", err
		}
	}
	for _, p := range []string{abs, real} {
		for d := filepath.Dir(p); ; d = filepath.Dir(d) {
			fi, err := os.Lstat(d)
			if err != nil {
				return "", err
			}
			if err := checkOwn(d, fi, uid, true); err != nil {
				return "", err
			}
			if filepath.Dir(d) == d { // the root: / (C:\ on Windows)
				break
			}
		}
	}
	return real, nil
}

// CheckPrivateFile says whether path is a regular file, not a link, owned by uid and
// not writable by group or others.
func CheckPrivateFile(path string, uid int) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%w: %s is a symbolic link; name the file itself", ErrUnsafe, path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%w: %s is not a regular file", ErrUnsafe, path)
	}
	return checkOwn(path, fi, uid, false)
}

// CreateExclusive creates path for writing with mode perm: it fails if anything, a link
// included, is already there.
func CreateExclusive(path string, perm fs.FileMode) (*os.File, error) {
	return OpenNoFollow(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
}

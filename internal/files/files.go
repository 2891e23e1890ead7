// Package files holds the file-system rules that keep other local users out: a folder
// whose contents only its owner can change, and files created exclusively without
// following links.
package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrUnsafe marks a folder or file another local user could change.
var ErrUnsafe = errors.New("unsafe path")

// CheckPrivateDir says whether dir is a folder that only uid (and root) can change: dir
// itself is owned by uid and not writable by group or others, and every folder above
// it, up to /, is owned by uid or root and not writable by group or others, except a
// sticky-bit folder such as /tmp (where others cannot rename or remove what is not
// theirs). The path is checked as given, every link on it included (a link must be
// uid's or root's: another user could point it elsewhere after the check), and as its
// links resolve. It returns the resolved path: use that one from then on, so that
// nothing is looked up again through a name. dir must exist.
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
	} else if lfi.Mode()&fs.ModeSymlink != 0 {
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
			if d == "/" {
				break
			}
		}
	}
	return real, nil
}

// checkOwn checks one folder (or a link in the chain): its owner is uid (or root, for an
// ancestor), and it is not writable by group or others (a sticky-bit ancestor is).
func checkOwn(path string, fi fs.FileInfo, uid int, ancestor bool) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%w: cannot read the owner of %s", ErrUnsafe, path)
	}
	owner := int(st.Uid)
	switch {
	case owner != uid && !(ancestor && owner == 0):
		return fmt.Errorf("%w: %s is owned by uid %d, not by this user (uid %d)%s", ErrUnsafe, path, owner, uid, map[bool]string{true: " or root", false: ""}[ancestor])
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil // a link's own mode means nothing; its folder is checked, and what it points to
	case fi.Mode().Perm()&0o022 != 0 && !(ancestor && fi.Mode()&fs.ModeSticky != 0):
		return fmt.Errorf("%w: %s is writable by %s (mode %04o): another user could change what is in it", ErrUnsafe, path, writers(fi.Mode()), fi.Mode().Perm())
	}
	return nil
}

func writers(m fs.FileMode) string {
	switch {
	case m&0o020 != 0 && m&0o002 != 0:
		return "its group and everyone"
	case m&0o020 != 0:
		return "its group"
	}
	return "everyone"
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
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm)
}

//go:build unix

package files

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// OpenNoFollow opens path with flag and perm, failing if its last element is a symbolic
// link; a FIFO or device does not block the open.
func OpenNoFollow(path string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
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
		return fmt.Errorf("%w: %s is writable by %s (mode %04o): another user could change what is in it", ErrUnsafe, path, openTo(fi.Mode().Perm()&0o022), fi.Mode().Perm())
	}
	return nil
}

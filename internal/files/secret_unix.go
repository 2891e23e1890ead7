//go:build unix

package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

func isLinkErrno(err error) bool {
	return errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EMLINK)
}

// checkSecret: owned by uid, no permission bit for its group or others, and no access
// list that could grant what the mode bits do not.
func checkSecret(f *os.File, fi fs.FileInfo, path, name string, uid int) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%w: cannot read the owner of %s", ErrUnsafe, name)
	}
	if owner := int(st.Uid); owner != uid {
		return fmt.Errorf("%w: %s is owned by uid %d, not by this user (uid %d): another user could change it; make a copy of your own (cp %s NEW && chmod 600 NEW) and name that", ErrUnsafe, name, owner, uid, path)
	}
	if hasAccessListFD(f) {
		return fmt.Errorf("%w: %s carries an access list that may let others read it: setfacl -b %s && chmod 600 %s", ErrUnsafe, name, path, path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%w: %s is open to %s (mode %04o): a secret must be yours alone: chmod 600 %s", ErrUnsafe, name, openTo(perm), perm, path)
	}
	return nil
}

// openTo says who the group and other bits of perm let in (to read or write, as perm
// holds the bits of one or of both).
func openTo(perm fs.FileMode) string {
	switch {
	case perm&0o070 != 0 && perm&0o007 != 0:
		return "its group and everyone"
	case perm&0o070 != 0:
		return "its group"
	}
	return "everyone"
}

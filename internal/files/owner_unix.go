//go:build unix

package files

import (
	"io/fs"
	"os"
	"syscall"
)

// OwnerIDs is a file's owner and group (ok false where the system has none to give).
func OwnerIDs(fi fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}

// LockExclusive takes an exclusive lock on the open file f, waiting for it; it is
// released when f is closed.
func LockExclusive(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
}

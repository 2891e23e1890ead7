package files

import (
	"os"

	"golang.org/x/sys/unix"
)

// hasAccessListFD says whether the open file carries a POSIX access list with entries
// beyond its mode bits (only such a list is stored as the attribute).
func hasAccessListFD(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	found := false
	rc.Control(func(fd uintptr) {
		n, err := unix.Fgetxattr(int(fd), "system.posix_acl_access", nil)
		found = err == nil && n > 0
	})
	return found
}

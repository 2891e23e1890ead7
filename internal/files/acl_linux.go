package files

import "syscall"

// HasAccessList says whether path carries a POSIX access control list, which may grant
// what its mode bits do not.
func HasAccessList(path string) bool {
	n, err := syscall.Getxattr(path, "system.posix_acl_access", nil)
	return err == nil && n > 0
}

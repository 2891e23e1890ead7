//go:build unix && !linux

package files

import "os"

// hasAccessListFD: only Linux's POSIX access lists are read (as HasAccessList).
func hasAccessListFD(*os.File) bool { return false }

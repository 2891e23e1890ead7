//go:build !linux

package files

// HasAccessList: only Linux's POSIX access lists are read; elsewhere none is seen.
func HasAccessList(string) bool { return false }

//go:build unix && !linux

package files

// openat opens one name in the folder dirfd with O_NOFOLLOW (no openat2 here).
func openat(dirfd int, name string, flags int) (int, error) {
	return openatNoFollow(dirfd, name, flags)
}

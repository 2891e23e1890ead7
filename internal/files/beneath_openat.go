//go:build unix

package files

import (
	"errors"

	"golang.org/x/sys/unix"
)

// openatNoFollow opens one name in the folder dirfd, refusing a link (O_NOFOLLOW).
func openatNoFollow(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags|unix.O_NOFOLLOW, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return fd, err
	}
}

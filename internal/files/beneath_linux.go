package files

import (
	"errors"

	"golang.org/x/sys/unix"
)

// openat opens name in the folder dirfd with openat2: beneath it (RESOLVE_BENEATH), no
// symbolic or magic link at any step (RESOLVE_NO_SYMLINKS, RESOLVE_NO_MAGICLINKS). A
// kernel without openat2 (before 5.6), or a sandbox that forbids it, gets openat with
// O_NOFOLLOW: the same guarantee for a single name.
func openat(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{Flags: uint64(flags),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
		switch {
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
			continue
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
			return openatNoFollow(dirfd, name, flags)
		case errors.Is(err, unix.EXDEV):
			return -1, unix.ELOOP // it would have left the folder: only a link does that
		}
		return fd, err
	}
}

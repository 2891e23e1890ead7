//go:build unix

package files

import (
	"errors"
	"io/fs"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// holdChain: on Unix a folder's descriptor anchors what is opened from it; the folders
// above need not stay open.
const holdChain = false

func openDir(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
}

// openStep opens one name (no separator) in the open folder parent, never following a
// link; a FIFO or device does not block the open. name is the result's Name.
func openStep(parent *os.File, name, base string, folder bool) (*os.File, error) {
	flags := unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY
	if folder {
		flags |= unix.O_DIRECTORY
	}
	fd, err := openat(int(parent.Fd()), base, flags)
	runtime.KeepAlive(parent)
	if err != nil {
		return nil, &fs.PathError{Op: "openat", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

func isNotFolder(err error) bool { return errors.Is(err, syscall.ENOTDIR) }

// validName: any name without a separator or NUL.
func validName(n string) bool {
	for i := 0; i < len(n); i++ {
		if n[i] == 0 || n[i] == '/' {
			return false
		}
	}
	return true
}

// checkStep: a folder on the way is owned by uid and writable by no one else.
func checkStep(_ *os.File, fi fs.FileInfo, path string, uid int) error {
	return checkOwn(path, fi, uid, false)
}

// stepIsLink says whether base in the open folder parent is a link (opening a link as
// a folder without following it fails as "not a folder"); it only chooses the message.
func stepIsLink(parent *os.File, _, base string) bool {
	var st unix.Stat_t
	err := unix.Fstatat(int(parent.Fd()), base, &st, unix.AT_SYMLINK_NOFOLLOW)
	runtime.KeepAlive(parent)
	return err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

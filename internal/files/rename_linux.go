package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// RenameNoReplace renames from to to, which must not exist (fs.ErrExist if it does).
// Where the filesystem cannot refuse to replace (no RENAME_NOREPLACE), it is checked
// first: not atomic, so it holds only in a folder no other user can change, which is
// where sendonce renames (a private evidence root, checked).
func RenameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		if _, err := os.Lstat(to); err == nil {
			return fmt.Errorf("%s: %w", to, fs.ErrExist)
		}
		return os.Rename(from, to)
	}
	if errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("%s: %w", to, fs.ErrExist)
	}
	return err
}

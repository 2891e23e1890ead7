package files

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

// RenameNoReplace renames from to to, which must not exist (fs.ErrExist if it does):
// renamex_np with RENAME_EXCL.
func RenameNoReplace(from, to string) error {
	err := unix.RenamexNp(from, to, unix.RENAME_EXCL)
	if errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("%s: %w", to, fs.ErrExist)
	}
	return err
}

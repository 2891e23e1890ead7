package files

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/windows"
)

// RenameNoReplace renames from to to, which must not exist (fs.ErrExist if it does):
// MoveFileEx without MOVEFILE_REPLACE_EXISTING.
func RenameNoReplace(from, to string) error {
	f, err := windows.UTF16PtrFromString(from)
	if err != nil {
		return err
	}
	t, err := windows.UTF16PtrFromString(to)
	if err != nil {
		return err
	}
	err = windows.MoveFileEx(f, t, 0)
	if errors.Is(err, windows.ERROR_ALREADY_EXISTS) || errors.Is(err, windows.ERROR_FILE_EXISTS) {
		return fmt.Errorf("%s: %w", to, fs.ErrExist)
	}
	return err
}

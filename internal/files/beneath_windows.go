package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/windows"
)

// holdChain: on Windows each folder is opened by its path under the one above it, which
// is held open meanwhile: Go opens without FILE_SHARE_DELETE, so no folder of the chain
// can be renamed, removed or replaced while its handle is open.
const holdChain = true

func openDir(path string) (*os.File, error) { return OpenNoFollow(path, os.O_RDONLY, 0) }

// openStep opens name (the path of base under parent, which is held open) itself, not
// what a link or junction there points to (refused, ErrUnsafe).
func openStep(_ *os.File, name, _ string, _ bool) (*os.File, error) {
	return OpenNoFollow(name, os.O_RDONLY, 0)
}

func isNotFolder(err error) bool {
	return errors.Is(err, windows.ERROR_PATH_NOT_FOUND) || errors.Is(err, windows.ERROR_DIRECTORY)
}

// validName refuses what Windows reads as more than a name: a separator, a drive or
// stream (":"), wildcards, the characters names cannot hold, and a name ending in a dot
// or a space (Windows drops them, so "..." would name the folder above).
func validName(n string) bool {
	return !strings.ContainsAny(n, "\\/:*?\"<>|\x00") && strings.TrimRight(n, ". ") == n
}

// checkStep: a folder on the way passes checkOwn, read from its open handle.
func checkStep(f *os.File, fi fs.FileInfo, path string, _ int) error {
	if isLink(fi) {
		return fmt.Errorf("%w: %s is a link or a junction", ErrUnsafe, path)
	}
	sd, err := windows.GetSecurityInfo(windows.Handle(f.Fd()), windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return fmt.Errorf("%w: cannot read the owner and access list of %s: %v", ErrUnsafe, path, err)
	}
	user, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return fmt.Errorf("%w: cannot tell this process's user: %v", ErrUnsafe, err)
	}
	return checkSDDL(path, sd.String(), user.User.Sid.String(), false, sameSID)
}

// stepIsLink: OpenNoFollow refuses a link itself on Windows, so a folder that is not
// one is no link.
func stepIsLink(_ *os.File, _, _ string) bool { return false }

package files

import (
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/windows"
)

// isLinkErrno: OpenNoFollow refuses a link or junction itself, with ErrUnsafe.
func isLinkErrno(error) bool { return false }

// checkSecret reads the open file's own security descriptor: owned by this process's
// user, and no one else (the system and the administrators aside) may read or change it.
func checkSecret(f *os.File, _ fs.FileInfo, path, name string, _ int) error {
	sd, err := windows.GetSecurityInfo(windows.Handle(f.Fd()), windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return fmt.Errorf("%w: cannot read the owner and access list of %s: %v", ErrUnsafe, name, err)
	}
	user, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return fmt.Errorf("%w: cannot tell this process's user: %v", ErrUnsafe, err)
	}
	return checkSecretSDDL(path, sd.String(), user.User.Sid.String(), sameSID)
}

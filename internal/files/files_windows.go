package files

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/windows"
)

// OpenNoFollow opens path with flag and perm, failing if its last element is a symbolic
// link or a junction: the name itself is opened (FILE_FLAG_OPEN_REPARSE_POINT, so
// nothing a link points to is created or opened), and refused if it is a reparse point.
func OpenNoFollow(path string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.FILE_FLAG_OPEN_REPARSE_POINT, perm)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && isLink(fi) {
		err = fmt.Errorf("%w: %s is a link or a junction; name the file itself", ErrUnsafe, path)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// isLink: a symbolic link, or a junction (Go reports a reparse point it does not
// follow as irregular).
func isLink(fi fs.FileInfo) bool { return fi.Mode()&(fs.ModeSymlink|fs.ModeIrregular) != 0 }

// checkOwn checks one folder, file or link in the chain against its security
// descriptor (checkSDDL): uid is not used on Windows. A link or junction on the way is
// refused: its own access list is not what decides where it leads.
func checkOwn(path string, fi fs.FileInfo, _ int, ancestor bool) error {
	if isLink(fi) {
		return fmt.Errorf("%w: %s is a link or a junction: on Windows, give the path without links", ErrUnsafe, path)
	}
	sd, err := windows.GetNamedSecurityInfo(path, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return fmt.Errorf("%w: cannot read the owner and access list of %s: %v", ErrUnsafe, path, err)
	}
	user, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return fmt.Errorf("%w: cannot tell this process's user: %v", ErrUnsafe, err)
	}
	return checkSDDL(path, sd.String(), user.User.Sid.String(), ancestor, sameSID)
}

// sameSID compares two accounts as Windows does: either may be a SID string or an SDDL
// abbreviation (BA, LA, NS…).
func sameSID(a, b string) bool {
	if a == b {
		return true
	}
	x, err := windows.StringToSid(a)
	if err != nil {
		return false
	}
	y, err := windows.StringToSid(b)
	return err == nil && x.Equals(y)
}

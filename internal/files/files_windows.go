package files

import (
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/windows"
)

// OpenNoFollow opens path with flag and perm, failing if its last element is a symbolic
// link (or another reparse point): Windows has no O_NOFOLLOW, so the file opened is
// checked to be the one the name holds, and the name not to be a link.
func OpenNoFollow(path string, flag int, perm fs.FileMode) (*os.File, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("%w: %s is a symbolic link", ErrUnsafe, path)
	}
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	opened, err := f.Stat()
	if err == nil {
		var named fs.FileInfo
		named, err = os.Lstat(path)
		if err == nil && (named.Mode()&fs.ModeSymlink != 0 || !os.SameFile(opened, named)) {
			err = fmt.Errorf("%w: %s was replaced by a link or another file while it was opened", ErrUnsafe, path)
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkOwn checks one folder, file or link in the chain against its security
// descriptor (checkSDDL): uid is not used on Windows.
func checkOwn(path string, _ fs.FileInfo, _ int, ancestor bool) error {
	sd, err := windows.GetNamedSecurityInfo(path, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return fmt.Errorf("%w: cannot read the owner and access list of %s: %v", ErrUnsafe, path, err)
	}
	user, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return fmt.Errorf("%w: cannot tell this process's user: %v", ErrUnsafe, err)
	}
	return checkSDDL(path, sd.String(), user.User.Sid.String(), ancestor)
}

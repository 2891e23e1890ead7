package files

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// ReadSecret reads a file that holds a secret (a password, an access token, the
// hashes of bearer tokens), checked as the store and the workstation key are: a regular
// file, not a link, owned by uid, that no one else may read or change (mode bits on
// Unix, and a Linux access list with extra entries refused; the access list on
// Windows). The checks are made on the descriptor the bytes are read from, so nothing
// swapped in between is read. what names the file in errors before its path ("the
// token file"; "" for the path alone); each refusal matches ErrUnsafe and says the command that fixes it. A file of
// more than max bytes is refused. A missing file is fs.ErrNotExist.
func ReadSecret(path, what string, uid int, max int64) ([]byte, error) {
	name := strings.TrimSpace(what + " " + path)
	f, err := OpenNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		if isLinkError(err) {
			return nil, fmt.Errorf("%w: %s is a symbolic link: name the file itself (a link could be pointed elsewhere)", ErrUnsafe, name)
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrUnsafe, name)
	}
	if err := checkSecret(f, fi, path, name, uid); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes: it is not one", name, max)
	}
	return b, nil
}

// isLinkError: opening a link with O_NOFOLLOW fails with ELOOP (Linux, macOS) or
// EMLINK (FreeBSD); on Windows OpenNoFollow says ErrUnsafe itself.
func isLinkError(err error) bool {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return isLinkErrno(pe.Err)
	}
	return isLinkErrno(err)
}

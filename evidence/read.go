package evidence

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/sendonce/sendonce/internal/files"
)

// Reading a bundle folder someone else may have prepared: every file is opened without
// following a link, only when it is a regular file (a FIFO would hang the reader), and
// read up to a cap, so verify, classify and report cannot be led out of the folder,
// stalled or filled up.

// Caps on what one bundle file may hold.
const (
	maxManifestBytes = 1 << 20
	maxStepsBytes    = 256 << 20
	maxSealBytes     = 1 << 20
	maxFrameBytes    = 64 << 20 // one PNG screenshot or one OCR file
)

// errNotRegular marks a path that is a link, a folder, a FIFO or another non-file.
var errNotRegular = errors.New("not a regular file")

// readRegular reads the regular file at path, at most max bytes: a link, a FIFO or any
// other non-regular file is refused before it is opened, and the file opened is checked
// to be the one inspected. A missing file is fs.ErrNotExist.
func readRegular(path string, max int64) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w (%s)", errNotRegular, describeMode(fi.Mode()))
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%d bytes, more than the %d a bundle file may hold", fi.Size(), max)
	}
	f, err := files.OpenNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ofi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !ofi.Mode().IsRegular() || !os.SameFile(fi, ofi) {
		return nil, fmt.Errorf("%w: it changed while it was opened", errNotRegular)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("more than the %d bytes a bundle file may hold", max)
	}
	return b, nil
}

func describeMode(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a folder"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

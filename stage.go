package sendonce

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sendonce/sendonce/gate"
)

// snapshot is a private copy of the bytes to deliver: the bytes hashed are the bytes
// sent, whatever happens to the user's file afterwards.
type snapshot struct {
	Path   string // <staging>/<sha256>/<original name>
	Name   string
	Size   int64
	Digest gate.Digest
}

// stage copies src into staging as <sha256>/<name>, hashing the bytes it writes.
// A new staging folder is made private (0700); snapshots take the staging folder's own
// permissions, so a folder made readable for a chat client that runs as another user
// (the test bed's) gives readable snapshots (folders 0755, files 0644), and a private
// one private snapshots (0700, 0600). A snapshot is only ever replaced by renaming an
// identical copy over it.
func stage(src *os.File, name, staging string) (snapshot, error) {
	if err := os.MkdirAll(staging, 0o700); err != nil {
		return snapshot{}, fmt.Errorf("staging area %s: %w", staging, err)
	}
	sfi, err := os.Stat(staging)
	if err != nil {
		return snapshot{}, fmt.Errorf("staging area %s: %w", staging, err)
	}
	dirMode := sfi.Mode().Perm()
	fileMode := dirMode &^ 0o111
	tmp, err := os.CreateTemp(staging, ".incoming-*")
	if err != nil {
		return snapshot{}, fmt.Errorf("staging area %s: %w", staging, err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.NewSectionReader(src, 0, 1<<62))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return snapshot{}, fmt.Errorf("copying %s into the staging area: %w", src.Name(), err)
	}
	var d gate.Digest
	copy(d[:], h.Sum(nil))
	dir := filepath.Join(staging, hex.EncodeToString(d[:]))
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return snapshot{}, err
	}
	os.Chmod(dir, dirMode)
	dst := filepath.Join(dir, name)
	if err := os.Chmod(tmp.Name(), fileMode); err != nil {
		return snapshot{}, err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return snapshot{}, err
	}
	return snapshot{Path: dst, Name: name, Size: n, Digest: d}, nil
}

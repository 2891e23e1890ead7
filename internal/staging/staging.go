// Package staging keeps the staging folder: it holds a private copy of the bytes to deliver, so that the bytes
// hashed are the bytes sent whatever happens to the user's file afterwards, and whatever
// another local user tries:
//
//   - The folder must be one only this user can change (internal/files.CheckPrivateDir:
//     owned by the user, not writable by group or others, and so every folder above it).
//   - A snapshot is first written to a new file of its own (created exclusively, 0600)
//     while it is hashed; once the claim names the dispatch, it is renamed into
//     <staging>/<dispatch id>/<name> and loses every write bit. A failed chmod is an error.
//   - When the chat app runs as another user (the test bed's), give the staging folder
//     that user's group with read access (mode 0750, group = the app user's group):
//     snapshots are then readable by that group alone (0440, folders 0750), never by
//     everyone. A private folder (0700) gives private snapshots (0400).
//   - A snapshot is removed after sent_verified, sent_rejected or not_sent. After
//     send_status_unknown it is kept (the app may still be uploading it) until reconcile
//     resolves the attempt or Retention passes.
package staging

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/internal/files"
)

// Retention is how long a snapshot of an unresolved attempt is kept.
const Retention = 14 * 24 * time.Hour

// snapshot is a private copy of the bytes to deliver.
type Snapshot struct {
	Path   string // <staging>/<dispatch id>/<name>, once placed
	Name   string
	Size   int64
	Digest gate.Digest
}

// Area is a checked staging folder.
type Area struct {
	dir       string
	gid       int
	groupRead bool
}

// Dir is the staging folder's real path.
func (a Area) Dir() string { return a.dir }

// Open checks the staging folder (creating it, private, when missing).
func Open(dir string) (Area, error) {
	if dir == "" {
		return Area{}, gate.Invalidf("staging: is required")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Area{}, gate.Invalidf("staging: %v", err)
	}
	if _, err := os.Lstat(abs); os.IsNotExist(err) {
		if err := os.MkdirAll(abs, 0o700); err != nil {
			return Area{}, gate.Invalidf("staging folder %s: %v", dir, err)
		}
	}
	real, err := files.CheckPrivateDir(abs, os.Getuid())
	if err != nil {
		return Area{}, gate.Invalidf("staging folder %s refused: %v (use a folder only you can write, such as $XDG_STATE_HOME/sendonce/staging)", dir, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return Area{}, gate.Invalidf("staging folder %s: %v", dir, err)
	}
	_, gid, _ := files.OwnerIDs(fi)
	return Area{dir: real, gid: gid, groupRead: fi.Mode().Perm()&0o040 != 0}, nil
}

// Pending is a snapshot written and hashed, not yet placed under its dispatch.
type Pending struct {
	area Area
	tmp  string
	Snapshot
}

// stage copies src into a new private file in the staging folder, hashing the bytes it
// writes.
func (a Area) Stage(src *os.File, name string, limit int64) (*Pending, error) {
	tmp, err := os.CreateTemp(a.dir, ".incoming-*") // O_CREATE|O_EXCL, 0600
	if err != nil {
		return nil, fmt.Errorf("staging folder %s: %w", a.dir, err)
	}
	h := sha256.New()
	max := int64(1 << 62)
	if limit > 0 {
		max = limit + 1 // a file that grew past the limit since it was checked is refused
	}
	n, err := io.Copy(io.MultiWriter(tmp, h), io.NewSectionReader(src, 0, max))
	if err == nil && limit > 0 && n > limit {
		err = gate.Invalidf("%s grew past the app's upload limit of %d bytes while it was copied", src.Name(), limit)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		if errors.Is(err, gate.ErrInvalid) {
			return nil, err
		}
		return nil, fmt.Errorf("copying %s into the staging folder: %w", src.Name(), err)
	}
	p := &Pending{area: a, tmp: tmp.Name(), Snapshot: Snapshot{Name: name, Size: n}}
	copy(p.Digest[:], h.Sum(nil))
	return p, nil
}

// discard removes a snapshot that will not be placed.
func (p *Pending) Discard() { os.Remove(p.tmp) }

// place moves the snapshot to <staging>/<dispatch>/<name>, read-only.
func (p *Pending) Place(dispatch string) (Snapshot, error) {
	dirMode, fileMode := fs.FileMode(0o700), fs.FileMode(0o400)
	if p.area.groupRead {
		dirMode, fileMode = 0o750, 0o440
	}
	dir := filepath.Join(p.area.dir, dispatch)
	if err := os.Mkdir(dir, dirMode); err != nil {
		p.Discard()
		return Snapshot{}, fmt.Errorf("staging folder: %w", err)
	}
	dst := filepath.Join(dir, p.Name)
	err := os.Chmod(dir, dirMode) // the umask may have taken bits away
	if err == nil && p.area.groupRead {
		err = os.Chown(dir, -1, p.area.gid)
	}
	if err == nil {
		err = os.Rename(p.tmp, dst)
	}
	if err == nil && p.area.groupRead {
		err = os.Chown(dst, -1, p.area.gid)
	}
	if err == nil {
		err = os.Chmod(dst, fileMode)
	}
	if err != nil {
		p.Discard()
		os.RemoveAll(dir)
		return Snapshot{}, fmt.Errorf("placing the snapshot: %w", err)
	}
	s := p.Snapshot
	s.Path = dst
	return s, nil
}

// remove removes a dispatch's snapshot folder, if it has one.
func (a Area) Remove(dispatch string) error {
	if !dispatchFolder.MatchString(dispatch) {
		return nil
	}
	return os.RemoveAll(filepath.Join(a.dir, dispatch))
}

// RemoveSnapshot removes a placed snapshot and its dispatch folder.
func RemoveSnapshot(s Snapshot) error {
	if s.Path == "" {
		return nil
	}
	return os.RemoveAll(filepath.Dir(s.Path))
}

var dispatchFolder = regexp.MustCompile(`^(?:[0-9a-f]{32}|dry-run-.+)$`)

// prune removes the snapshots of dispatches older than the retention.
func (a Area) Prune(now time.Time) {
	es, err := os.ReadDir(a.dir)
	if err != nil {
		return
	}
	for _, e := range es {
		if strings.HasPrefix(e.Name(), ".incoming-") { // left by a crash between stage and place
			if fi, err := e.Info(); err == nil && now.Sub(fi.ModTime()) > 24*time.Hour {
				os.Remove(filepath.Join(a.dir, e.Name()))
			}
			continue
		}
		if !e.IsDir() || !dispatchFolder.MatchString(e.Name()) {
			continue
		}
		if fi, err := e.Info(); err == nil && now.Sub(fi.ModTime()) > Retention {
			os.RemoveAll(filepath.Join(a.dir, e.Name()))
		}
	}
}

// CheckTypedName refuses a file name that cannot be typed into a file chooser as it is:
// the name is what the recipient sees, so sendonce refuses it (before the claim) rather
// than deliver the file under another name. Refused: invalid UTF-8, control, format and
// other invisible characters (the same classes titles refuse), a leading "~" (choosers
// expand it to a home folder), a leading or trailing space, and a backslash.
func CheckTypedName(name string) error {
	if !utf8.ValidString(name) {
		return gate.Invalidf("the file name %q is not valid UTF-8: rename the file", name)
	}
	switch {
	case name == "." || name == "..":
		return gate.Invalidf("%q is not a file name", name)
	case strings.HasPrefix(name, "~"):
		return gate.Invalidf("the file name %q starts with ~, which a file chooser expands to a home folder: rename the file", name)
	case strings.TrimSpace(name) != name:
		return gate.Invalidf("the file name %q starts or ends with a space, which a file chooser may drop: rename the file", name)
	case strings.ContainsRune(name, '\\'):
		return gate.Invalidf("the file name %q holds a backslash: rename the file", name)
	}
	for i, r := range name {
		if r == utf8.RuneError || (!unicode.IsGraphic(r) && r != ' ') || unicode.Is(unicode.Cf, r) {
			return gate.Invalidf("the file name %q has an invisible or control character U+%04X at byte %d: rename the file", name, r, i)
		}
	}
	return nil
}

// Package workstation keeps one machine's identity towards the store, and the fencing
// floor it remembers per store.
//
// A workstation is one machine's identity towards the store: an id made once and kept
// in its state folder (never the hostname: cloned machines share hostnames), and the
// ed25519 key that seals every evidence bundle it writes. The private key stays in the
// state folder (mode 0600), outside every bundle; the public key is registered in the
// store under the id, so that 'evidence verify' can tell a bundle this workstation
// sealed from one written from scratch.
//
// What the signature cannot prove: an agent that runs as the same OS user can read the
// key and seal a bundle of its own making. The signature is a barrier only when the
// state folder belongs to another user (docs/trust-model.md).
package workstation

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sendonce/sendonce/internal/files"
	"github.com/sendonce/sendonce/store"
)

// KeyFile is the file in the state folder that holds the id and the key.
const KeyFile = "workstation.key"

const workstationHeader = "# sendonce workstation sealing key (ed25519 seed, base64). It signs this machine's evidence bundles: never copy it to another machine."

// Identity is a loaded workstation identity.
type Identity struct {
	ID  string
	Key ed25519.PrivateKey // seals the workstation's evidence bundles
}

// Public is the key the store registers for the workstation.
func (w *Identity) Public() ed25519.PublicKey { return w.Key.Public().(ed25519.PublicKey) }

// Load reads the workstation key file in dir, or makes one when there is
// none. Two processes making one at once both end with the same: the file appears
// whole (written aside, then linked into place) or not at all.
func Load(dir string) (*Identity, error) {
	path := filepath.Join(dir, KeyFile)
	w, err := Read(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return w, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: the state folder %s: %v", store.ErrUnavailable, dir, errors.Unwrap(err))
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	var idb [16]byte
	rand.Read(idb[:])
	id := "ws-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(idb[:]))
	content := fmt.Sprintf("%s\n# public key: %s\nid %s\n%s\n", workstationHeader, base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey)), id, base64.StdEncoding.EncodeToString(priv.Seed()))
	tmp := fmt.Sprintf("%s.new-%d", path, os.Getpid())
	f, err := files.CreateExclusive(tmp, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: writing %s: %v", store.ErrUnavailable, tmp, errors.Unwrap(err))
	}
	defer os.Remove(tmp)
	if _, err = f.WriteString(content); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("%w: writing %s: %v", store.ErrUnavailable, tmp, err)
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("%w: placing %s: %v", store.ErrUnavailable, path, errors.Unwrap(err))
	}
	return Read(path) // ours, or the one another process placed first
}

// Read reads a workstation key file, which must be this user's alone.
func Read(path string) (*Identity, error) {
	if err := files.CheckPrivateFile(path, os.Getuid()); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: the workstation key %s: %v", store.ErrUnavailable, path, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: the workstation key %s is readable by others (mode %v): make it 0600", store.ErrUnavailable, path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	w := &Identity{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "id "):
			w.ID = strings.TrimPrefix(line, "id ")
		default:
			seed, err := base64.StdEncoding.DecodeString(line)
			if err != nil || len(seed) != ed25519.SeedSize {
				return nil, fmt.Errorf("%w: the workstation key %s is damaged", store.ErrUnavailable, path)
			}
			w.Key = ed25519.NewKeyFromSeed(seed)
		}
	}
	if w.ID == "" || w.Key == nil {
		return nil, fmt.Errorf("%w: the workstation key %s is damaged (no id or no key)", store.ErrUnavailable, path)
	}
	return w, nil
}

// The fencing floor: each workstation remembers, per store, the highest fencing token
// the store ever granted it (in its state folder, "fencing-STOREID"). A claim names it,
// and a store whose counter is below it fails closed as rolled back (a restored backup,
// a promoted asynchronous standby): it may have forgotten crossings.

// FloorFile is where the state folder keeps the floor for the store storeID.
func FloorFile(stateDir, storeID string) string {
	return filepath.Join(stateDir, "fencing-"+storeID)
}

// Floor is the highest token this workstation was granted by the store whose floor
// file is path, 0 for none.
func Floor(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%w: the fencing floor %s: %v", store.ErrUnavailable, path, err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: the fencing floor %s is damaged: %v", store.ErrUnavailable, path, err)
	}
	return n, nil
}

// NoteToken raises the floor in path to token (never lowers it). Processes of one workstation
// claim at once: the read-compare-write runs under an exclusive lock on a file beside
// it, and the value is replaced by a rename, so a reader never sees half a number.
func NoteToken(path string, token uint64) error {
	stateDir := filepath.Dir(path)
	fail := func(err error) error {
		return fmt.Errorf("%w: the fencing floor %s: %v", store.ErrUnavailable, path, err)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fail(err)
	}
	lock, err := files.OpenNoFollow(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fail(err)
	}
	defer lock.Close()
	if err := files.LockExclusive(lock); err != nil {
		return fail(err)
	}
	if old, err := Floor(path); err != nil || old >= token {
		return err
	}
	tmp, err := os.CreateTemp(stateDir, ".fencing-*")
	if err != nil {
		return fail(err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(strconv.FormatUint(token, 10) + "\n"); err != nil {
		tmp.Close()
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fail(err)
	}
	return nil
}

package sendonce

import (
	"bufio"
	"bytes"
	"context"
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

// WorkstationKeyFile is the file in the state folder that holds the id and the key.
const WorkstationKeyFile = "workstation.key"

const workstationHeader = "# sendonce workstation sealing key (ed25519 seed, base64). It signs this machine's evidence bundles: never copy it to another machine."

// workstation is the loaded identity.
type workstation struct {
	id  string
	key ed25519.PrivateKey
}

func (w *workstation) public() ed25519.PublicKey { return w.key.Public().(ed25519.PublicKey) }

// loadWorkstation reads the workstation key file in dir, or makes one when there is
// none. Two processes making one at once both end with the same: the file appears
// whole (written aside, then linked into place) or not at all.
func loadWorkstation(dir string) (*workstation, error) {
	path := filepath.Join(dir, WorkstationKeyFile)
	w, err := readWorkstation(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return w, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: the state folder %s: %v", ErrUnavailable, dir, errors.Unwrap(err))
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	var idb [16]byte
	rand.Read(idb[:])
	id := "ws-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(idb[:]))
	content := fmt.Sprintf("%s\n# public key: %s\nid %s\n%s\n", workstationHeader, encodeKey(priv.Public().(ed25519.PublicKey)), id, base64.StdEncoding.EncodeToString(priv.Seed()))
	tmp := fmt.Sprintf("%s.new-%d", path, os.Getpid())
	f, err := files.CreateExclusive(tmp, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: writing %s: %v", ErrUnavailable, tmp, errors.Unwrap(err))
	}
	defer os.Remove(tmp)
	if _, err = f.WriteString(content); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("%w: writing %s: %v", ErrUnavailable, tmp, err)
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("%w: placing %s: %v", ErrUnavailable, path, errors.Unwrap(err))
	}
	return readWorkstation(path) // ours, or the one another process placed first
}

func readWorkstation(path string) (*workstation, error) {
	if err := files.CheckPrivateFile(path, os.Getuid()); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: the workstation key %s: %v", ErrUnavailable, path, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: the workstation key %s is readable by others (mode %v): make it 0600", ErrUnavailable, path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	w := &workstation{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "id "):
			w.id = strings.TrimPrefix(line, "id ")
		default:
			seed, err := base64.StdEncoding.DecodeString(line)
			if err != nil || len(seed) != ed25519.SeedSize {
				return nil, fmt.Errorf("%w: the workstation key %s is damaged", ErrUnavailable, path)
			}
			w.key = ed25519.NewKeyFromSeed(seed)
		}
	}
	if w.id == "" || w.key == nil {
		return nil, fmt.Errorf("%w: the workstation key %s is damaged (no id or no key)", ErrUnavailable, path)
	}
	return w, nil
}

// ensureWorkstation loads (or makes) this workstation's identity and registers its
// key in the store, once per Client.
func (c *Client) ensureWorkstation(ctx context.Context) (*workstation, error) {
	if c.ws != nil {
		return c.ws, nil
	}
	w, err := loadWorkstation(c.stateDir)
	if err != nil {
		return nil, err
	}
	if err := c.store.RegisterWorkstation(ctx, w.id, w.public()); err != nil {
		return nil, err
	}
	c.ws = w
	return w, nil
}

// registerWorkstation is Init's: it makes and registers the identity of the machine
// that creates the store.
func registerWorkstation(ctx context.Context, s *store.Store, dir string) (string, error) {
	w, err := loadWorkstation(dir)
	if err != nil {
		return "", err
	}
	return w.id, s.RegisterWorkstation(ctx, w.id, w.public())
}

// Workstation is this workstation's id and the public key that seals its bundles; it
// makes and registers them on first use.
func (c *Client) Workstation(ctx context.Context) (WorkstationResult, error) {
	w, err := c.ensureWorkstation(ctx)
	if err != nil {
		return WorkstationResult{}, err
	}
	return WorkstationResult{Workstation: w.id, PublicKey: encodeKey(w.public()), StateDir: c.stateDir}, nil
}

// The fencing floor: each workstation remembers, per store, the highest fencing token
// the store ever granted it (in its state folder, "fencing-STOREID"). A claim names it,
// and a store whose counter is below it fails closed as rolled back (a restored backup,
// a promoted asynchronous standby): it may have forgotten crossings.

func (c *Client) floorFile(ctx context.Context) (string, error) {
	if c.storeIDCache == "" {
		id, err := c.store.StoreID(ctx)
		if err != nil {
			return "", err
		}
		c.storeIDCache = id
	}
	return filepath.Join(c.stateDir, "fencing-"+c.storeIDCache), nil
}

// tokenFloor is the highest token this workstation was granted by the store, 0 for none.
func (c *Client) tokenFloor(ctx context.Context) (uint64, error) {
	path, err := c.floorFile(ctx)
	if err != nil {
		return 0, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%w: the fencing floor %s: %v", ErrUnavailable, path, err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: the fencing floor %s is damaged: %v", ErrUnavailable, path, err)
	}
	return n, nil
}

// noteToken raises the floor to token (never lowers it). Processes of one workstation
// claim at once: the read-compare-write runs under an exclusive lock on a file beside
// it, and the value is replaced by a rename, so a reader never sees half a number.
func (c *Client) noteToken(ctx context.Context, token uint64) error {
	path, err := c.floorFile(ctx)
	if err != nil {
		return err
	}
	fail := func(err error) error { return fmt.Errorf("%w: the fencing floor %s: %v", ErrUnavailable, path, err) }
	if err := os.MkdirAll(c.stateDir, 0o700); err != nil {
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
	if old, err := c.tokenFloor(ctx); err != nil || old >= token {
		return err
	}
	tmp, err := os.CreateTemp(c.stateDir, ".fencing-*")
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

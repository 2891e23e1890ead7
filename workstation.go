package sendonce

import (
	"context"

	"github.com/sendonce/sendonce/internal/workstation"
	"github.com/sendonce/sendonce/store"
)

// WorkstationKeyFile is the file in the state folder that holds this workstation's id
// and the key that seals its bundles (internal/workstation).
const WorkstationKeyFile = workstation.KeyFile

// ensureWorkstation loads (or makes) this workstation's identity and registers its
// key in the store, once per Client.
func (c *Client) ensureWorkstation(ctx context.Context) (*workstation.Identity, error) {
	if c.ws != nil {
		return c.ws, nil
	}
	w, err := workstation.Load(c.stateDir)
	if err != nil {
		return nil, err
	}
	if err := c.store.RegisterWorkstation(ctx, w.ID, w.Public()); err != nil {
		return nil, err
	}
	c.ws = w
	return w, nil
}

// registerWorkstation is Init's: it makes and registers the identity of the machine
// that creates the store.
func registerWorkstation(ctx context.Context, s *store.Store, dir string) (string, error) {
	w, err := workstation.Load(dir)
	if err != nil {
		return "", err
	}
	return w.ID, s.RegisterWorkstation(ctx, w.ID, w.Public())
}

// Workstation is this workstation's id and the public key that seals its bundles; it
// makes and registers them on first use.
func (c *Client) Workstation(ctx context.Context) (WorkstationResult, error) {
	w, err := c.ensureWorkstation(ctx)
	if err != nil {
		return WorkstationResult{}, err
	}
	return WorkstationResult{Workstation: w.ID, PublicKey: encodeKey(w.Public()), StateDir: c.stateDir}, nil
}

// floorFile is the fencing floor's file for this Client's store.
func (c *Client) floorFile(ctx context.Context) (string, error) {
	if c.storeIDCache == "" {
		id, err := c.store.StoreID(ctx)
		if err != nil {
			return "", err
		}
		c.storeIDCache = id
	}
	return workstation.FloorFile(c.stateDir, c.storeIDCache), nil
}

// tokenFloor is the highest token this workstation was granted by the store, 0 for none.
func (c *Client) tokenFloor(ctx context.Context) (uint64, error) {
	path, err := c.floorFile(ctx)
	if err != nil {
		return 0, err
	}
	return workstation.Floor(path)
}

// noteToken raises the floor to token (never lowers it).
func (c *Client) noteToken(ctx context.Context, token uint64) error {
	path, err := c.floorFile(ctx)
	if err != nil {
		return err
	}
	return workstation.NoteToken(path, token)
}

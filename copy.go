package sendonce

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sendonce/sendonce/internal/files"
	"github.com/sendonce/sendonce/internal/workstation"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/store/registry"
)

// CopyRequest names the stores a copy reads and the one it writes.
type CopyRequest struct {
	// From are SQLite store files (a workstation's history), copied in this order. Each
	// is retired once copied.
	From []string
	// To is the store they go into: the fleet's shared store (postgres://...).
	To string
	// StateDir is this workstation's state folder for the shared store (Options.StateDir):
	// when it holds no workstation identity yet, the first source's is moved there, so
	// the workstation keeps its id and the key that sealed its bundles.
	StateDir string
}

// CopyResult is what a copy moved, one entry per source.
type CopyResult struct {
	To     string        `json:"to"`
	Copied []CopiedStore `json:"copied"`
	// Workstation is the identity moved into the state folder, when one was.
	Workstation string `json:"workstation,omitempty"`
}

// CopiedStore is one source's copy.
type CopiedStore struct {
	From string `json:"from"`
	store.CopyReport
	Retired bool `json:"retired"`
}

// CopyStore moves workstations' SQLite histories into a shared store: intents, keys,
// attempts, crossings, events, used nonces, request ids, provider objects and the
// registered sealing keys (never authorizers: add them in the target by signed
// statement). A key both know ends on the intent with the strictest status. Each source
// is then retired: every command on it fails closed and names the target. The target's
// fencing counter ends at least at every source's highest token.
//
// Every store is opened before anything is copied, and a source with a live lease is
// refused (nothing copied from it). Each source is one transaction in the target: an
// interrupted copy is finished by running it again.
func CopyStore(ctx context.Context, req CopyRequest, opt Options) (CopyResult, error) {
	if len(req.From) == 0 {
		return CopyResult{}, fieldError("from", errors.New("name at least one SQLite store file to copy"))
	}
	if req.To == "" {
		return CopyResult{}, fieldError("to", errors.New("name the store to copy into (postgres://...)"))
	}
	to, err := registry.Parse(req.To)
	if err != nil {
		return CopyResult{}, fieldError("to", err)
	}
	for _, f := range req.From {
		l, err := registry.Parse(f)
		if err != nil {
			return CopyResult{}, fieldError("from", err)
		}
		if l.Backend != "sqlite" {
			return CopyResult{}, fieldError("from", fmt.Errorf("%s is not a SQLite store file: a copy reads workstations' files", l))
		}
	}
	target, err := registry.Open(ctx, req.To, registryOptions(opt))
	if err != nil {
		return CopyResult{}, err
	}
	defer target.Store.Close()
	var sources []registry.Opened
	defer func() {
		for _, s := range sources {
			s.Store.Close()
		}
	}()
	for _, f := range req.From {
		s, err := registry.Open(ctx, f, registryOptions(opt))
		if err != nil {
			return CopyResult{}, fmt.Errorf("%s: %w", f, err)
		}
		sources = append(sources, s)
		if s.Display == target.Display {
			return CopyResult{}, fieldError("from", fmt.Errorf("%s is the target itself", s.Display))
		}
		if err := s.Store.CheckCopySource(ctx); err != nil {
			return CopyResult{}, fmt.Errorf("%s: %w", s.Display, err)
		}
	}
	out := CopyResult{To: to.String(), Copied: []CopiedStore{}}
	if req.StateDir != "" {
		if out.Workstation, err = adoptWorkstation(sources[0].Location.Dir(), req.StateDir); err != nil {
			return out, err
		}
	}
	for _, s := range sources {
		rep, err := target.Store.CopyFrom(ctx, s.Store, to.String())
		if err != nil {
			done := "none"
			if len(out.Copied) > 0 {
				done = out.Copied[0].From
				for _, c := range out.Copied[1:] {
					done += ", " + c.From
				}
			}
			return out, fmt.Errorf("copying %s: %w (copied and retired before it: %s)", s.Display, err, done)
		}
		out.Copied = append(out.Copied, CopiedStore{From: s.Display, CopyReport: rep, Retired: true})
	}
	return out, nil
}

// adoptWorkstation moves the workstation identity kept beside a SQLite store into the
// state folder a shared store uses, when that has none yet: the machine keeps its id,
// and the key that sealed its bundles goes on sealing them. It returns the id moved.
func adoptWorkstation(from, stateDir string) (string, error) {
	dst := filepath.Join(stateDir, WorkstationKeyFile)
	if _, err := os.Lstat(dst); !errors.Is(err, fs.ErrNotExist) {
		return "", nil // the state folder has an identity of its own: it stays
	}
	src := filepath.Join(from, WorkstationKeyFile)
	w, err := workstation.Read(src)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	content, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", fmt.Errorf("%w: the state folder %s: %v", ErrUnavailable, stateDir, err)
	}
	tmp := fmt.Sprintf("%s.new-%d", dst, os.Getpid())
	f, err := files.CreateExclusive(tmp, 0o600)
	if err != nil {
		return "", fmt.Errorf("%w: writing %s: %v", ErrUnavailable, tmp, err)
	}
	defer os.Remove(tmp)
	if _, err = f.Write(content); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp, dst)
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("%w: placing %s: %v", ErrUnavailable, dst, err)
	}
	return w.ID, nil
}

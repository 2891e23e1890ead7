package workstation

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sendonce/sendonce/internal/files"
	"github.com/sendonce/sendonce/store"
)

// The crossing journal: each workstation keeps, per store, the crossings the store
// acknowledged to it ("crossings-STOREID", one JSON line each, fsynced before the act
// the crossing guards), so that a store that lost one (a failover to an asynchronous
// standby that did not have it, a restored backup) is caught at the workstation's next
// claim, even when the store's token counter has since passed the floor again.
//
// A crossing stays in the journal until the store was seen holding it JournalKeep after
// it was acknowledged: a standby that far behind is one doctor reports.

// JournalKeep is how long after its acknowledgment a crossing is still checked for.
const JournalKeep = 10 * time.Minute

// JournalFile is where the state folder keeps the journal for the store storeID.
func JournalFile(stateDir, storeID string) string {
	return filepath.Join(stateDir, "crossings-"+storeID)
}

// Journal is one store's journal on this workstation.
type Journal struct{ Path string }

func (j Journal) fail(err error) error {
	return fmt.Errorf("%w: the crossing journal %s: %v", store.ErrUnavailable, j.Path, err)
}

// lock takes the journal's exclusive lock (processes of one workstation write it at
// once); the returned func releases it.
func (j Journal) lock() (func(), error) {
	if err := os.MkdirAll(filepath.Dir(j.Path), 0o700); err != nil {
		return nil, j.fail(err)
	}
	f, err := files.OpenNoFollow(j.Path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, j.fail(err)
	}
	if err := files.LockExclusive(f); err != nil {
		f.Close()
		return nil, j.fail(err)
	}
	return func() { f.Close() }, nil
}

// Append adds a crossing the store acknowledged, durably, unless the journal holds it
// already (had): then the store gave the same crossing twice, having lost the first.
func (j Journal) Append(c store.CrossingRef) (had bool, err error) {
	unlock, err := j.lock()
	if err != nil {
		return false, err
	}
	defer unlock()
	all, err := j.read()
	if err != nil {
		return false, err
	}
	for _, o := range all {
		if o.DispatchID == c.DispatchID && o.Boundary == c.Boundary {
			return true, nil
		}
	}
	line, err := json.Marshal(c)
	if err != nil {
		return false, j.fail(err)
	}
	if err := j.cutTornTail(); err != nil {
		return false, err
	}
	f, err := files.OpenNoFollow(j.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return false, j.fail(err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return false, j.fail(err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return false, j.fail(err)
	}
	if err := f.Close(); err != nil {
		return false, j.fail(err)
	}
	return false, nil
}

// Check runs verify on the journal's crossings, then keeps those verify says to keep:
// verify returns the crossings still to watch. The lock is not held while verify asks
// the store (a crossing's act must not wait behind a slow store); crossings appended
// meanwhile are kept. A damaged journal is an error: the store cannot be vouched for.
func (j Journal) Check(verify func([]store.CrossingRef) ([]store.CrossingRef, error)) error {
	all, err := j.locked(j.read)
	if err != nil || len(all) == 0 {
		return err
	}
	keep, err := verify(all)
	if err != nil {
		return err
	}
	if len(keep) == len(all) {
		return nil
	}
	type crossingOf struct {
		dispatch string
		boundary string
	}
	drop := map[crossingOf]bool{}
	for _, c := range all {
		drop[crossingOf{c.DispatchID, string(c.Boundary)}] = true
	}
	for _, c := range keep {
		delete(drop, crossingOf{c.DispatchID, string(c.Boundary)})
	}
	_, err = j.locked(func() ([]store.CrossingRef, error) {
		now, err := j.read()
		if err != nil {
			return nil, err
		}
		var left []store.CrossingRef
		for _, c := range now {
			if !drop[crossingOf{c.DispatchID, string(c.Boundary)}] {
				left = append(left, c)
			}
		}
		return nil, j.rewrite(left)
	})
	return err
}

// locked runs fn under the journal's lock.
func (j Journal) locked(fn func() ([]store.CrossingRef, error)) ([]store.CrossingRef, error) {
	unlock, err := j.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	return fn()
}

// cutTornTail cuts a last line left without its newline by a crash (see read), so that
// the next line appended is not glued to it.
func (j Journal) cutTornTail() error {
	b, err := os.ReadFile(j.Path)
	if errors.Is(err, os.ErrNotExist) || len(b) == 0 || b[len(b)-1] == '\n' {
		return nil
	}
	if err != nil {
		return j.fail(err)
	}
	if err := os.Truncate(j.Path, int64(bytes.LastIndexByte(b, '\n')+1)); err != nil {
		return j.fail(err)
	}
	return nil
}

func (j Journal) read() ([]store.CrossingRef, error) {
	b, err := os.ReadFile(j.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, j.fail(err)
	}
	// A last line without its newline was cut short by a crash before its fsync: that
	// crossing was never acted on (the act waits for the fsync), so it is dropped.
	if i := bytes.LastIndexByte(b, '\n'); i+1 < len(b) {
		b = b[:i+1]
	}
	var out []store.CrossingRef
	for n, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		if len(line) == 0 && len(b) == 0 {
			break
		}
		var c store.CrossingRef
		if err := json.Unmarshal(line, &c); err != nil || c.DispatchID == "" {
			return nil, j.fail(fmt.Errorf("line %d is damaged", n+1))
		}
		out = append(out, c)
	}
	return out, nil
}

func (j Journal) rewrite(keep []store.CrossingRef) error {
	tmp, err := os.CreateTemp(filepath.Dir(j.Path), ".crossings-*")
	if err != nil {
		return j.fail(err)
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriter(tmp)
	for _, c := range keep {
		line, err := json.Marshal(c)
		if err != nil {
			tmp.Close()
			return j.fail(err)
		}
		w.Write(append(line, '\n'))
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return j.fail(err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return j.fail(err)
	}
	if err := tmp.Close(); err != nil {
		return j.fail(err)
	}
	if err := os.Rename(tmp.Name(), j.Path); err != nil {
		return j.fail(err)
	}
	return nil
}

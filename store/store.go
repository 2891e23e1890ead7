// Package store is the gate's durable memory: it runs every gate rule inside one
// transaction of a Backend, persists the answer, and mints the only permits a delivery
// can act on.
//
// A claim, check, crossing, renewal or record loads the intent, asks package gate, and
// writes the outcome and an event in the same transaction; a crossing is durable before
// Cross returns, so a crash after it reads as unknown. Any backend failure (missing,
// unreadable, locked, read-only, full, too new) is ErrUnavailable: the caller stops and
// touches nothing.
package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/sendonce/sendonce/gate"
)

// ErrUnavailable means the store could not be read or written as the rules need. The
// caller must fail closed: grant nothing, touch nothing. The CLI maps it to exit code 5.
var ErrUnavailable = errors.New("store unavailable (fail closed: nothing was done)")

// ErrNotInitialized means there is no store at the location (missing, empty, or not a
// sendonce store). Only 'sendonce init' creates one; callers fail closed.
var ErrNotInitialized = errors.New("no sendonce store here: create one with 'sendonce init'")

// ErrUpgradeNeeded means the store's schema is older than this program's. Only
// 'sendonce init --upgrade' migrates a schema; everything else fails closed until then.
var ErrUpgradeNeeded = errors.New("the store needs a schema upgrade: run 'sendonce init --upgrade'")

// DefaultLease is how long a claim or renewal holds an intent when no lease is given.
const DefaultLease = 5 * time.Minute

// Store applies the gate's rules to a Backend.
type Store struct {
	b Backend
}

// New wraps a backend.
func New(b Backend) *Store { return &Store{b: b} }

// Close closes the backend.
func (s *Store) Close() error { return s.b.Close() }

func keyStrings(keys []gate.Key) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.String()
	}
	return out
}

func keyRecords(keys []gate.Key) []KeyRecord {
	out := make([]KeyRecord, len(keys))
	for i, k := range keys {
		out[i] = KeyRecord{Key: k.String(), Version: k.Version(), Strength: k.Identity().Strength()}
	}
	return out
}

func strengthOf(keys []KeyRecord) gate.Strength {
	for _, k := range keys {
		if k.Strength == gate.Strong {
			return gate.Strong
		}
	}
	return gate.Weak
}

// update runs fn in a write transaction; every backend error becomes ErrUnavailable.
func (s *Store) update(ctx context.Context, fn func(Tx) error) error {
	return wrapUnavailable(s.b.Update(ctx, fn))
}

func (s *Store) view(ctx context.Context, fn func(Tx) error) error {
	return wrapUnavailable(s.b.View(ctx, fn))
}

func wrapUnavailable(err error) error {
	var r *gate.Refusal
	switch {
	case err == nil, errors.As(err, &r), errors.Is(err, gate.ErrInvalid), errors.Is(err, ErrUnavailable):
		return err
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, err)
}

func distinctIntents(bound map[string]int64) []int64 {
	seen := map[int64]bool{}
	var ids []int64
	for _, id := range bound {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func latestRecord(tx Tx, intent int64) (*AttemptRecord, error) {
	as, err := tx.Attempts(intent)
	if err != nil || len(as) == 0 {
		return nil, err
	}
	a := as[len(as)-1]
	return &a, nil
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func appendEvent(tx Tx, e Event) error { return tx.Append(e) }

// intentOf loads the intent a key is bound to; an unbound key was never granted.
func intentOf(tx Tx, key gate.Key) (int64, gate.Intent, error) {
	bound, err := tx.IntentsOf([]string{key.String()})
	if err != nil {
		return 0, gate.Intent{}, err
	}
	id, ok := bound[key.String()]
	if !ok {
		return 0, gate.Intent{}, &gate.Refusal{Kind: gate.ErrStale, Status: gate.StatusFree, Reason: "no attempt was ever granted for this key"}
	}
	in, err := tx.Intent(id)
	return id, in, err
}

// Probe takes the store's write lock in a transaction that changes nothing of its
// history, and releases it: whether the store could be written now (doctor).
func (s *Store) Probe(ctx context.Context) error {
	return s.update(ctx, func(Tx) error { return nil })
}

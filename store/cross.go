// Crossing a boundary: Check, Cross and CrossRequest, the one-use Pass a crossing gives
// out, and CrossedAgain, the refusal of a second crossing.

package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sendonce/sendonce/gate"
)

// ErrPassUsed is returned by Pass.Use the second time.
var ErrPassUsed = errors.New("this pass was already used: a crossing permits one action")

// Pass is the one-use proof that a crossing was made durable. A step that may submit
// takes a Pass and calls Use before it sends any input; only Cross makes one.
type Pass struct {
	permit    *Permit
	boundary  gate.Boundary
	chainHead string
	used      atomic.Bool
}

// Boundary is the crossed boundary.
func (p *Pass) Boundary() gate.Boundary { return p.boundary }

// Permit is the permit the crossing was made with.
func (p *Pass) Permit() *Permit { return p.permit }

// Use spends the pass. It fails the second time, and for a nil pass.
func (p *Pass) Use() error {
	if p == nil {
		return fmt.Errorf("no pass: %w", gate.ErrStale)
	}
	if !p.used.CompareAndSwap(false, true) {
		return ErrPassUsed
	}
	return nil
}

// Check asks whether the permit may go on to boundary b now.
func (s *Store) Check(ctx context.Context, p *Permit, b gate.Boundary) error {
	return s.permitOp(ctx, p, func(tx Tx, id int64, in gate.Intent, now time.Time) (Event, error) {
		d := map[string]string{"boundary": string(b)}
		if r := gate.Check(in, p.ref(), b, now); r != nil {
			return Event{Kind: EventCheckRefused, Detail: d}, r
		}
		return Event{Kind: EventCheckPassed, Detail: d}, nil
	})
}

// Cross makes the crossing of b durable and returns the one-use pass the submitting step
// needs. chainHead is the evidence bundle's chain head at this moment, so that steps
// dropped from the bundle later are detected against the store.
func (s *Store) Cross(ctx context.Context, p *Permit, b gate.Boundary, chainHead string) (*Pass, error) {
	return s.CrossRequest(ctx, p, b, chainHead, RequestRef{})
}

// CrossRequest is Cross with a request id: stored with the crossing, so that the id
// with another request is refused (ErrRequestReused) even after a restart. Its replay
// is the refusal every repeated cross gets (CrossedAgain), never a second crossing.
func (s *Store) CrossRequest(ctx context.Context, p *Permit, b gate.Boundary, chainHead string, ref RequestRef) (*Pass, error) {
	if err := ref.check(); err != nil {
		return nil, err
	}
	var fp string
	if p != nil {
		fp = fingerprint("cross", struct {
			Key, Task string
			Token     uint64
			Boundary  gate.Boundary
			ChainHead string
		}{p.key.String(), p.task, p.token, b, chainHead})
	}
	var first time.Time
	err := s.permitOp(ctx, p, func(tx Tx, id int64, in gate.Intent, now time.Time) (Event, error) {
		first = time.Time{} // a retried transaction starts over
		if _, err := replay(tx, ref, fp); err != nil {
			return Event{}, err // the id came with another request
		}
		d := map[string]string{"boundary": string(b)}
		if chainHead != "" {
			d["chain_head"] = chainHead
		}
		if _, r := gate.Cross(in, p.ref(), b, now); r != nil {
			if a := in.Latest; a != nil && a.Token == p.token && slices.Contains(a.Crossed, b) {
				rec, err := latestRecord(tx, id)
				if err != nil {
					return Event{}, err
				}
				for _, c := range rec.Crossings {
					if c.Boundary == b && first.IsZero() {
						first = c.At
					}
				}
				d["first_crossed_at"] = formatTime(first)
			}
			return Event{Kind: EventCrossRefused, Detail: d}, r
		}
		if err := remember(tx, ref, fp, struct {
			Boundary gate.Boundary `json:"boundary"`
			At       time.Time     `json:"at"`
		}{b, now}); err != nil {
			return Event{}, err
		}
		return Event{Kind: EventCrossed, Detail: d}, tx.AddCrossing(p.token, b, chainHead, now)
	})
	var r *gate.Refusal
	if errors.As(err, &r) && !first.IsZero() {
		return nil, &CrossedAgain{Refusal: r, Boundary: b, FirstCrossedAt: first}
	}
	if err != nil {
		return nil, err
	}
	return &Pass{permit: p, boundary: b, chainHead: chainHead}, nil
}

// CrossedAgain refuses a cross of a boundary this attempt already crossed, with or
// without the request id of the first crossing: a crossing is given out once. It is a
// replay of the fact, never of the permission: whoever cannot tell whether the act
// after the first crossing happened records send_status_unknown.
type CrossedAgain struct {
	Refusal        *gate.Refusal // ErrConsumed
	Boundary       gate.Boundary
	FirstCrossedAt time.Time
}

func (e *CrossedAgain) Error() string { return e.Refusal.Error() }
func (e *CrossedAgain) Unwrap() error { return e.Refusal }

// What a console lists: attempts across the store, newest first and filtered, and the
// ones that need a person, oldest first.

package store

import (
	"context"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/gate"
)

// AttemptState is where an attempt stands, as a list filters it: its outcome, or, with
// none recorded, whether its lease lives.
type AttemptState string

const (
	StateVerified AttemptState = AttemptState(gate.SentVerified)
	StateRejected AttemptState = AttemptState(gate.SentRejected)
	StateNotSent  AttemptState = AttemptState(gate.NotSent)
	// StateUnknown: recorded unknown, or its lease ended after a crossing with nothing
	// recorded.
	StateUnknown AttemptState = AttemptState(gate.SendStatusUnknown)
	// StateHeld: its lease lives and nothing is recorded yet.
	StateHeld AttemptState = "held"
	// StateLapsed: its lease ended before any crossing, nothing recorded: it sent
	// nothing, and the key went back to whoever claims it next.
	StateLapsed AttemptState = "lapsed"
)

// AttemptStates are the states a list filters by.
var AttemptStates = []AttemptState{StateVerified, StateUnknown, StateRejected, StateNotSent, StateHeld, StateLapsed}

// StateOf is an attempt's state at now.
func StateOf(a AttemptRecord, now time.Time) AttemptState {
	var o gate.Outcome
	if a.Recorded {
		o, _ = a.Axes.Outcome()
	}
	return StateFrom(o, a.LeaseExpires, len(a.Crossings) > 0, now)
}

// StateFrom is the state of an attempt whose recorded outcome is o ("" for none), whose
// lease ends at leaseExpires, and that crossed a boundary or not.
func StateFrom(o gate.Outcome, leaseExpires time.Time, crossed bool, now time.Time) AttemptState {
	switch {
	case o != "":
		return AttemptState(o)
	case leaseExpires.After(now):
		return StateHeld
	case crossed:
		return StateUnknown
	}
	return StateLapsed
}

// AttemptQuery selects attempts for a list.
type AttemptQuery struct {
	// KeyPrefix keeps the attempts of intents bound to a key that starts so: a
	// destination's keys share the prefix before their digest.
	KeyPrefix   string
	State       AttemptState // "" for any
	Workstation string       // the workstation's id
	From, To    time.Time    // claimed in [From, To); zero for no bound
	Before      uint64       // tokens below this one only (the next page); 0 from the newest
	Limit       int
}

// Listing is an attempt with its intent's keys, as a list shows it.
type Listing struct {
	AttemptRecord
	State AttemptState
	Keys  []KeyRecord
	// ProviderSaid is what the provider last said of the attempt ("" when it was never
	// asked): filled by NeedsPerson.
	ProviderSaid string
}

// maxListing bounds one page of a list.
const maxListing = 500

// ListAttempts lists the attempts q selects, newest first, with their keys.
func (s *Store) ListAttempts(ctx context.Context, q AttemptQuery) ([]Listing, time.Time, error) {
	if q.Limit <= 0 || q.Limit > maxListing {
		return nil, time.Time{}, fmt.Errorf("%w: a page holds 1 to %d attempts", gate.ErrInvalid, maxListing)
	}
	var out []Listing
	var now time.Time
	err := s.view(ctx, func(tx Tx) error {
		now = tx.Now()
		as, err := tx.ListAttempts(q)
		if err != nil {
			return err
		}
		out, err = listings(tx, as, false)
		return err
	})
	return out, now, err
}

// NeedsPerson lists the attempts only a person can settle now, oldest first: unknown
// (recorded so, or a lease that ended after a crossing) or rejected, of each intent's
// current revision (an authorized redelivery settles the one before), with what the
// provider last said of each.
func (s *Store) NeedsPerson(ctx context.Context, after uint64, limit int) ([]Listing, time.Time, error) {
	if limit <= 0 || limit > maxListing {
		return nil, time.Time{}, fmt.Errorf("%w: a page holds 1 to %d attempts", gate.ErrInvalid, maxListing)
	}
	var out []Listing
	var now time.Time
	err := s.view(ctx, func(tx Tx) error {
		now = tx.Now()
		as, err := tx.NeedsPerson(after, limit)
		if err != nil {
			return err
		}
		out, err = listings(tx, as, true)
		return err
	})
	return out, now, err
}

// listings adds each attempt's keys (and, with said, the provider's last word).
func listings(tx Tx, as []AttemptRecord, said bool) ([]Listing, error) {
	now := tx.Now()
	keys := map[int64][]KeyRecord{}
	events := map[int64][]Event{}
	out := make([]Listing, len(as))
	for i, a := range as {
		ks, ok := keys[a.IntentID]
		if !ok {
			var err error
			if ks, err = tx.KeysOf(a.IntentID); err != nil {
				return nil, err
			}
			keys[a.IntentID] = ks
		}
		out[i] = Listing{AttemptRecord: a, State: StateOf(a, now), Keys: ks}
		if !said {
			continue
		}
		evs, ok := events[a.IntentID]
		if !ok {
			var err error
			if evs, err = tx.Events(a.IntentID); err != nil {
				return nil, err
			}
			events[a.IntentID] = evs
		}
		out[i].ProviderSaid = providerSaid(evs, a.DispatchID)
	}
	return out, nil
}

// providerSaid is the provider's last word on a dispatch, in a line.
func providerSaid(evs []Event, dispatch string) string {
	said := ""
	for _, e := range evs {
		if e.DispatchID != dispatch {
			continue
		}
		switch e.Kind {
		case EventProviderAbsent:
			said = fmt.Sprintf("%s: no such message as of %s", e.Detail["provider"], e.Detail["as_of"])
			if e.Detail["authoritative"] != "true" {
				said += " (its archive answer was incomplete)"
			}
		case EventResolveRefused:
			said = fmt.Sprintf("%s: object %s refused: %s", e.Detail["provider"], e.Detail["object_id"], e.Detail["reason"])
		case EventResolved:
			said = fmt.Sprintf("%s: object %s: %s", e.Detail["provider"], e.Detail["object_id"], e.Detail["outcome"])
		}
	}
	return said
}

// Dispatch is one attempt by its dispatch id, as a list shows it, and its intent's
// current revision (an attempt of an older one was moved past by an authorized
// redelivery); nil when the store has no such attempt.
func (s *Store) Dispatch(ctx context.Context, dispatchID string) (*Listing, int, error) {
	var out *Listing
	var revision int
	err := s.view(ctx, func(tx Tx) error {
		out = nil
		a, err := tx.AttemptByDispatch(dispatchID)
		if err != nil || a == nil {
			return err
		}
		in, err := tx.Intent(a.IntentID)
		if err != nil {
			return err
		}
		ls, err := listings(tx, []AttemptRecord{*a}, false)
		if err != nil {
			return err
		}
		out, revision = &ls[0], in.Revision
		return nil
	})
	return out, revision, err
}

// Crossings a store acknowledged and then lost: found by the workstation that was told
// (its journal of acknowledged crossings, internal/workstation), and written back so
// that the key stops for a person instead of reading free.

package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/sendonce/sendonce/gate"
)

// CrossingRef is a crossing as the store acknowledged it to a workstation.
type CrossingRef struct {
	DispatchID string        `json:"dispatch_id"`
	Key        string        `json:"key"`
	Revision   int           `json:"revision"`
	Token      uint64        `json:"token"`
	Task       string        `json:"task"`
	Boundary   gate.Boundary `json:"boundary"`
	// At is when it was acknowledged, on the workstation's clock.
	At time.Time `json:"at"`
}

// MissingCrossings returns the crossings of refs the store does not hold (its attempt
// is gone, or holds no such crossing), in one read.
func (s *Store) MissingCrossings(ctx context.Context, refs []CrossingRef) ([]CrossingRef, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(refs))
	for _, r := range refs {
		ids = append(ids, r.DispatchID)
	}
	for _, r := range refs {
		ids = append(ids, ReassertedID(r.DispatchID))
	}
	var crossed map[string][]gate.Boundary
	err := s.view(ctx, func(tx Tx) error {
		var err error
		crossed, err = tx.CrossedOf(ids)
		return err
	})
	if err != nil {
		return nil, err
	}
	var missing []CrossingRef
	for _, r := range refs {
		if !holds(crossed, r) {
			missing = append(missing, r)
		}
	}
	return missing, nil
}

// ReassertedID is the dispatch id of the attempt that Reassert makes for a lost one
// whose claim is gone too: one id per lost dispatch, so that writing back twice (a
// retry after an error) finds the first.
func ReassertedID(lost string) string {
	h := sha256.Sum256([]byte("sendonce reasserted " + lost))
	return hex.EncodeToString(h[:16])
}

// holds says whether crossed (CrossedOf's answer) has r's crossing, on its own attempt
// or on the one Reassert made for it.
func holds(crossed map[string][]gate.Boundary, r CrossingRef) bool {
	return slices.Contains(crossed[r.DispatchID], r.Boundary) || slices.Contains(crossed[ReassertedID(r.DispatchID)], r.Boundary)
}

// Reasserted is what Reassert wrote.
type Reasserted struct {
	// Present: the store held the crossing after all; nothing was written.
	Present bool
	// Moved: the key is at another revision than the crossing's (a person authorized a
	// redelivery since); nothing was written, the report says so.
	Moved bool
	// DispatchID and Token name the attempt that now holds the crossing: the lost one's
	// when the store kept its claim, else a new attempt that fences whatever holds the
	// key (Fenced: its token, 0 for none).
	DispatchID string
	Token      uint64
	Fenced     uint64
	// Recorded is the outcome an attempt of the key's revision recorded after the
	// crossing was lost (another executor delivered it meanwhile): "" for none.
	Recorded gate.Delivery
}

// Reassert writes back a crossing the store acknowledged to workstation and lost (a
// failover to a standby that did not have it, a restored backup): the key stops at
// send_status_unknown for a person, and whoever holds it now is fenced, so that no one
// delivers again what may have been delivered. The crossing's event says it was
// reasserted, from which workstation and why. It grants nothing.
func (s *Store) Reassert(ctx context.Context, ref CrossingRef, workstation string) (Reasserted, error) {
	if ref.DispatchID == "" {
		return Reasserted{}, gate.Invalidf("the lost crossing names no dispatch id")
	}
	key, err := gate.ParseKey(ref.Key)
	if err != nil {
		return Reasserted{}, fmt.Errorf("%w: the lost crossing's key: %v", gate.ErrInvalid, err)
	}
	if !ref.Boundary.Crossable() {
		return Reasserted{}, gate.Invalidf("the lost crossing's boundary %q is not one that is crossed", ref.Boundary)
	}
	dispatch := ReassertedID(ref.DispatchID)
	var res Reasserted
	err = s.update(ctx, func(tx Tx) error {
		res = Reasserted{} // a retried transaction starts over
		now := tx.Now()
		crossed, err := tx.CrossedOf([]string{ref.DispatchID, dispatch})
		if err != nil {
			return err
		}
		if holds(crossed, ref) {
			res.Present = true
			return nil
		}
		bound, err := tx.IntentsOf([]string{key.String()})
		if err != nil {
			return err
		}
		id, ok := bound[key.String()]
		if !ok {
			if id, err = tx.NewIntent(now); err != nil {
				return err
			}
			if err := tx.Bind(id, keyRecords([]gate.Key{key}), now); err != nil {
				return err
			}
			if err := appendEvent(tx, Event{At: now, Intent: id, Kind: EventIntentCreated, Key: key.String(), Task: ref.Task,
				Detail: map[string]string{"reason": "a crossing the store had acknowledged was written back"}}); err != nil {
				return err
			}
		}
		in, err := tx.Intent(id)
		if err != nil {
			return err
		}
		d := map[string]string{"boundary": string(ref.Boundary), "reasserted": "true", "lost_dispatch_id": ref.DispatchID,
			"lost_token": strconv.FormatUint(ref.Token, 10), "acknowledged_at": formatTime(ref.At), "workstation": workstation,
			"reason": "the store had acknowledged this crossing to the workstation and no longer held it (a failover to a standby that did not have it, or a restored backup): what it guarded may have been delivered"}
		if in.Revision != ref.Revision {
			res.Moved = true
			d["reasserted"], d["revision_now"] = "false", strconv.Itoa(in.Revision)
			return appendEvent(tx, Event{At: now, Intent: id, Kind: EventCrossRefused, Key: key.String(), Task: ref.Task, Revision: ref.Revision, DispatchID: ref.DispatchID, Detail: d})
		}
		if a := in.Latest; a != nil && a.Revision == in.Revision && a.Recorded {
			res.Recorded = a.Axes.Delivery
		}
		if a := in.Latest; a != nil && a.DispatchID == ref.DispatchID {
			// The claim survived and its crossing did not: the crossing goes back on it.
			res.DispatchID, res.Token = a.DispatchID, a.Token
		} else {
			if a != nil && !a.Recorded && a.Live(now) {
				res.Fenced = a.Token
				d["fenced_token"] = strconv.FormatUint(a.Token, 10)
			}
			if res.Token, err = tx.NextToken(); err != nil {
				return err
			}
			res.DispatchID = dispatch
			ga := gate.Attempt{Revision: in.Revision, Task: ref.Task, Token: res.Token, DispatchID: dispatch, LeaseExpires: now}
			if err := tx.InsertAttempt(id, ga, Origin{Workstation: workstation}, "", now); err != nil {
				return err
			}
		}
		if err := tx.AddCrossing(res.Token, ref.Boundary, "", now); err != nil {
			return err
		}
		return appendEvent(tx, Event{At: now, Intent: id, Kind: EventCrossed, Key: key.String(), Task: ref.Task, Token: res.Token, DispatchID: res.DispatchID, Revision: in.Revision, Detail: d})
	})
	if err != nil {
		return Reasserted{}, err
	}
	return res, nil
}

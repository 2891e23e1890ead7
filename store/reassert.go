// Crossings a store acknowledged and then lost: found by the workstation that was told
// (its journal of acknowledged crossings, internal/workstation), and written back so
// that the key stops for a person instead of reading free.

package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/sendonce/sendonce/gate"
)

// CrossingRef is a crossing as the store acknowledged it to a workstation.
type CrossingRef struct {
	DispatchID string `json:"dispatch_id"`
	Key        string `json:"key"`
	// Keys are every key the claim bound (the destination's other names), Key among
	// them or not.
	Keys     []string      `json:"keys,omitempty"`
	Revision int           `json:"revision"`
	Token    uint64        `json:"token"`
	Task     string        `json:"task"`
	Boundary gate.Boundary `json:"boundary"`
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
	crossed := map[string][]gate.Boundary{}
	err := s.view(ctx, func(tx Tx) error {
		clear(crossed)                              // a retried transaction starts over
		for batch := range slices.Chunk(ids, 500) { // a statement's parameters are bounded
			got, err := tx.CrossedOf(batch)
			if err != nil {
				return err
			}
			maps.Copy(crossed, got)
		}
		return nil
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
	// Moved: a person authorized a redelivery of the key since (its revision is past
	// the crossing's); nothing was written, the key's log says so.
	Moved bool
	// DispatchID and Token name the attempt that now holds the crossing: the lost one's
	// when the store kept its claim, else a new attempt (ReassertedID) that fences
	// whatever held the key (Fenced: the tokens fenced, on every intent the crossing's
	// keys reach).
	DispatchID string
	Token      uint64
	Fenced     []uint64
	// Before is what the key read just before the write-back: sent_verified or unknown
	// there means another attempt was granted the key after the loss.
	Before gate.Status
}

// Reassert writes back a crossing the store acknowledged to workstation and lost (a
// failover to a standby that did not have it, a restored backup): every key of the
// claim stops at send_status_unknown for a person, and whoever holds one of them now is
// fenced, so that no one delivers again what may have been delivered. The crossing's
// event says it was reasserted, from which workstation and why. It grants nothing, and
// writing back twice writes once.
func (s *Store) Reassert(ctx context.Context, ref CrossingRef, workstation string) (Reasserted, error) {
	if ref.DispatchID == "" {
		return Reasserted{}, gate.Invalidf("the lost crossing names no dispatch id")
	}
	if !ref.Boundary.Crossable() {
		return Reasserted{}, gate.Invalidf("the lost crossing's boundary %q is not one that is crossed", ref.Boundary)
	}
	var keys []gate.Key
	for _, k := range append([]string{ref.Key}, ref.Keys...) {
		key, err := gate.ParseKey(k)
		if err != nil {
			return Reasserted{}, fmt.Errorf("%w: the lost crossing's key: %v", gate.ErrInvalid, err)
		}
		keys = append(keys, key)
	}
	named := keyRecords(keys)
	mine := ReassertedID(ref.DispatchID)
	var res Reasserted
	err := s.update(ctx, func(tx Tx) error {
		res = Reasserted{} // a retried transaction starts over
		now := tx.Now()
		crossed, err := tx.CrossedOf([]string{ref.DispatchID, mine})
		if err != nil {
			return err
		}
		if holds(crossed, ref) {
			res.Present = true
			return nil
		}
		// The intent the crossing goes back to: its attempt's, else its keys'.
		target := int64(0)
		for _, d := range []string{ref.DispatchID, mine} {
			if a, err := tx.AttemptByDispatch(d); err != nil {
				return err
			} else if a != nil && target == 0 {
				target = a.IntentID
			}
		}
		bound, err := tx.IntentsOf(keyStrings(keys))
		if err != nil {
			return err
		}
		for _, k := range named {
			if id, ok := bound[k.Key]; ok && target == 0 {
				target = id
			}
		}
		if target == 0 {
			if target, err = tx.NewIntent(now); err != nil {
				return err
			}
			if err := appendEvent(tx, Event{At: now, Intent: target, Kind: EventIntentCreated, Key: named[0].Key, Task: ref.Task,
				Detail: map[string]string{"reason": "a crossing the store had acknowledged was written back"}}); err != nil {
				return err
			}
		}
		var unbound []KeyRecord
		for _, k := range named {
			if _, ok := bound[k.Key]; !ok {
				unbound = append(unbound, k)
			}
		}
		if len(unbound) > 0 {
			if err := tx.Bind(target, unbound, now); err != nil {
				return err
			}
			for _, k := range unbound {
				if err := appendEvent(tx, Event{At: now, Intent: target, Kind: EventKeyBound, Key: k.Key, Task: ref.Task, Detail: map[string]string{"identity_strength": string(k.Strength)}}); err != nil {
					return err
				}
			}
		}
		// The target first, then every other intent a key of the claim reaches (a key
		// claimed on its own after the loss): each gets the crossing back and is fenced.
		ids := []int64{target}
		for _, k := range named {
			if id, ok := bound[k.Key]; ok && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		for i, id := range ids {
			attempt := mine
			if i > 0 {
				attempt = ReassertedID(ref.DispatchID + "@" + strconv.FormatInt(id, 10))
			}
			w, err := writeBack(tx, ref, id, attempt, workstation, now)
			if err != nil {
				return err
			}
			res.Fenced = append(res.Fenced, w.Fenced...)
			if i == 0 {
				res.Moved, res.Before, res.DispatchID, res.Token = w.Moved, w.Before, w.DispatchID, w.Token
			}
		}
		return nil
	})
	if err != nil {
		return Reasserted{}, err
	}
	return res, nil
}

// writeBack puts the lost crossing back on intent id: on its latest attempt when that is
// the lost one (or the one written back for it before) and it has not recorded that
// nothing was sent; else on a new attempt named attempt, crossed, whose lease has
// ended, which fences the latest.
func writeBack(tx Tx, ref CrossingRef, id int64, attempt, workstation string, now time.Time) (Reasserted, error) {
	in, err := tx.Intent(id)
	if err != nil {
		return Reasserted{}, err
	}
	res := Reasserted{Before: gate.StatusOf(in, now)}
	d := map[string]string{"boundary": string(ref.Boundary), "reasserted": "true", "lost_dispatch_id": ref.DispatchID,
		"lost_token": strconv.FormatUint(ref.Token, 10), "acknowledged_at": formatTime(ref.At), "workstation": workstation,
		"status_before": string(res.Before),
		"reason":        "the store had acknowledged this crossing to the workstation and no longer held it (a failover to a standby that did not have it, or a restored backup): what it guarded may have been delivered"}
	if in.Revision > ref.Revision {
		res.Moved = true
		d["reasserted"], d["revision_now"] = "false", strconv.Itoa(in.Revision)
		return res, appendEvent(tx, Event{At: now, Intent: id, Kind: EventCrossRefused, Task: ref.Task, Revision: ref.Revision, DispatchID: ref.DispatchID, Detail: d})
	}
	a := in.Latest
	if a != nil && (a.DispatchID == ref.DispatchID || a.DispatchID == attempt) && !(a.Recorded && a.Axes.Delivery == gate.DeliveryFailed) {
		if slices.Contains(a.Crossed, ref.Boundary) {
			return res, nil // written back before, on this intent
		}
		res.DispatchID, res.Token = a.DispatchID, a.Token
	} else {
		if old, err := tx.AttemptByDispatch(attempt); err != nil {
			return res, err
		} else if old != nil {
			return res, fmt.Errorf("the lost crossing %s was written back as %s, which is no longer the key's latest attempt: settle the key by hand", ref.DispatchID, attempt)
		}
		if a != nil && !a.Recorded && a.Live(now) {
			res.Fenced = append(res.Fenced, a.Token)
			d["fenced_token"] = strconv.FormatUint(a.Token, 10)
		}
		if res.Token, err = tx.NextToken(); err != nil {
			return res, err
		}
		res.DispatchID = attempt
		ga := gate.Attempt{Revision: in.Revision, Task: ref.Task, Token: res.Token, DispatchID: attempt, LeaseExpires: now}
		if err := tx.InsertAttempt(id, ga, Origin{Workstation: workstation}, "", now); err != nil {
			return res, err
		}
	}
	if err := tx.AddCrossing(res.Token, ref.Boundary, "", now); err != nil {
		return res, err
	}
	return res, appendEvent(tx, Event{At: now, Intent: id, Kind: EventCrossed, Task: ref.Task, Token: res.Token, DispatchID: res.DispatchID, Revision: in.Revision, Detail: d})
}

package store

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/sendonce/sendonce/gate"
)

// Store copy moves one store's whole history into another (a workstation's SQLite file
// into the fleet's PostgreSQL), then retires the source: every later command on it
// fails closed and names the store it went to.

// History is what a copy reads and writes beside the rules' Tx: the Tx of a backend
// that can take part in a copy implements it.
type History interface {
	IntentIDs() ([]int64, error)
	UsedNonces() ([]UsedNonce, error)
	Requests() ([]StoredRequest, error)
	Workstations() ([]RegisteredWorkstation, error)
	Objects() ([]ObjectBinding, error)
	// AdvanceTokens raises the fencing counter to at least n.
	AdvanceTokens(n uint64) error
}

// Retirer is the Tx of a store that can be retired: a copy's source.
type Retirer interface {
	// RetiredTo is the store this one was copied into, or "".
	RetiredTo() (string, error)
	Retire(target string) error
}

// UsedNonce is an authorization nonce that was used.
type UsedNonce struct {
	Nonce string
	At    time.Time
}

// RegisteredWorkstation is a workstation's registered sealing key.
type RegisteredWorkstation struct {
	ID        string
	PublicKey ed25519.PublicKey
	At        time.Time
}

// ObjectBinding is a provider object bound to the dispatch that sent it.
type ObjectBinding struct {
	ObjectID, DispatchID string
	At                   time.Time
}

// ErrRetired: the store was copied into another and retired; use that one. It matches
// ErrUnavailable.
var ErrRetired = fmt.Errorf("%w: the store was retired", ErrUnavailable)

// EventCopied marks an intent copied from another store.
const EventCopied EventKind = "copied"

// CopyReport is what a copy moved.
type CopyReport struct {
	SourceID      string `json:"source_store_id"`
	Intents       int    `json:"intents"`
	Attempts      int    `json:"attempts"`
	Events        int    `json:"events"`
	Nonces        int    `json:"nonces"`
	Requests      int    `json:"requests"`
	Workstations  int    `json:"workstations"`
	Objects       int    `json:"provider_objects"`
	AlreadyCopied int    `json:"already_copied"` // intents an earlier, interrupted copy had moved
	// Merged counts intents whose keys the target already knew: every key now reaches
	// the one with the strictest status.
	Merged int `json:"merged"`
	// HighestToken is the source's highest fencing token: the target's counter is at
	// least that now.
	HighestToken uint64 `json:"highest_token"`
}

// copiedIntent is one intent of the source, read whole.
type copiedIntent struct {
	id       int64
	in       gate.Intent
	keys     []KeyRecord
	attempts []AttemptRecord
	events   []Event
}

// CopyFrom copies src's whole history into s and retires src, naming target (s as it
// may be printed) as where it went: intents, keys, attempts with their crossings and
// outcomes, events, used nonces, request ids, provider objects and registered
// workstations; never authorizers (the target's own are added by signed statement).
// Copied attempts get new fencing tokens from s and keep the ones their bundles name.
// A key the target already knows ends on the intent with the strictest status.
//
// It refuses while src holds a live lease, or s holds one on a key src knows, and a src
// that was retired already; the source stays locked for writing for the whole copy. A
// copy that was interrupted after s committed is finished by running it again.
func (s *Store) CopyFrom(ctx context.Context, src *Store, target string) (CopyReport, error) {
	var rep CopyReport
	err := src.update(ctx, func(stx Tx) error {
		h, r, err := copySource(stx)
		if err != nil {
			return err
		}
		read, err := readHistory(stx, h)
		if err != nil {
			return err
		}
		err = s.update(ctx, func(dtx Tx) error {
			rep = CopyReport{SourceID: read.storeID}
			return writeHistory(dtx, read, &rep)
		})
		if err != nil {
			return err
		}
		return r.Retire(target)
	})
	return rep, err
}

// copySource is a copy's source transaction as a History and a Retirer: a store that
// can be copied from and was not retired yet.
func copySource(tx Tx) (History, Retirer, error) {
	h, okH := tx.(History)
	r, okR := tx.(Retirer)
	if !okH || !okR {
		return nil, nil, gate.Invalidf("this kind of store cannot be the source of a copy (a SQLite file can)")
	}
	to, err := r.RetiredTo()
	if err == nil && to != "" {
		err = fmt.Errorf("%w: it was copied into %s already; use that store", ErrRetired, to)
	}
	return h, r, err
}

// CheckCopySource says whether s can be copied now: not retired, no live lease. A copy
// checks again in its own transaction; this lets a copy of several stores refuse
// before it moves any.
func (s *Store) CheckCopySource(ctx context.Context) error {
	return s.view(ctx, func(tx Tx) error {
		h, _, err := copySource(tx)
		if err != nil {
			return err
		}
		ids, err := h.IntentIDs()
		if err != nil {
			return err
		}
		for _, id := range ids {
			in, err := tx.Intent(id)
			if err != nil {
				return err
			}
			if err := notLive(tx, id, in); err != nil {
				return err
			}
		}
		return nil
	})
}

// notLive refuses an intent whose latest attempt holds a live lease.
func notLive(tx Tx, id int64, in gate.Intent) error {
	l := in.Latest
	if l == nil || l.Recorded || !l.Live(tx.Now()) {
		return nil
	}
	keys, err := tx.KeysOf(id)
	if err != nil {
		return err
	}
	return &gate.Refusal{Kind: gate.ErrHeld, Status: gate.StatusHeld, Reason: fmt.Sprintf(
		"task %s holds a live lease on %s until %s: copy the store once it has ended (nothing was copied)", l.Task, keyOf(keys), formatTime(l.LeaseExpires))}
}

// history is a source store, read whole.
type history struct {
	storeID      string
	intents      []copiedIntent
	nonces       []UsedNonce
	requests     []StoredRequest
	workstations []RegisteredWorkstation
	objects      []ObjectBinding
	highest      uint64
}

func readHistory(tx Tx, h History) (*history, error) {
	out := &history{}
	var err error
	if out.storeID, err = tx.StoreID(); err != nil {
		return nil, err
	}
	if out.highest, err = tx.LastToken(); err != nil {
		return nil, err
	}
	ids, err := h.IntentIDs()
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		ci := copiedIntent{id: id}
		if ci.in, err = tx.Intent(id); err != nil {
			return nil, err
		}
		if err := notLive(tx, id, ci.in); err != nil {
			return nil, err
		}
		if ci.keys, err = tx.KeysOf(id); err != nil {
			return nil, err
		}
		if ci.attempts, err = tx.Attempts(id); err != nil {
			return nil, err
		}
		if ci.events, err = tx.Events(id); err != nil {
			return nil, err
		}
		out.intents = append(out.intents, ci)
	}
	if out.nonces, err = h.UsedNonces(); err != nil {
		return nil, err
	}
	if out.requests, err = h.Requests(); err != nil {
		return nil, err
	}
	if out.workstations, err = h.Workstations(); err != nil {
		return nil, err
	}
	if out.objects, err = h.Objects(); err != nil {
		return nil, err
	}
	return out, nil
}

func keyOf(ks []KeyRecord) string {
	if len(ks) == 0 {
		return "an intent without keys"
	}
	return "key " + ks[0].Key
}

func writeHistory(tx Tx, src *history, rep *CopyReport) error {
	h, ok := tx.(History)
	if !ok {
		return gate.Invalidf("this kind of store cannot be the target of a copy")
	}
	dstID, err := tx.StoreID()
	if err != nil {
		return err
	}
	if dstID == src.storeID {
		return gate.Invalidf("the source and the target are the same store (%s)", dstID)
	}
	now := tx.Now()
	for _, w := range src.workstations {
		pub, err := tx.Workstation(w.ID)
		switch {
		case err != nil:
			return err
		case pub == nil:
			if err := tx.AddWorkstation(w.ID, w.PublicKey, w.At); err != nil {
				return err
			}
			rep.Workstations++
		case !bytes.Equal(pub, w.PublicKey):
			return gate.Invalidf("workstation %s is registered in the target with another sealing key than in the source: its bundles could not be told apart; nothing was copied", w.ID)
		}
	}
	for _, n := range src.nonces {
		used, err := tx.NonceUsed(n.Nonce)
		if err != nil {
			return err
		}
		if !used {
			if err := tx.UseNonce(n.Nonce, n.At); err != nil {
				return err
			}
			rep.Nonces++
		}
	}
	tokens, intents := map[uint64]uint64{}, map[int64]int64{}
	for _, ci := range src.intents {
		if done, err := copiedBefore(tx, ci, tokens, intents); err != nil || done {
			if done {
				rep.AlreadyCopied++
			}
			if err != nil {
				return err
			}
			continue
		}
		id, err := copyIntent(tx, src.storeID, ci, tokens, now)
		if err != nil {
			return err
		}
		intents[ci.id] = id
		merged, err := bindStrictest(tx, id, ci.keys, now)
		if err != nil {
			return err
		}
		rep.Intents++
		rep.Attempts += len(ci.attempts)
		rep.Events += len(ci.events)
		if merged {
			rep.Merged++
		}
	}
	for _, o := range src.objects {
		d, err := tx.ObjectDispatch(o.ObjectID)
		switch {
		case err != nil:
			return err
		case d == "":
			if err := tx.BindObject(o.ObjectID, o.DispatchID, o.At); err != nil {
				return err
			}
			rep.Objects++
		case d != o.DispatchID:
			return gate.Invalidf("provider object %s is bound to dispatch %s in the target and to %s in the source; nothing was copied", o.ObjectID, d, o.DispatchID)
		}
	}
	for _, r := range src.requests {
		got, err := tx.Request(r.Scope, r.ID)
		if err != nil {
			return err
		}
		if got != nil {
			continue // the target's own answer to that id stands
		}
		r.Response = renumberAnswer(r.Response, tokens, intents)
		if err := tx.StoreRequest(r); err != nil {
			return err
		}
		rep.Requests++
	}
	rep.HighestToken = src.highest
	return h.AdvanceTokens(src.highest)
}

// copiedBefore says whether an earlier copy moved this intent (its attempts' dispatch
// ids are in the target), and notes their numbers there.
func copiedBefore(tx Tx, ci copiedIntent, tokens map[uint64]uint64, intents map[int64]int64) (bool, error) {
	found := false
	for _, a := range ci.attempts {
		got, err := tx.AttemptByDispatch(a.DispatchID)
		if err != nil {
			return false, err
		}
		if got != nil {
			found = true
			tokens[a.Token], intents[ci.id] = got.Token, got.IntentID
		}
	}
	return found, nil
}

// copyIntent writes one source intent into the target as a new intent, its attempts
// under new tokens (keeping the source's as SourceToken), and its events.
func copyIntent(tx Tx, srcID string, ci copiedIntent, tokens map[uint64]uint64, now time.Time) (int64, error) {
	id, err := tx.NewIntent(now)
	if err != nil {
		return 0, err
	}
	if ci.in.Revision > 0 {
		if err := tx.SetRevision(id, ci.in.Revision); err != nil {
			return 0, err
		}
	}
	for _, a := range ci.attempts {
		token, err := tx.NextToken()
		if err != nil {
			return 0, err
		}
		tokens[a.Token] = token
		o := a.Origin
		if o.CopiedFrom == "" { // copied twice: the bundle still names the first store's token
			o.CopiedFrom, o.SourceToken = srcID, a.Token
		}
		at := a.Attempt
		at.Token = token
		if err := tx.InsertAttempt(id, at, o, a.Evidence, a.ClaimedAt); err != nil {
			return 0, err
		}
		for _, c := range a.Crossings {
			if err := tx.AddCrossing(token, c.Boundary, c.ChainHead, c.At); err != nil {
				return 0, err
			}
		}
		if a.Recorded {
			if err := tx.SetOutcome(token, a.Axes, a.Evidence, a.ChainHead, a.EndedAt); err != nil {
				return 0, err
			}
		}
	}
	for _, e := range ci.events {
		e.Seq, e.Intent = 0, id
		if t, ok := tokens[e.Token]; ok {
			e.Token = t
		}
		if err := tx.Append(e); err != nil {
			return 0, err
		}
	}
	return id, tx.Append(Event{At: now, Intent: id, Kind: EventCopied, Detail: map[string]string{
		"from_store": srcID, "from_intent": strconv.FormatInt(ci.id, 10)}})
}

// bindStrictest binds a copied intent's keys. A key the target does not know goes to
// the copied intent. When the target knows some: every key of the copied intent and of
// the target's intents they reach ends on the one with the strictest status (a claim
// would be refused by it first), so no key the source had consumed is free in the
// target, and none the target had consumed is freed. It refuses (nothing copied) when a
// target intent holds a live lease: its executor is still at work.
func bindStrictest(tx Tx, copied int64, keys []KeyRecord, now time.Time) (merged bool, err error) {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.Key
	}
	bound, err := tx.IntentsOf(names)
	if err != nil {
		return false, err
	}
	others := distinctIntents(bound)
	if len(others) == 0 {
		return false, tx.Bind(copied, keys, now)
	}
	ids := append([]int64{copied}, others...)
	refusals := make(map[int64]*gate.Refusal, len(ids))
	for _, id := range ids {
		in, err := tx.Intent(id)
		if err != nil {
			return false, err
		}
		if l := in.Latest; id != copied && l != nil && !l.Recorded && l.Live(now) {
			return false, &gate.Refusal{Kind: gate.ErrHeld, Status: gate.StatusHeld, Reason: fmt.Sprintf(
				"in the target, task %s holds a live lease on a key the source knows until %s: copy once it has ended (nothing was copied)", l.Task, formatTime(l.LeaseExpires))}
		}
		// What a claim would meet there (a token past every one, so only the status speaks).
		_, _, r := gate.Claim(in, "store-copy", now, now.Add(time.Minute), ^uint64(0), "store-copy")
		refusals[id] = r
	}
	winner, _ := strictestIntent(ids, refusals, others[0]) // all claimable: the target's intent stays
	var rebind []KeyRecord
	for _, id := range ids {
		if id == winner {
			continue
		}
		ks := keys
		if id != copied {
			if ks, err = tx.KeysOf(id); err != nil {
				return false, err
			}
		}
		rebind = append(rebind, ks...)
		if err := tx.Append(Event{At: now, Intent: winner, Kind: EventIntentsMerged, Detail: map[string]string{
			"merged_intent": strconv.FormatInt(id, 10), "reason": "store copy: every key reaches the intent with the strictest status"}}); err != nil {
			return false, err
		}
	}
	if winner == copied {
		rebind = append(rebind, keys...)
	}
	return true, tx.Bind(winner, rebind, now)
}

// renumberAnswer rewrites a stored claim answer's intent and token into the target's
// numbers; other answers name neither and are kept as they are.
func renumberAnswer(b []byte, tokens map[uint64]uint64, intents map[int64]int64) []byte {
	var a claimAnswer
	if err := json.Unmarshal(b, &a); err != nil || a.Intent == 0 {
		return b
	}
	if id, ok := intents[a.Intent]; ok {
		a.Intent = id
	}
	if t, ok := tokens[a.Token]; ok {
		a.Token = t
	}
	if t, ok := tokens[a.Fenced]; ok {
		a.Fenced = t
	}
	out, err := json.Marshal(a)
	if err != nil {
		return b
	}
	return out
}

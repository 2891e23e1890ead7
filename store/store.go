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
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
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

// ErrPassUsed is returned by Pass.Use the second time.
var ErrPassUsed = errors.New("this pass was already used: a crossing permits one action")

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

// Permit is a claim's grant: the capability to check, cross, renew and record for one
// attempt. Only the store makes one.
type Permit struct {
	key          gate.Key
	task         string
	token        uint64
	dispatchID   string
	revision     int
	leaseExpires time.Time
}

func (p *Permit) Key() gate.Key           { return p.key }
func (p *Permit) Task() string            { return p.task }
func (p *Permit) Token() uint64           { return p.token }
func (p *Permit) DispatchID() string      { return p.dispatchID }
func (p *Permit) Revision() int           { return p.revision }
func (p *Permit) LeaseExpires() time.Time { return p.leaseExpires }
func (p *Permit) ref() gate.PermitRef     { return gate.PermitRef{Task: p.task, Token: p.token} }

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

// ClaimRequest asks for one intent named by one or more keys (aliases of the same
// destination and bytes: a visible title and a provider id, and every key scheme
// version). Keys[0] is the key results are reported under.
type ClaimRequest struct {
	Keys  []gate.Key
	Task  string
	Lease time.Duration // DefaultLease when zero
	// Request, when set, stores the answer with the decision: the same request id
	// again gets that answer (Replayed), never a second decision.
	Request RequestRef
	// Origin is where the attempt runs and what it delivers, stored with it.
	Origin Origin
	// EvidenceRoot is the folder the workstation keeps bundles in: the attempt's bundle
	// is EvidenceRoot/DISPATCH-ID there, stored with the attempt before anything runs.
	EvidenceRoot string
	// MinToken is the highest fencing token this workstation was ever granted by this
	// store: a store whose counter is below it lost history (a restored backup, a
	// promoted asynchronous standby) and fails closed, since it may have forgotten
	// crossings and would hand out their keys again.
	MinToken uint64
}

// ErrRolledBack: the store has given out fewer fencing tokens than a workstation
// already holds: its history was rolled back. It matches ErrUnavailable.
var ErrRolledBack = fmt.Errorf("%w: the store was rolled back", ErrUnavailable)

// ClaimResult is a claim's answer, granted or refused.
type ClaimResult struct {
	Granted  bool
	Key      gate.Key
	Keys     []KeyRecord   // every key bound to the intent
	Strength gate.Strength // strong when any key names a provider id
	Permit   *Permit       // when granted
	Refusal  *gate.Refusal // when refused
	Fenced   uint64        // a token this grant fenced, if any
	Previous gate.Status   // the intent's status before this claim
	Prior    *AttemptRecord
	// Replayed: the answer is the one stored for this request id, not a new decision.
	Replayed bool
}

// Reason says why, in a sentence.
func (r ClaimResult) Reason() string {
	switch {
	case r.Refusal != nil:
		return r.Refusal.Reason
	case r.Fenced != 0 && r.Previous == gate.StatusHeld:
		return fmt.Sprintf("resumed: granted a new token; token %d is fenced", r.Fenced)
	case r.Fenced != 0 && r.Previous == gate.StatusFree:
		return fmt.Sprintf("the previous lease expired before any crossing; token %d is fenced", r.Fenced)
	case r.Previous == gate.StatusNotSent:
		return "the previous attempt proved nothing was sent: one new executor may go on"
	}
	return "no earlier attempt: granted"
}

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

// strictestIntent is the intent among ids whose claim would meet the strictest refusal
// (a key of several intents ends on it), and that refusal; fallback when all are
// claimable.
func strictestIntent(ids []int64, refusals map[int64]*gate.Refusal, fallback int64) (int64, *gate.Refusal) {
	all := make([]*gate.Refusal, 0, len(ids))
	for _, id := range ids {
		all = append(all, refusals[id])
	}
	strictest := gate.Strictest(all...)
	if strictest != nil {
		for _, id := range ids {
			if refusals[id] == strictest {
				return id, strictest
			}
		}
	}
	return fallback, nil
}

// sortedKeys orders keys bound at one moment as Tx.KeysOf lists them: strong first,
// then by key.
func sortedKeys(keys []KeyRecord) []KeyRecord {
	out := slices.Clone(keys)
	slices.SortFunc(out, func(a, b KeyRecord) int {
		return cmp.Or(cmp.Compare(a.Strength, b.Strength), cmp.Compare(a.Key, b.Key))
	})
	return slices.CompactFunc(out, func(a, b KeyRecord) bool { return a.Key == b.Key })
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

func newDispatchID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// Claim grants one executor an attempt at the intent named by req.Keys, or refuses with
// the reason. All keys, all the intents they reach and the decision are one transaction:
// of many tasks claiming at once, the first to commit wins and the others are refused
// with the winner named.
func (s *Store) Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error) {
	if len(req.Keys) == 0 {
		return ClaimResult{}, fmt.Errorf("%w: a claim names at least one key", gate.ErrInvalid)
	}
	if req.Task == "" {
		return ClaimResult{}, fmt.Errorf("%w: a task id is required", gate.ErrInvalid)
	}
	lease := req.Lease
	if lease == 0 {
		lease = DefaultLease
	}
	if lease < 0 {
		return ClaimResult{}, fmt.Errorf("%w: lease %v must be positive", gate.ErrInvalid, lease)
	}
	if err := req.Request.check(); err != nil {
		return ClaimResult{}, err
	}
	fp := fingerprint("claim", struct {
		Keys  []string      `json:"keys"`
		Task  string        `json:"task"`
		Lease time.Duration `json:"lease"`
	}{keyStrings(req.Keys), req.Task, lease})
	dispatchID, err := newDispatchID()
	if err != nil {
		return ClaimResult{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	res := ClaimResult{Key: req.Keys[0]}
	err = s.update(ctx, func(tx Tx) error {
		res = ClaimResult{Key: req.Keys[0]} // a retried transaction starts over
		if req.MinToken > 0 {
			last, err := tx.LastToken()
			if err != nil {
				return err
			}
			if last < req.MinToken {
				return fmt.Errorf("%w: its last fencing token is %d, but this workstation was granted %d by it: it lost history (restored from a backup, or a standby promoted before it had every commit) and may hand out keys that were already sent; nothing was claimed: ask whoever runs the store", ErrRolledBack, last, req.MinToken)
			}
		}
		if b, err := replay(tx, req.Request, fp); err != nil || b != nil {
			if err != nil {
				return err
			}
			return replayClaim(tx, b, req, &res)
		}
		now := tx.Now()
		named := keyRecords(req.Keys)
		var err error
		var prebound int64 // a new intent the backend bound every key to at once (NewKeysBinder)
		if nb, ok := tx.(NewKeysBinder); ok {
			if prebound, err = nb.BindNewKeys(named, now); err != nil {
				return err
			}
		}
		var bound map[string]int64
		if prebound == 0 {
			if bound, err = tx.IntentsOf(keyStrings(req.Keys)); err != nil {
				return err
			}
		}
		ids := distinctIntents(bound)
		fresh := len(ids) == 0 // a new intent: nothing of it needs reading back
		if fresh {
			id := prebound
			if id == 0 {
				if id, err = tx.NewIntent(now); err != nil {
					return err
				}
			}
			if err := appendEvent(tx, Event{At: now, Intent: id, Kind: EventIntentCreated, Key: res.Key.String(), Task: req.Task}); err != nil {
				return err
			}
			ids = []int64{id}
		}

		// Ask the rules about every intent the keys reach.
		states := make(map[int64]gate.Intent, len(ids))
		refusals := make(map[int64]*gate.Refusal, len(ids))
		for _, id := range ids {
			var in gate.Intent // a new intent is at revision 0 with no attempt
			if !fresh {
				if in, err = tx.Intent(id); err != nil {
					return err
				}
			}
			states[id] = in
			_, _, r := gate.Claim(in, req.Task, now, now.Add(lease), nextTokenOf(in), dispatchID)
			refusals[id] = r
		}
		target, strictest := strictestIntent(ids, refusals, ids[0])

		// Bind every named key that is unbound or reaches a claimable intent to the
		// target, so that no alias stays free; merge claimable intents into it.
		var rebind []KeyRecord
		for _, k := range named {
			if id, ok := bound[k.Key]; !ok || (id != target && refusals[id] == nil) {
				rebind = append(rebind, k)
			}
		}
		for _, id := range ids {
			if id == target || refusals[id] != nil {
				continue
			}
			others, err := tx.KeysOf(id)
			if err != nil {
				return err
			}
			rebind = append(rebind, others...)
			if err := appendEvent(tx, Event{At: now, Intent: target, Kind: EventIntentsMerged, Task: req.Task, Detail: map[string]string{"merged_intent": strconv.FormatInt(id, 10)}}); err != nil {
				return err
			}
		}
		if len(rebind) > 0 {
			if prebound == 0 { // else bound already, to the new intent
				if err := tx.Bind(target, rebind, now); err != nil {
					return err
				}
			}
			for _, k := range rebind {
				if err := appendEvent(tx, Event{At: now, Intent: target, Kind: EventKeyBound, Key: k.Key, Task: req.Task, Detail: map[string]string{"identity_strength": string(k.Strength)}}); err != nil {
					return err
				}
			}
		}
		if fresh {
			res.Keys = sortedKeys(named) // as KeysOf lists them
		} else if res.Keys, err = tx.KeysOf(target); err != nil {
			return err
		}
		res.Strength = strengthOf(res.Keys)
		in := states[target]
		res.Previous = gate.StatusOf(in, now)
		if !fresh {
			if res.Prior, err = latestRecord(tx, target); err != nil {
				return err
			}
		}

		if strictest != nil {
			res.Refusal = strictest
			if p := permanent(strictest); p != nil {
				if err := remember(tx, req.Request, fp, claimAnswer{Intent: target, Previous: res.Previous, Refusal: p}); err != nil {
					return err
				}
			}
			d := map[string]string{"reason": strictest.Reason, "status": string(strictest.Status)}
			if req.Origin.Workstation != "" {
				d["workstation"] = req.Origin.Workstation
			}
			if strictest.Holder != "" {
				d["holder"], d["holder_lease_expires_at"] = strictest.Holder, formatTime(strictest.HolderLeaseExpires)
			}
			return appendEvent(tx, Event{At: now, Intent: target, Kind: EventClaimRefused, Key: res.Key.String(), Task: req.Task, Revision: in.Revision, Detail: d})
		}

		token, err := tx.NextToken()
		if err != nil {
			return err
		}
		_, g, r := gate.Claim(in, req.Task, now, now.Add(lease), token, dispatchID)
		if r != nil { // the rules said yes a moment ago on the same state
			return fmt.Errorf("claim decision changed within one transaction: %v", r)
		}
		bundle := ""
		if req.EvidenceRoot != "" {
			bundle = filepath.Join(req.EvidenceRoot, dispatchID)
		}
		if err := tx.InsertAttempt(target, g.Attempt, req.Origin, bundle, now); err != nil {
			return err
		}
		res.Granted = true
		if g.Fenced != nil {
			res.Fenced = g.Fenced.Token
		}
		res.Permit = &Permit{key: res.Key, task: req.Task, token: token, dispatchID: dispatchID, revision: g.Attempt.Revision, leaseExpires: g.Attempt.LeaseExpires}
		if err := remember(tx, req.Request, fp, claimAnswer{Intent: target, Granted: true, Token: token, DispatchID: dispatchID,
			Revision: g.Attempt.Revision, LeaseExpires: g.Attempt.LeaseExpires, Fenced: res.Fenced, Previous: res.Previous}); err != nil {
			return err
		}
		d := map[string]string{"reason": res.Reason(), "previous_status": string(res.Previous), "lease_expires_at": formatTime(g.Attempt.LeaseExpires)}
		if req.Origin.Workstation != "" {
			d["workstation"] = req.Origin.Workstation
		}
		if res.Fenced != 0 {
			d["fenced_token"] = strconv.FormatUint(res.Fenced, 10)
		}
		return appendEvent(tx, Event{At: now, Intent: target, Kind: EventClaimGranted, Key: res.Key.String(), Task: req.Task, Token: token, DispatchID: dispatchID, Revision: g.Attempt.Revision, Detail: d})
	})
	if err != nil {
		return ClaimResult{}, err
	}
	if res.Refusal != nil {
		return res, res.Refusal
	}
	return res, nil
}

func nextTokenOf(in gate.Intent) uint64 {
	if in.Latest == nil {
		return 1
	}
	return in.Latest.Token + 1
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

// Resume finds the attempt that key, task and token name and returns its permit, so
// that a process that did not make the claim (a resumed or delegated task, the CLI) can
// act on it. Resume grants nothing: every later call asks the rules again.
func (s *Store) Resume(ctx context.Context, key gate.Key, ref gate.PermitRef) (*Permit, error) {
	var p *Permit
	err := s.view(ctx, func(tx Tx) error {
		id, in, err := intentOf(tx, key)
		if err != nil {
			return err
		}
		_ = id
		if in.Latest == nil || in.Latest.Token != ref.Token || in.Latest.Task != ref.Task {
			latest := "none"
			if in.Latest != nil {
				latest = fmt.Sprintf("%d (task %s)", in.Latest.Token, in.Latest.Task)
			}
			return &gate.Refusal{Kind: gate.ErrStale, Status: gate.StatusOf(in, tx.Now()), Reason: fmt.Sprintf("task %s token %d is not the latest permit for this key; the latest is %s", ref.Task, ref.Token, latest)}
		}
		p = &Permit{key: key, task: ref.Task, token: ref.Token, dispatchID: in.Latest.DispatchID, revision: in.Latest.Revision, leaseExpires: in.Latest.LeaseExpires}
		return nil
	})
	return p, err
}

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

// permitOp runs one permit operation: load the intent, decide, write the change and an
// event whatever the decision, return the refusal if any.
func (s *Store) permitOp(ctx context.Context, p *Permit, decide func(tx Tx, id int64, in gate.Intent, now time.Time) (Event, error)) error {
	if p == nil {
		return fmt.Errorf("%w: no permit", gate.ErrInvalid)
	}
	var refusal *gate.Refusal
	err := s.update(ctx, func(tx Tx) error {
		refusal = nil
		id, in, err := intentOf(tx, p.key)
		if err != nil {
			return err
		}
		now := tx.Now()
		e, err := decide(tx, id, in, now)
		if errors.As(err, &refusal) {
			e.Detail = withReason(e.Detail, refusal)
		} else if err != nil {
			return err
		}
		e.At, e.Intent, e.Key, e.Task, e.Token, e.DispatchID, e.Revision = now, id, p.key.String(), p.task, p.token, p.dispatchID, p.revision
		return appendEvent(tx, e)
	})
	if err != nil {
		return err
	}
	if refusal != nil {
		return refusal
	}
	return nil
}

// asError keeps a nil refusal from becoming a non-nil error.
func asError(r *gate.Refusal) error {
	if r == nil {
		return nil
	}
	return r
}

func withReason(d map[string]string, r *gate.Refusal) map[string]string {
	if d == nil {
		d = map[string]string{}
	}
	d["reason"], d["status"] = r.Reason, string(r.Status)
	return d
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

// Renew extends the permit's live lease and returns the new expiry.
func (s *Store) Renew(ctx context.Context, p *Permit, lease time.Duration) (time.Time, error) {
	if lease == 0 {
		lease = DefaultLease
	}
	var expires time.Time
	err := s.permitOp(ctx, p, func(tx Tx, id int64, in gate.Intent, now time.Time) (Event, error) {
		next, r := gate.Renew(in, p.ref(), now, now.Add(lease))
		if r != nil {
			return Event{Kind: EventRenewRefused}, r
		}
		expires = next.Latest.LeaseExpires
		return Event{Kind: EventRenewed, Detail: map[string]string{"lease_expires_at": formatTime(expires)}}, tx.SetLease(p.token, expires)
	})
	if err == nil {
		p.leaseExpires = expires
	}
	return expires, err
}

// RecordRequest is an attempt's outcome and where its evidence is.
type RecordRequest struct {
	Outcome   gate.Outcome
	Evidence  string // the evidence bundle's path
	ChainHead string // the bundle's chain head when the outcome was decided
	// ObjectID is the provider object that confirmed the delivery, if one did: it is
	// bound to this dispatch, and refused if bound to another.
	ObjectID string
	// Note is recorded with the outcome, e.g. what an agent claimed that the service
	// could not check.
	Note string
	// Request, when set, stores the answer with the decision: the same request id
	// again gets that answer, never a second decision.
	Request RequestRef
}

// Record ends the permit's attempt and returns the outcome actually recorded: not_sent
// after a crossing is recorded as send_status_unknown and also returned as a refusal.
func (s *Store) Record(ctx context.Context, p *Permit, req RecordRequest) (gate.Outcome, error) {
	if err := req.Request.check(); err != nil {
		return "", err
	}
	var got gate.Outcome
	var fp string
	if p != nil {
		fp = fingerprint("record", struct {
			Key       string       `json:"key"`
			Task      string       `json:"task"`
			Token     uint64       `json:"token"`
			Outcome   gate.Outcome `json:"outcome"`
			Evidence  string       `json:"evidence"`
			ChainHead string       `json:"chain_head"`
			ObjectID  string       `json:"object_id"`
			Note      string       `json:"note"`
		}{p.key.String(), p.task, p.token, req.Outcome, req.Evidence, req.ChainHead, req.ObjectID, req.Note})
	}
	err := s.permitOp(ctx, p, func(tx Tx, id int64, in gate.Intent, now time.Time) (e Event, err error) {
		if b, err := replay(tx, req.Request, fp); err != nil || b != nil {
			if err != nil {
				return Event{}, err
			}
			var a recordAnswer
			if err := json.Unmarshal(b, &a); err != nil {
				return Event{}, fmt.Errorf("the stored answer to request %q is unreadable: %v", req.Request.ID, err)
			}
			got = a.Recorded
			var r *gate.Refusal
			if a.Refusal != nil {
				r = a.Refusal.refusal()
			}
			return Event{Kind: EventReplayed, Detail: map[string]string{"request_id": req.Request.ID, "recorded": string(a.Recorded)}}, asError(r)
		}
		defer func() {
			var r *gate.Refusal
			errors.As(err, &r)
			if err != nil && r == nil {
				return // not a decision: nothing to remember
			}
			a := recordAnswer{Recorded: got}
			if r != nil {
				if a.Refusal = permanent(r); a.Refusal == nil {
					return // asked again
				}
			}
			if rerr := remember(tx, req.Request, fp, a); rerr != nil {
				err = rerr
			}
		}()
		d := map[string]string{"outcome": string(req.Outcome)}
		if req.Evidence != "" {
			d["evidence"] = req.Evidence
		}
		if req.ChainHead != "" {
			d["chain_head"] = req.ChainHead
		}
		if req.Note != "" {
			d["note"] = req.Note
		}
		next, o, r := gate.Record(in, p.ref(), req.Outcome, now)
		if o == "" {
			return Event{Kind: EventRecordRefused, Detail: d}, asError(r)
		}
		if req.ObjectID != "" {
			bound, err := tx.ObjectDispatch(req.ObjectID)
			if err != nil {
				return Event{}, err
			}
			if bound != "" && bound != p.dispatchID {
				return Event{Kind: EventRecordRefused, Detail: d}, &gate.Refusal{Kind: gate.ErrInvalid, Reason: fmt.Sprintf("provider object %s is already bound to dispatch %s", req.ObjectID, bound)}
			}
			if bound == "" {
				if err := tx.BindObject(req.ObjectID, p.dispatchID, now); err != nil {
					return Event{}, err
				}
			}
			d["object_id"] = req.ObjectID
		}
		got = o
		d["recorded"] = string(o)
		if err := tx.SetOutcome(p.token, next.Latest.Axes, req.Evidence, req.ChainHead, now); err != nil {
			return Event{}, err
		}
		if r != nil {
			d["reason"] = r.Reason
		}
		return Event{Kind: EventRecorded, Detail: d}, asError(r)
	})
	return got, err
}

// StoreID is the random id made when the store was created; every signed statement
// names it, so a signature for one store is never accepted by another.
func (s *Store) StoreID(ctx context.Context) (string, error) {
	var id string
	err := s.view(ctx, func(tx Tx) (err error) {
		id, err = tx.StoreID()
		return err
	})
	return id, err
}

// RegisterWorkstation registers the public key that seals a workstation's evidence
// bundles, under the workstation's id. Registering the same key again is a no-op; a
// different key for a registered id is refused (a key is never replaced silently: a
// bundle sealed by the old one would no longer verify, or a copied id would take over).
func (s *Store) RegisterWorkstation(ctx context.Context, id string, pub ed25519.PublicKey) error {
	if !validWorkstationID(id) || len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: a workstation needs an id of letters, digits and '-' (at most 64) and a 32-byte ed25519 public key", gate.ErrInvalid)
	}
	return s.update(ctx, func(tx Tx) error {
		have, err := tx.Workstation(id)
		switch {
		case err != nil:
			return err
		case have != nil && bytes.Equal(have, pub):
			return nil
		case have != nil:
			return fmt.Errorf("%w: workstation %s is registered with another sealing key: a key is never replaced (if this machine was cloned, give the clone a state folder of its own)", gate.ErrInvalid, id)
		}
		now := tx.Now()
		if err := tx.AddWorkstation(id, pub, now); err != nil {
			return err
		}
		return appendEvent(tx, Event{At: now, Kind: EventWorkstationAdded, Detail: map[string]string{"workstation": id, "public_key": hex.EncodeToString(pub)}})
	})
}

// WorkstationKey is the sealing key registered for a workstation, or nil.
func (s *Store) WorkstationKey(ctx context.Context, id string) (ed25519.PublicKey, error) {
	var pub ed25519.PublicKey
	err := s.view(ctx, func(tx Tx) (err error) {
		pub, err = tx.Workstation(id)
		return err
	})
	return pub, err
}

func validWorkstationID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// AddFirstAuthorizer registers the first person who may open a redelivery. It is
// refused once any authorizer was ever registered: every later one is added with a
// statement signed by an existing one (ApplyStatement).
func (s *Store) AddFirstAuthorizer(ctx context.Context, name string, pub ed25519.PublicKey) error {
	if name == "" || strings.ContainsAny(name, "\n\r") || len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: an authorizer needs a name on one line and a 32-byte ed25519 public key", gate.ErrInvalid)
	}
	return s.update(ctx, func(tx Tx) error {
		n, err := tx.AuthorizerCount()
		if err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%w: this store already has an authorizer: a new one is added only with a statement signed by an existing one ('authorizer statement', then 'authorizer add --signed')", gate.ErrInvalid)
		}
		now := tx.Now()
		if err := tx.AddAuthorizer(name, pub, now); err != nil {
			return err
		}
		return appendEvent(tx, Event{At: now, Kind: EventAuthorizerAdded, Detail: map[string]string{"name": name, "public_key": hex.EncodeToString(pub), "signed_by": ""}})
	})
}

// ApplyStatement adds or revokes an authorizer on the signed word of an existing,
// unrevoked one: the statement must name this store, verify with the signer's key,
// be unexpired and unused (its nonce is accepted once).
func (s *Store) ApplyStatement(ctx context.Context, st gate.AuthorizerStatement) error {
	return s.update(ctx, func(tx Tx) error {
		id, err := tx.StoreID()
		if err != nil {
			return err
		}
		if st.StoreID != id {
			return fmt.Errorf("%w: the statement is for store %s, not this one (%s)", gate.ErrInvalid, st.StoreID, id)
		}
		pub, err := tx.Authorizer(st.Signer)
		if err != nil {
			return err
		}
		if pub == nil {
			return fmt.Errorf("%w: no authorizer named %q is registered (or it was revoked)", gate.ErrInvalid, st.Signer)
		}
		now := tx.Now()
		if err := st.Verify(pub, now); err != nil {
			return err
		}
		if used, err := tx.NonceUsed(st.Nonce); err != nil {
			return err
		} else if used {
			return fmt.Errorf("%w: this signed statement (nonce %s) was already used; a signature is accepted once", gate.ErrInvalid, st.Nonce)
		}
		target, err := tx.Authorizer(st.Name)
		if err != nil {
			return err
		}
		d := map[string]string{"name": st.Name, "signed_by": st.Signer, "nonce": st.Nonce}
		switch st.Action {
		case "add":
			if n, err := tx.AuthorizerNamed(st.Name); err != nil {
				return err
			} else if n {
				return fmt.Errorf("%w: an authorizer named %q was already registered; names are never reused", gate.ErrInvalid, st.Name)
			}
			if err := tx.AddAuthorizer(st.Name, st.PublicKey, now); err != nil {
				return err
			}
			d["public_key"] = hex.EncodeToString(st.PublicKey)
		case "revoke":
			if target == nil {
				return fmt.Errorf("%w: no authorizer named %q is registered (or it was revoked)", gate.ErrInvalid, st.Name)
			}
			if err := tx.RevokeAuthorizer(st.Name, now); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: statement action %q", gate.ErrInvalid, st.Action)
		}
		if err := tx.UseNonce(st.Nonce, now); err != nil {
			return err
		}
		kind := EventAuthorizerAdded
		if st.Action == "revoke" {
			kind = EventAuthorizerRevoked
		}
		return appendEvent(tx, Event{At: now, Kind: kind, Detail: d})
	})
}

// Authorize opens the revision that a signed authorization names, once, and records who,
// when, why and which revision it follows.
func (s *Store) Authorize(ctx context.Context, a gate.Authorization, reason string) error {
	if reason == "" {
		return fmt.Errorf("%w: a deliberate redelivery needs a reason", gate.ErrInvalid)
	}
	var refusal *gate.Refusal
	err := s.update(ctx, func(tx Tx) error {
		refusal = nil
		pub, err := tx.Authorizer(a.Signer)
		if err != nil {
			return err
		}
		if pub == nil {
			return fmt.Errorf("%w: no authorizer named %q is registered (or it was revoked)", gate.ErrInvalid, a.Signer)
		}
		storeID, err := tx.StoreID()
		if err != nil {
			return err
		}
		if a.StoreID != storeID {
			return fmt.Errorf("%w: the authorization is for store %s, not this one (%s): a signature is accepted by one store only", gate.ErrInvalid, a.StoreID, storeID)
		}
		now := tx.Now()
		if err := a.Verify(pub, now); err != nil {
			return err
		}
		id, in, err := intentOf(tx, a.Key)
		if errors.As(err, &refusal) {
			return fmt.Errorf("%w: no intent for key %s: nothing to redeliver", gate.ErrInvalid, a.Key)
		} else if err != nil {
			return err
		}
		used, err := tx.NonceUsed(a.Nonce)
		if err != nil {
			return err
		}
		if used {
			return fmt.Errorf("%w: this signed authorization (nonce %s) was already used; a signature is accepted once", gate.ErrInvalid, a.Nonce)
		}
		d := map[string]string{"authorizer": a.Signer, "reason": reason, "opens_revision": strconv.Itoa(a.Revision), "follows_revision": strconv.Itoa(in.Revision), "nonce": a.Nonce, "expires_at": formatTime(a.ExpiresAt)}
		e := Event{At: now, Intent: id, Key: a.Key.String(), Revision: in.Revision, Detail: d}
		if _, refusal = gate.Authorize(in, a.Revision, now); refusal != nil {
			d["refusal"] = refusal.Reason
			e.Kind = EventAuthorizeRefused
			return appendEvent(tx, e)
		}
		if err := tx.UseNonce(a.Nonce, now); err != nil {
			return err
		}
		if err := tx.SetRevision(id, a.Revision); err != nil {
			return err
		}
		e.Kind = EventAuthorized
		return appendEvent(tx, e)
	})
	if err != nil {
		return err
	}
	if refusal != nil {
		return refusal
	}
	return nil
}

// IntentReport is everything the store knows about one intent.
type IntentReport struct {
	ID       int64
	Revision int
	Status   gate.Status
	Strength gate.Strength
	Keys     []KeyRecord
	Attempts []AttemptRecord
	Events   []Event // filled by Show only
	// Notes are facts a person deciding what next should see: the provider reported no
	// such message as of a time.
	Notes []string
	AsOf  time.Time
}

// Latest is the intent's latest attempt, or nil.
func (r IntentReport) Latest() *AttemptRecord {
	if len(r.Attempts) == 0 {
		return nil
	}
	return &r.Attempts[len(r.Attempts)-1]
}

// Status reports on every intent the keys reach. No intent at all is reported as one
// free, unknown intent with ID 0.
func (s *Store) Status(ctx context.Context, keys []gate.Key) ([]IntentReport, error) {
	return s.report(ctx, keys, false)
}

// Show is Status with each intent's event log.
func (s *Store) Show(ctx context.Context, keys []gate.Key) ([]IntentReport, error) {
	return s.report(ctx, keys, true)
}

func (s *Store) report(ctx context.Context, keys []gate.Key, events bool) ([]IntentReport, error) {
	var out []IntentReport
	err := s.view(ctx, func(tx Tx) error {
		out = nil
		now := tx.Now()
		bound, err := tx.IntentsOf(keyStrings(keys))
		if err != nil {
			return err
		}
		ids := distinctIntents(bound)
		if len(ids) == 0 {
			named := keyRecords(keys)
			out = append(out, IntentReport{Status: gate.StatusFree, Keys: named, Strength: strengthOf(named), AsOf: now})
			return nil
		}
		for _, id := range ids {
			in, err := tx.Intent(id)
			if err != nil {
				return err
			}
			r := IntentReport{ID: id, Revision: in.Revision, Status: gate.StatusOf(in, now), AsOf: now}
			if r.Keys, err = tx.KeysOf(id); err != nil {
				return err
			}
			r.Strength = strengthOf(r.Keys)
			if r.Attempts, err = tx.Attempts(id); err != nil {
				return err
			}
			evs, err := tx.Events(id)
			if err != nil {
				return err
			}
			r.Notes = notes(evs, r.Latest())
			if events {
				r.Events = evs
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

// AttemptByDispatch finds an attempt by its dispatch id: what the store recorded of it,
// crossings and their chain heads included. It returns nil when the store has none.
func (s *Store) AttemptByDispatch(ctx context.Context, dispatchID string) (*AttemptRecord, error) {
	var a *AttemptRecord
	err := s.view(ctx, func(tx Tx) error {
		var err error
		a, err = tx.AttemptByDispatch(dispatchID)
		return err
	})
	return a, err
}

// notes are the provider's reports of absence for the latest attempt.
func notes(evs []Event, latest *AttemptRecord) []string {
	var out []string
	if latest == nil {
		return nil
	}
	for _, e := range evs {
		if e.Kind == EventProviderAbsent && e.DispatchID == latest.DispatchID {
			kind := "not authoritative: the archive answer was incomplete"
			if e.Detail["authoritative"] == "true" {
				kind = "authoritative: the server's own assertion that its complete archive holds no such message; a server that lies or lost data is not caught by it"
			}
			out = append(out, fmt.Sprintf("the provider (%s) reports no such message as of %s (%s); a person may authorize a redelivery", e.Detail["provider"], e.Detail["as_of"], kind))
		}
	}
	return out
}

// KeepAlive calls renew every interval until ctx ends, in its own goroutine. When renew
// fails (a fenced or expired permit) it calls stop with that cause, so the work it
// guards ends at once and can say why, and reports the error on the returned channel,
// which is closed when it returns. A paused process renews nothing: its lease expires
// and its token is fenced.
func KeepAlive(ctx context.Context, interval time.Duration, stop context.CancelCauseFunc, renew func(context.Context) error) <-chan error {
	done := make(chan error, 1)
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := renew(ctx); err != nil && ctx.Err() == nil {
				stop(fmt.Errorf("the lease could not be renewed: %w", err))
				done <- err
				return
			}
		}
	}()
	return done
}

// Probe takes the store's write lock in a transaction that changes nothing of its
// history, and releases it: whether the store could be written now (doctor).
func (s *Store) Probe(ctx context.Context) error {
	return s.update(ctx, func(Tx) error { return nil })
}

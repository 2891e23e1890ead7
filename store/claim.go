// Claims: ClaimRequest and ClaimResult, Claim (the one transaction that binds keys to an
// intent and grants or refuses an attempt), Resume, and the helpers only a claim needs.

package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/sendonce/sendonce/gate"
)

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
		res.Permit = &Permit{key: res.Key, task: req.Task, token: token, dispatchID: dispatchID, revision: g.Attempt.Revision, leaseExpires: g.Attempt.LeaseExpires,
			keys: recordKeys(res.Keys)}
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
		if in.Latest == nil || in.Latest.Token != ref.Token || in.Latest.Task != ref.Task {
			latest := "none"
			if in.Latest != nil {
				latest = fmt.Sprintf("%d (task %s)", in.Latest.Token, in.Latest.Task)
			}
			return &gate.Refusal{Kind: gate.ErrStale, Status: gate.StatusOf(in, tx.Now()), Reason: fmt.Sprintf("task %s token %d is not the latest permit for this key; the latest is %s", ref.Task, ref.Token, latest)}
		}
		keys, err := tx.KeysOf(id)
		if err != nil {
			return err
		}
		p = &Permit{key: key, task: ref.Task, token: ref.Token, dispatchID: in.Latest.DispatchID, revision: in.Latest.Revision, leaseExpires: in.Latest.LeaseExpires,
			keys: recordKeys(keys)}
		return nil
	})
	return p, err
}

// recordKeys are the keys of records, as strings.
func recordKeys(rs []KeyRecord) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Key
	}
	return out
}

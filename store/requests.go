package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sendonce/sendonce/gate"
)

// Request ids: a state-changing operation may carry a client-chosen request id. The
// decision and the request's answer are stored in the same transaction, so a retry with
// the same id learns what happened instead of deciding again. Only decisions and
// permanent refusals (bad input, consumed, stale) are stored; held and fail-closed are
// asked again. Nothing marks a request as in progress: the answer exists once the
// decision committed, or not at all.

// ErrRequestReused: a request id came back with a different request. It is bad input
// (it matches gate.ErrInvalid); an HTTP service answers it 422.
var ErrRequestReused = fmt.Errorf("%w: the request id was used for a different request", gate.ErrInvalid)

// StoredRequest is a request id's stored answer.
type StoredRequest struct {
	Scope       string // whose ids: a token's name, or "" for the store's own callers
	ID          string
	Fingerprint string // SHA-256 of the request's canonical form
	Response    []byte // the answer as JSON
	At          time.Time
}

// RequestRef names a request for replay: who asks (Scope) and its id. A zero
// RequestRef stores and replays nothing.
type RequestRef struct {
	Scope string
	ID    string
	// Fingerprint is the caller's own digest of its request (an HTTP service's: method,
	// path, body), mixed into the store's: the same id with another body is reused.
	Fingerprint string
}

// of is the fingerprint stored for a request whose store-side fingerprint is fp.
func (r RequestRef) of(fp string) string {
	if r.Fingerprint == "" {
		return fp
	}
	h := sha256.Sum256([]byte(fp + ":" + r.Fingerprint))
	return hex.EncodeToString(h[:])
}

func (r RequestRef) set() bool { return r.ID != "" }

func (r RequestRef) check() error {
	if len(r.ID) > 200 || strings.ContainsAny(r.ID, "\n\r") || len(r.Scope) > 200 {
		return fmt.Errorf("%w: a request id is at most 200 characters on one line", gate.ErrInvalid)
	}
	return nil
}

// fingerprint is the SHA-256 of a request's canonical JSON form.
func fingerprint(op string, v any) string {
	b, _ := json.Marshal(struct {
		Op  string `json:"op"`
		Req any    `json:"req"`
	}{op, v})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// storedRefusal is a refusal as stored.
type storedRefusal struct {
	Kind   string      `json:"kind"` // consumed, stale, invalid
	Reason string      `json:"reason"`
	Status gate.Status `json:"status"`
}

var refusalKinds = map[string]error{"consumed": gate.ErrConsumed, "stale": gate.ErrStale, "invalid": gate.ErrInvalid}

// permanent is the stored form of a refusal that a retry would get again, or nil for
// one it must ask again (held).
func permanent(r *gate.Refusal) *storedRefusal {
	for name, kind := range refusalKinds {
		if errors.Is(r, kind) {
			return &storedRefusal{Kind: name, Reason: r.Reason, Status: r.Status}
		}
	}
	return nil
}

func (s *storedRefusal) refusal() *gate.Refusal {
	return &gate.Refusal{Kind: refusalKinds[s.Kind], Reason: s.Reason, Status: s.Status}
}

// replay looks up a request id in tx: the stored answer when the same request was
// answered before, ErrRequestReused when the id came with another request, or nil.
func replay(tx Tx, ref RequestRef, fp string) ([]byte, error) {
	if !ref.set() {
		return nil, nil
	}
	got, err := tx.Request(ref.Scope, ref.ID)
	switch {
	case err != nil || got == nil:
		return nil, err
	case got.Fingerprint != ref.of(fp):
		return nil, fmt.Errorf("%w: request id %q was first used at %s for another request; use a new id for a new request",
			ErrRequestReused, ref.ID, got.At.UTC().Format(time.RFC3339))
	}
	return got.Response, nil
}

func remember(tx Tx, ref RequestRef, fp string, answer any) error {
	if !ref.set() {
		return nil
	}
	b, err := json.Marshal(answer)
	if err != nil {
		return err
	}
	return tx.StoreRequest(StoredRequest{Scope: ref.Scope, ID: ref.ID, Fingerprint: ref.of(fp), Response: b, At: tx.Now()})
}

// claimAnswer is a claim's decision as stored for replay.
type claimAnswer struct {
	Intent       int64          `json:"intent"`
	Granted      bool           `json:"granted"`
	Token        uint64         `json:"token,omitempty"`
	DispatchID   string         `json:"dispatch_id,omitempty"`
	Revision     int            `json:"revision,omitempty"`
	LeaseExpires time.Time      `json:"lease_expires,omitzero"`
	Fenced       uint64         `json:"fenced,omitempty"`
	Previous     gate.Status    `json:"previous"`
	Refusal      *storedRefusal `json:"refusal,omitempty"`
}

// replayClaim rebuilds a claim's answer from what was stored for its request id.
func replayClaim(tx Tx, stored []byte, req ClaimRequest, res *ClaimResult) error {
	var a claimAnswer
	if err := json.Unmarshal(stored, &a); err != nil {
		return fmt.Errorf("the stored answer to request %q is unreadable: %v", req.Request.ID, err)
	}
	keys, err := tx.KeysOf(a.Intent)
	if err != nil {
		return err
	}
	res.Keys, res.Strength, res.Previous, res.Fenced, res.Replayed = keys, strengthOf(keys), a.Previous, a.Fenced, true
	if res.Prior, err = latestRecord(tx, a.Intent); err != nil {
		return err
	}
	if a.Granted {
		res.Granted = true
		res.Permit = &Permit{key: res.Key, task: req.Task, token: a.Token, dispatchID: a.DispatchID, revision: a.Revision, leaseExpires: a.LeaseExpires}
		return nil
	}
	if a.Refusal == nil {
		return fmt.Errorf("the stored answer to request %q is neither a grant nor a refusal", req.Request.ID)
	}
	res.Refusal = a.Refusal.refusal()
	return nil
}

// recordAnswer is a record's decision as stored for replay.
type recordAnswer struct {
	Recorded gate.Outcome   `json:"recorded,omitempty"`
	Refusal  *storedRefusal `json:"refusal,omitempty"`
}

// ForgetRequests deletes the answers to request ids stored before before: a request id
// is an answer's name for a retention time (an HTTP service's Idempotency-Key, 24 hours
// by default). A delivery's key is never forgotten: a request after the retention gets
// a new decision from the rules, which refuse a consumed intent as always.
func (s *Store) ForgetRequests(ctx context.Context, before time.Time) (int, error) {
	var n int
	err := s.update(ctx, func(tx Tx) (err error) {
		n, err = tx.ForgetRequests(before)
		return err
	})
	return n, err
}

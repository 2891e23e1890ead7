// Recording an attempt's outcome: RecordRequest and Record.

package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/gate"
)

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

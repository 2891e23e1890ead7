// The Permit a claim grants, the one way every permit operation runs (permitOp: load,
// decide, write the change and an event), and keeping a permit's lease alive (Renew,
// KeepAlive).

package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/gate"
)

// Permit is a claim's grant: the capability to check, cross, renew and record for one
// attempt. Only the store makes one.
type Permit struct {
	key          gate.Key
	task         string
	token        uint64
	dispatchID   string
	revision     int
	leaseExpires time.Time
	keys         []string // every key the claim bound, as the store had them
}

func (p *Permit) Key() gate.Key           { return p.key }
func (p *Permit) Task() string            { return p.task }
func (p *Permit) Token() uint64           { return p.token }
func (p *Permit) DispatchID() string      { return p.dispatchID }
func (p *Permit) Revision() int           { return p.revision }
func (p *Permit) LeaseExpires() time.Time { return p.leaseExpires }

// Keys are every key of the permit's intent (the destination's other names) when it
// was claimed or resumed.
func (p *Permit) Keys() []string      { return p.keys }
func (p *Permit) ref() gate.PermitRef { return gate.PermitRef{Task: p.task, Token: p.token} }

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

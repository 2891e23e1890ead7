package store

import (
	"context"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/gate"
)

// DisplayLease is the right to send input to one display. One delivery drives a desktop
// at a time, so two deliveries of different keys never interleave input in one app, and
// a worker paused past its lease cannot type into the app when it wakes: the lease is
// fenced like a key's permit and checked before every input event.
type DisplayLease struct {
	display string
	task    string
	token   uint64
	expires time.Time
}

func (d *DisplayLease) Display() string         { return d.display }
func (d *DisplayLease) Token() uint64           { return d.token }
func (d *DisplayLease) LeaseExpires() time.Time { return d.expires }

// displayIntent views a display lease as an intent with one attempt and no crossings,
// so that the gate's lease rules (free, held, expired, fenced) apply unchanged.
func displayIntent(d *DisplayRecord) gate.Intent {
	if d == nil {
		return gate.Intent{}
	}
	a := &gate.Attempt{Task: d.Task, Token: d.Token, LeaseExpires: d.LeaseExpires}
	if d.Released {
		a.Recorded, a.Axes = true, gate.AxesFor(gate.NotSent)
	}
	return gate.Intent{Latest: a}
}

// AcquireDisplay takes the lease on display for task, or refuses while another task
// holds it (gate.ErrHeld, naming the holder).
func (s *Store) AcquireDisplay(ctx context.Context, display, task string, lease time.Duration) (*DisplayLease, error) {
	if display == "" || task == "" || lease <= 0 {
		return nil, fmt.Errorf("%w: a display lease needs a display, a task and a positive lease", gate.ErrInvalid)
	}
	var got *DisplayLease
	var refusal *gate.Refusal
	err := s.update(ctx, func(tx Tx) error {
		got, refusal = nil, nil
		cur, err := tx.DisplayLease(display)
		if err != nil {
			return err
		}
		now := tx.Now()
		token, err := tx.NextToken()
		if err != nil {
			return err
		}
		_, g, r := gate.Claim(displayIntent(cur), task, now, now.Add(lease), token, "")
		if r != nil {
			refusal = r
			refusal.Reason = "display " + display + ": " + r.Reason
			return nil
		}
		got = &DisplayLease{display: display, task: task, token: token, expires: g.Attempt.LeaseExpires}
		return tx.SetDisplayLease(DisplayRecord{Display: display, Task: task, Token: token, LeaseExpires: got.expires})
	})
	if err != nil {
		return nil, err
	}
	if refusal != nil {
		return nil, refusal
	}
	return got, nil
}

// CheckDisplay fails unless the lease is still the display's live lease.
func (s *Store) CheckDisplay(ctx context.Context, d *DisplayLease) error {
	if d == nil {
		return fmt.Errorf("no display lease: %w", gate.ErrStale)
	}
	return s.view(ctx, func(tx Tx) error {
		cur, err := tx.DisplayLease(d.display)
		if err != nil {
			return err
		}
		if r := gate.Check(displayIntent(cur), gate.PermitRef{Task: d.task, Token: d.token}, gate.OpenPicker, tx.Now()); r != nil {
			r.Reason = "display " + d.display + ": " + r.Reason
			return r
		}
		return nil
	})
}

// Guard is CheckDisplay as a function of its own: what the desktop asks before every
// input event (driver.Guarded), straight from the store.
func (s *Store) Guard(d *DisplayLease) func(context.Context) error {
	return func(ctx context.Context) error { return s.CheckDisplay(ctx, d) }
}

// KeepLeases renews a delivery's two leases, its permit's and its display's, every
// third of lease until ctx ends (KeepAlive: a refused renewal calls stop).
func (s *Store) KeepLeases(ctx context.Context, p *Permit, d *DisplayLease, lease time.Duration, stop context.CancelCauseFunc) <-chan error {
	return KeepAlive(ctx, lease/3, stop, func(ctx context.Context) error {
		if _, err := s.Renew(ctx, p, lease); err != nil {
			return err
		}
		return s.RenewDisplay(ctx, d, lease)
	})
}

// RenewDisplay extends a live display lease.
func (s *Store) RenewDisplay(ctx context.Context, d *DisplayLease, lease time.Duration) error {
	return s.update(ctx, func(tx Tx) error {
		cur, err := tx.DisplayLease(d.display)
		if err != nil {
			return err
		}
		next, r := gate.Renew(displayIntent(cur), gate.PermitRef{Task: d.task, Token: d.token}, tx.Now(), tx.Now().Add(lease))
		if r != nil {
			return r
		}
		d.expires = next.Latest.LeaseExpires
		return tx.SetDisplayLease(DisplayRecord{Display: d.display, Task: d.task, Token: d.token, LeaseExpires: d.expires})
	})
}

// ReleaseDisplay gives the display back; a stale lease releases nothing.
func (s *Store) ReleaseDisplay(ctx context.Context, d *DisplayLease) error {
	return s.update(ctx, func(tx Tx) error {
		cur, err := tx.DisplayLease(d.display)
		if err != nil {
			return err
		}
		if cur == nil || cur.Token != d.token || cur.Released {
			return nil
		}
		cur.Released = true
		return tx.SetDisplayLease(*cur)
	})
}

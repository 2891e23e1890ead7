// What the store tells a person: IntentReport, Status, Show, AttemptByDispatch, and the
// notes a report carries.

package store

import (
	"context"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/gate"
)

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

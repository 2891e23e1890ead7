package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sendonce/sendonce/gate"
)

// ResolveRequest is a provider's evidence for one unknown attempt.
type ResolveRequest struct {
	DispatchID string
	Provider   string // e.g. "xmpp"
	ObjectID   string // the provider's id for the object that is this dispatch
	SHA256     string // of the bytes the provider holds
	Recipient  string // canonical identity the provider delivered to
	Link       string
	// By, when set, is who asked for this resolution (a console's operator), and Note
	// what they said: both recorded in the event, neither judged.
	By, Note string
	// Asserted: SHA256 and Recipient are a person's word, not what a provider showed;
	// the event says so.
	Asserted bool
	// Request, when set, stores the answer with the resolution: the same request id
	// again gets that answer, never a second decision.
	Request RequestRef
}

// Resolve settles an unknown attempt with provider evidence bound to its dispatch: the
// object must not be bound to another dispatch (one object, one dispatch), and the
// attempt is sent_verified when the provider holds the key's exact bytes at one of the
// key's destinations, sent_rejected otherwise. A refusal is logged like every decision.
func (s *Store) Resolve(ctx context.Context, req ResolveRequest) (gate.Outcome, error) {
	if req.DispatchID == "" || req.ObjectID == "" || req.Provider == "" {
		return "", fmt.Errorf("%w: resolving needs a dispatch id and the provider's object id", gate.ErrInvalid)
	}
	if req.SHA256 != "" {
		d, err := gate.ParseDigest(req.SHA256)
		if err != nil {
			return "", err
		}
		req.SHA256 = d.String() // one spelling: lower case
	}
	if err := req.Request.check(); err != nil {
		return "", err
	}
	fp := fingerprint("resolve", struct {
		DispatchID, Provider, ObjectID, SHA256, Recipient, Link string
	}{req.DispatchID, req.Provider, req.ObjectID, req.SHA256, req.Recipient, req.Link})
	var got gate.Outcome
	var refusal *gate.Refusal
	err := s.update(ctx, func(tx Tx) error {
		got, refusal = "", nil
		if b, err := replay(tx, req.Request, fp); err != nil || b != nil {
			if err != nil {
				return err
			}
			var a recordAnswer
			if err := json.Unmarshal(b, &a); err != nil {
				return fmt.Errorf("the stored answer to request %q is unreadable: %v", req.Request.ID, err)
			}
			if got = a.Recorded; a.Refusal != nil {
				refusal = a.Refusal.refusal()
			}
			return nil
		}
		a, err := tx.AttemptByDispatch(req.DispatchID)
		if err != nil {
			return err
		}
		if a == nil {
			return fmt.Errorf("%w: no attempt has dispatch id %s", gate.ErrInvalid, req.DispatchID)
		}
		now := tx.Now()
		d := map[string]string{"provider": req.Provider, "object_id": req.ObjectID, "sha256": req.SHA256, "recipient": req.Recipient, "link": req.Link}
		if req.By != "" {
			d["by"], d["note"] = req.By, req.Note
		}
		if req.Asserted {
			d["asserted"] = "the digest and recipient are the person's word: no provider showed them"
		}
		e := Event{At: now, Intent: a.IntentID, Task: a.Task, Token: a.Token, DispatchID: a.DispatchID, Revision: a.Revision, Detail: d}
		bound, err := tx.ObjectDispatch(req.ObjectID)
		if err != nil {
			return err
		}
		if bound != "" && bound != req.DispatchID {
			return fmt.Errorf("%w: %s object %s is already bound to dispatch %s: it is not proof for %s", gate.ErrInvalid, req.Provider, req.ObjectID, bound, req.DispatchID)
		}
		keys, err := tx.KeysOf(a.IntentID)
		if err != nil {
			return err
		}
		acc, why := judge(keys, req)
		next, o, r := gate.Resolve(a.Attempt, acc, now)
		if r != nil {
			refusal = r
			d["reason"] = r.Reason
			e.Kind = EventResolveRefused
			if p := permanent(r); p != nil {
				if err := remember(tx, req.Request, fp, recordAnswer{Refusal: p}); err != nil {
					return err
				}
			}
			return tx.Append(e)
		}
		if bound == "" {
			if err := tx.BindObject(req.ObjectID, req.DispatchID, now); err != nil {
				return err
			}
		}
		if err := tx.ResolveOutcome(a.Token, next.Axes, now); err != nil {
			return err
		}
		got = o
		d["outcome"], d["reason"] = string(o), why
		e.Kind = EventResolved
		if err := remember(tx, req.Request, fp, recordAnswer{Recorded: o}); err != nil {
			return err
		}
		return tx.Append(e)
	})
	if err != nil {
		return "", err
	}
	if refusal != nil {
		return "", refusal
	}
	return got, nil
}

// judge decides acceptance: the key's exact bytes at one of the key's destinations.
func judge(keys []KeyRecord, req ResolveRequest) (gate.Acceptance, string) {
	sameBytes, sameRecipient := false, req.Recipient == ""
	for _, kr := range keys {
		k, err := gate.ParseKey(kr.Key)
		if err != nil {
			continue
		}
		if strings.EqualFold(k.Digest().String(), req.SHA256) { // hex in either case is the same digest
			sameBytes = true
		}
		if k.Identity().Strength() == gate.Strong && k.Identity().String() == req.Recipient {
			sameRecipient = true
		}
	}
	switch {
	case !sameBytes:
		return gate.AcceptanceRejected, fmt.Sprintf("the provider holds other bytes (SHA-256 %.12s…) for this dispatch", req.SHA256)
	case !sameRecipient:
		return gate.AcceptanceRejected, fmt.Sprintf("the provider delivered this dispatch to %s, not to the key's destination", req.Recipient)
	}
	return gate.AcceptanceAccepted, "the provider holds this dispatch's exact bytes at the key's destination"
}

// NoteAbsence records that the provider reported no such object for an attempt, as of
// a time. It changes nothing: an absence never frees a key by itself (the client may
// still be uploading); it is there for a person deciding on a deliberate redelivery.
func (s *Store) NoteAbsence(ctx context.Context, dispatchID, provider string, authoritative bool, asOf time.Time, detail, by string) error {
	return s.update(ctx, func(tx Tx) error {
		a, err := tx.AttemptByDispatch(dispatchID)
		if err != nil {
			return err
		}
		if a == nil {
			return fmt.Errorf("%w: no attempt has dispatch id %s", gate.ErrInvalid, dispatchID)
		}
		return tx.Append(Event{At: tx.Now(), Intent: a.IntentID, Kind: EventProviderAbsent, Task: a.Task, Token: a.Token, DispatchID: dispatchID, Revision: a.Revision,
			Detail: withBy(map[string]string{"provider": provider, "authoritative": fmt.Sprint(authoritative), "as_of": formatTime(asOf), "detail": detail}, by)})
	})
}

// Unresolved lists the attempts whose result is unknown now, oldest first, with the
// keys of their intents.
func (s *Store) Unresolved(ctx context.Context) ([]AttemptRecord, map[int64][]KeyRecord, error) {
	var as []AttemptRecord
	keys := map[int64][]KeyRecord{}
	err := s.view(ctx, func(tx Tx) error {
		var err error
		if as, err = tx.UnresolvedAttempts(tx.Now()); err != nil {
			return err
		}
		for _, a := range as {
			if _, ok := keys[a.IntentID]; ok {
				continue
			}
			if keys[a.IntentID], err = tx.KeysOf(a.IntentID); err != nil {
				return err
			}
		}
		return nil
	})
	return as, keys, err
}

// ObjectBinding returns the dispatch a provider object is bound to, or "".
func (s *Store) ObjectBinding(ctx context.Context, objectID string) (string, error) {
	var d string
	err := s.view(ctx, func(tx Tx) error {
		var err error
		d, err = tx.ObjectDispatch(objectID)
		return err
	})
	return d, err
}

// withBy adds who asked to an event's detail, when someone did.
func withBy(d map[string]string, by string) map[string]string {
	if by != "" {
		d["by"] = by
	}
	return d
}

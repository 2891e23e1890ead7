// Who may do what: the store's id, workstations' sealing keys, the first authorizer,
// signed statements that add or revoke one, and Authorize, which opens a redelivery.

package store

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sendonce/sendonce/gate"
)

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
	return s.AuthorizeBy(ctx, a, reason, "")
}

// AuthorizeBy is Authorize, recording who accepted the signed authorization (a
// console's operator) beside the authorizer who signed it.
func (s *Store) AuthorizeBy(ctx context.Context, a gate.Authorization, reason, by string) error {
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
		withBy(d, by)
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

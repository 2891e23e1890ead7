// The suite's authorization: deliberate redelivery, authorizers added and revoked only by
// signed statement, and workstations' sealing keys.

package storetest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

func testDeliberateRedelivery(t *testing.T, s *store.Store, c *Clock) {
	k := key(t, "Bob", "report")
	a := mustClaim(t, s, "A", k)
	if _, err := s.Cross(ctx, a, gate.Send, ""); err != nil {
		t.Fatal(err)
	}
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	storeID, err := s.StoreID(ctx)
	if err != nil || len(storeID) != 32 {
		t.Fatalf("store id %q, %v", storeID, err)
	}
	auth := gate.Authorization{StoreID: storeID, Key: k, Revision: 1, Nonce: "nonce-0123456789", ExpiresAt: c.Now().Add(time.Hour), Signer: "carol"}
	auth.Sign(priv)

	wantErr(t, "unregistered authorizer", s.Authorize(ctx, auth, "resend"), gate.ErrInvalid)
	if err := s.AddFirstAuthorizer(ctx, "carol", priv.Public().(ed25519.PublicKey)); err != nil {
		t.Fatal(err)
	}
	mallory := ed25519.NewKeyFromSeed(append(make([]byte, 31), 6))
	wantErr(t, "a second first authorizer", s.AddFirstAuthorizer(ctx, "mallory", mallory.Public().(ed25519.PublicKey)), gate.ErrInvalid)
	elsewhere := auth
	elsewhere.StoreID = "ffffffffffffffffffffffffffffffff"
	elsewhere.Sign(priv)
	wantErr(t, "an authorization for another store", s.Authorize(ctx, elsewhere, "resend"), gate.ErrInvalid)
	wantErr(t, "authorize while held", s.Authorize(ctx, auth, "resend"), gate.ErrHeld)
	if _, err := s.Record(ctx, a, store.RecordRequest{Outcome: gate.SendStatusUnknown}); err != nil {
		t.Fatal(err)
	}
	forged := auth
	forged.Revision = 2
	wantErr(t, "forged revision", s.Authorize(ctx, forged, "resend"), gate.ErrInvalid)
	wantErr(t, "no reason", s.Authorize(ctx, auth, ""), gate.ErrInvalid)
	wantErr(t, "authorize", s.Authorize(ctx, auth, "customer lost the file"), nil)
	wantStatus(t, s, gate.StatusFree, k)
	wantErr(t, "same signature again", s.Authorize(ctx, auth, "again"), gate.ErrInvalid)

	b := mustClaim(t, s, "B", k)
	if b.Revision() != 1 {
		t.Fatalf("revision %d; want 1", b.Revision())
	}
	_, err = claim(t, s, "C", k)
	wantErr(t, "second executor for r1", err, gate.ErrHeld)
	if _, err := s.Cross(ctx, b, gate.Send, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Record(ctx, b, store.RecordRequest{Outcome: gate.SentVerified}); err != nil {
		t.Fatal(err)
	}
	_, err = claim(t, s, "C", k)
	wantErr(t, "claim after r1 verified", err, gate.ErrConsumed)

	rs, err := s.Show(ctx, []gate.Key{k})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, e := range rs[0].Events {
		if e.Kind == store.EventAuthorized {
			found = e.Detail["authorizer"] == "carol" && e.Detail["reason"] == "customer lost the file" && e.Detail["follows_revision"] == "0" && e.Detail["opens_revision"] == "1"
		}
	}
	if !found {
		t.Fatalf("no authorized event with who, why and which revision: %+v", rs[0].Events)
	}
	// Both facts kept: the r0 attempt's unknown and the r1 attempt's verified.
	if n := len(rs[0].Attempts); n != 2 || rs[0].Attempts[0].Revision != 0 || rs[0].Attempts[1].Revision != 1 {
		t.Fatalf("attempts %+v", rs[0].Attempts)
	}
}

// testAuthorizerStatements: after the first authorizer, authorizers are added and
// revoked only on an existing authorizer's signed word, for this store, once.
func testAuthorizerStatements(t *testing.T, s *store.Store, c *Clock) {
	storeID, err := s.StoreID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	carol := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	dave := ed25519.NewKeyFromSeed(append(make([]byte, 31), 2))
	eve := ed25519.NewKeyFromSeed(append(make([]byte, 31), 3))
	if err := s.AddFirstAuthorizer(ctx, "carol", carol.Public().(ed25519.PublicKey)); err != nil {
		t.Fatal(err)
	}
	statement := func(action, name string, pub ed25519.PublicKey, signer string, key ed25519.PrivateKey, nonce string) gate.AuthorizerStatement {
		st := gate.AuthorizerStatement{StoreID: storeID, Action: action, Name: name, PublicKey: pub, Nonce: nonce, ExpiresAt: c.Now().Add(time.Hour), Signer: signer}
		st.Sign(key)
		return st
	}
	// An automation with its own key cannot make itself an authorizer.
	self := statement("add", "eve", eve.Public().(ed25519.PublicKey), "eve", eve, "nonce-self-000001")
	wantErr(t, "self-signed add", s.ApplyStatement(ctx, self), gate.ErrInvalid)
	forged := statement("add", "eve", eve.Public().(ed25519.PublicKey), "carol", eve, "nonce-forged-0001")
	wantErr(t, "add signed with the wrong key", s.ApplyStatement(ctx, forged), gate.ErrInvalid)
	other := statement("add", "dave", dave.Public().(ed25519.PublicKey), "carol", carol, "nonce-other-00001")
	other.StoreID = "ffffffffffffffffffffffffffffffff"
	other.Sign(carol)
	wantErr(t, "add for another store", s.ApplyStatement(ctx, other), gate.ErrInvalid)

	add := statement("add", "dave", dave.Public().(ed25519.PublicKey), "carol", carol, "nonce-add-dave-01")
	wantErr(t, "add dave", s.ApplyStatement(ctx, add), nil)
	wantErr(t, "the same statement again", s.ApplyStatement(ctx, add), gate.ErrInvalid)

	// dave may now sign; once revoked (by carol), he may not.
	k := key(t, "Bob", "statements")
	a := mustClaim(t, s, "A", k)
	if _, err := s.Cross(ctx, a, gate.Send, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Record(ctx, a, store.RecordRequest{Outcome: gate.SendStatusUnknown}); err != nil {
		t.Fatal(err)
	}
	revoke := statement("revoke", "dave", nil, "carol", carol, "nonce-revoke-dave")
	wantErr(t, "revoke dave", s.ApplyStatement(ctx, revoke), nil)
	auth := gate.Authorization{StoreID: storeID, Key: k, Revision: 1, Nonce: "nonce-dave-auth-1", ExpiresAt: c.Now().Add(time.Hour), Signer: "dave"}
	auth.Sign(dave)
	wantErr(t, "authorization by a revoked authorizer", s.Authorize(ctx, auth, "resend"), gate.ErrInvalid)
	again := statement("add", "dave", dave.Public().(ed25519.PublicKey), "carol", carol, "nonce-add-dave-02")
	wantErr(t, "a revoked name added again", s.ApplyStatement(ctx, again), gate.ErrInvalid)
}

// testWorkstationKeys: a workstation's sealing key is registered once; the same key
// again is accepted, another key for the same id is refused and changes nothing.
func testWorkstationKeys(t *testing.T, s *store.Store, c *Clock) {
	ctx := context.Background()
	a := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32)).Public().(ed25519.PublicKey)
	b := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, 32)).Public().(ed25519.PublicKey)
	if pub, err := s.WorkstationKey(ctx, "ws-1"); err != nil || pub != nil {
		t.Fatalf("unregistered workstation: %v, %v", pub, err)
	}
	if err := s.RegisterWorkstation(ctx, "ws-1", a); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterWorkstation(ctx, "ws-1", a); err != nil {
		t.Fatalf("the same key again: %v", err)
	}
	wantErr(t, "another key for the same id", s.RegisterWorkstation(ctx, "ws-1", b), gate.ErrInvalid)
	wantErr(t, "a bad id", s.RegisterWorkstation(ctx, "ws/1", b), gate.ErrInvalid)
	if pub, err := s.WorkstationKey(ctx, "ws-1"); err != nil || !bytes.Equal(pub, a) {
		t.Fatalf("registered key: %v, %v", pub, err)
	}
}

package gate

import (
	"crypto/ed25519"
	"errors"
	"testing"
	"time"
)

func TestAuthorizationRoundTrip(t *testing.T) {
	a, pub, _ := testAuthorizationF()
	b, err := MarshalAuthorization(a)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseAuthorization(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(pub, t0); err != nil {
		t.Fatalf("verify after round trip: %v", err)
	}
	if err := back.Verify(pub, t0.Add(2*time.Hour)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("expired authorization verified: %v", err)
	}
	for name, mutate := range map[string]func(*Authorization){
		"revision": func(a *Authorization) { a.Revision = 2 },
		"nonce":    func(a *Authorization) { a.Nonce = "fedcba9876543210" },
		"expiry":   func(a *Authorization) { a.ExpiresAt = a.ExpiresAt.Add(time.Hour) },
		"signer":   func(a *Authorization) { a.Signer = "mallory" },
		"store":    func(a *Authorization) { a.StoreID = "ffffffffffffffffffffffffffffffff" },
		"key":      func(a *Authorization) { id, _ := Title("Eve"); a.Key = NewKey(id, a.Key.Digest()) },
	} {
		m := back
		mutate(&m)
		if err := m.Verify(pub, t0); !errors.Is(err, ErrInvalid) {
			t.Errorf("changed %s still verifies: %v", name, err)
		}
	}
	other := ed25519.NewKeyFromSeed(append(make([]byte, 31), 1)).Public().(ed25519.PublicKey)
	if err := back.Verify(other, t0); !errors.Is(err, ErrInvalid) {
		t.Errorf("verified with another authorizer's key: %v", err)
	}
}

func TestParseAuthorizationRejects(t *testing.T) {
	for name, in := range map[string]string{
		"not json":          "nope",
		"unknown field":     `{"format":"sendonce-authorization/v1","extra":1}`,
		"wrong format":      `{"format":"x"}`,
		"v1 names no store": `{"format":"sendonce-authorization/v1","key":"v1:title:Bob:8a3c67892f82af22b58377b8e85bb41899053788d3aa3b81d2e6b4580e917c29","revision":1,"nonce":"0123456789abcdef","expires_at":"2026-12-01T00:00:00Z","signer":"c","signature":""}`,
		"no store id":       `{"format":"sendonce-authorization/v2","key":"v1:title:Bob:8a3c67892f82af22b58377b8e85bb41899053788d3aa3b81d2e6b4580e917c29","revision":1,"nonce":"0123456789abcdef","expires_at":"2026-12-01T00:00:00Z","signer":"c","signature":""}`,
		"bad key":           `{"format":"sendonce-authorization/v1","key":"Bob","revision":1,"nonce":"0123456789abcdef","expires_at":"2026-12-01T00:00:00Z","signer":"c","signature":""}`,
	} {
		if _, err := ParseAuthorization([]byte(in)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v; want ErrInvalid", name, err)
		}
	}
}

func FuzzParseAuthorization(f *testing.F) {
	a, _, _ := testAuthorizationF()
	b, _ := MarshalAuthorization(a)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseAuthorization(b)
		if err != nil {
			return
		}
		again, err := MarshalAuthorization(a)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseAuthorization(again)
		if err != nil || string(back.SignedBytes()) != string(a.SignedBytes()) {
			t.Fatalf("authorization does not round-trip: %v", err)
		}
	})
}

func testAuthorizationF() (Authorization, ed25519.PublicKey, ed25519.PrivateKey) {
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	id, _ := Title("Bob")
	a := Authorization{StoreID: testStoreID, Key: NewKey(id, DigestOf([]byte("report"))), Revision: 1, Nonce: "0123456789abcdef", ExpiresAt: t0.Add(time.Hour), Signer: "carol"}
	a.Sign(priv)
	return a, priv.Public().(ed25519.PublicKey), priv
}

const testStoreID = "0123456789abcdef0123456789abcdef"

func TestAuthorizerStatementRoundTrip(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	newcomer := ed25519.NewKeyFromSeed(append(make([]byte, 31), 9)).Public().(ed25519.PublicKey)
	for _, st := range []AuthorizerStatement{
		{StoreID: testStoreID, Action: "add", Name: "dave", PublicKey: newcomer, Nonce: "0123456789abcdef", ExpiresAt: t0.Add(time.Hour), Signer: "carol"},
		{StoreID: testStoreID, Action: "revoke", Name: "dave", Nonce: "0123456789abcdeg", ExpiresAt: t0.Add(time.Hour), Signer: "carol"},
	} {
		st.Sign(priv)
		b, err := MarshalAuthorizerStatement(st)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseAuthorizerStatement(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := back.Verify(priv.Public().(ed25519.PublicKey), t0); err != nil {
			t.Fatalf("%s: %v", st.Action, err)
		}
		for name, mutate := range map[string]func(*AuthorizerStatement){
			"action": func(a *AuthorizerStatement) { a.Action = map[string]string{"add": "revoke", "revoke": "add"}[a.Action] },
			"name":   func(a *AuthorizerStatement) { a.Name = "mallory" },
			"store":  func(a *AuthorizerStatement) { a.StoreID = "ffffffffffffffffffffffffffffffff" },
			"key":    func(a *AuthorizerStatement) { a.PublicKey = priv.Public().(ed25519.PublicKey) },
		} {
			m := back
			mutate(&m)
			if err := m.Verify(priv.Public().(ed25519.PublicKey), t0); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s statement with changed %s still verifies: %v", st.Action, name, err)
			}
		}
	}
}

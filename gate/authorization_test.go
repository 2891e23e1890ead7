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
		"not json":      "nope",
		"unknown field": `{"format":"sendonce-authorization/v1","extra":1}`,
		"wrong format":  `{"format":"x"}`,
		"bad key":       `{"format":"sendonce-authorization/v1","key":"Bob","revision":1,"nonce":"0123456789abcdef","expires_at":"2026-12-01T00:00:00Z","signer":"c","signature":""}`,
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
	a := Authorization{Key: NewKey(id, DigestOf([]byte("report"))), Revision: 1, Nonce: "0123456789abcdef", ExpiresAt: t0.Add(time.Hour), Signer: "carol"}
	a.Sign(priv)
	return a, priv.Public().(ed25519.PublicKey), priv
}

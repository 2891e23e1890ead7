// Package storetest is the conformance suite every store.Backend must pass: each cell
// of the gate contract, aliases, authorizations and the event log, through store.Store
// over the backend under test.
package storetest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

// Clock is a settable clock for the backend under test.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock starts at a fixed time.
func NewClock() *Clock { return &Clock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)} }

// Now reads the clock.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// Factory makes a fresh, initialized, empty backend that reads clock.Now.
type Factory func(t *testing.T, clock *Clock) store.Backend

const lease = time.Minute

// Run runs the suite.
func Run(t *testing.T, newBackend Factory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s *store.Store, c *Clock)
	}{
		{"FreeIntentIsGranted", testFreeIntentIsGranted},
		{"LiveLeaseRefusesOthers", testLiveLeaseRefusesOthers},
		{"ResumeFencesOlderToken", testResumeFencesOlderToken},
		{"ExpiredLeaseBeforeCrossing", testExpiredLeaseBeforeCrossing},
		{"CrossingConsumes", testCrossingConsumes},
		{"CrossingExpiredIsUnknown", testCrossingExpiredIsUnknown},
		{"OutcomesEndTheAttempt", testOutcomesEndTheAttempt},
		{"NotSentFreesOneNewExecutor", testNotSentFreesOneNewExecutor},
		{"NotSentAfterCrossingIsUnknown", testNotSentAfterCrossingIsUnknown},
		{"VerifiedNeedsCrossing", testVerifiedNeedsCrossing},
		{"TokensOnlyIncrease", testTokensOnlyIncrease},
		{"AliasReachesConsumedIntent", testAliasReachesConsumedIntent},
		{"AliasesOfFreeIntentsMerge", testAliasesOfFreeIntentsMerge},
		{"AliasPrecedence", testAliasPrecedence},
		{"DeliberateRedelivery", testDeliberateRedelivery},
		{"AuthorizersOnlyBySignedStatement", testAuthorizerStatements},
		{"EventLogExplainsDecisions", testEventLogExplainsDecisions},
		{"PassIsOneUse", testPassIsOneUse},
		{"ConcurrentClaimsOneWinner", testConcurrentClaimsOneWinner},
		{"DisplayLease", testDisplayLease},
		{"ResolveWithProviderEvidence", testResolve},
		{"WorkstationKeys", testWorkstationKeys},
		{"ClaimRequestIDs", testClaimRequestIDs},
		{"RecordRequestIDs", testRecordRequestIDs},
		{"CrossingGivenOutOnce", testCrossingGivenOutOnce},
		{"ForgetRequests", testForgetRequests},
		{"CrossAndResolveRequestIDs", testCrossAndResolveRequestIDs},
		{"RolledBackStoreFailsClosed", testRolledBack},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewClock()
			b := newBackend(t, c)
			s := store.New(b)
			t.Cleanup(func() { s.Close() })
			tt.fn(t, s, c)
		})
	}
}

func key(t *testing.T, title, content string) gate.Key {
	t.Helper()
	id, err := gate.Title(title)
	if err != nil {
		t.Fatal(err)
	}
	return gate.NewKey(id, gate.DigestOf([]byte(content)))
}

func destKey(t *testing.T, dest, content string) gate.Key {
	t.Helper()
	id, err := gate.ProviderID(dest)
	if err != nil {
		t.Fatal(err)
	}
	return gate.NewKey(id, gate.DigestOf([]byte(content)))
}

func claim(t *testing.T, s *store.Store, task string, keys ...gate.Key) (store.ClaimResult, error) {
	t.Helper()
	return s.Claim(context.Background(), store.ClaimRequest{Keys: keys, Task: task, Lease: lease})
}

func mustClaim(t *testing.T, s *store.Store, task string, keys ...gate.Key) *store.Permit {
	t.Helper()
	res, err := claim(t, s, task, keys...)
	if err != nil || !res.Granted || res.Permit == nil {
		t.Fatalf("claim by %s: %+v, %v; want granted", task, res, err)
	}
	return res.Permit
}

func wantErr(t *testing.T, what string, err, kind error) {
	t.Helper()
	if kind == nil && err != nil {
		t.Fatalf("%s: %v; want success", what, err)
	}
	if kind != nil && !errors.Is(err, kind) {
		t.Fatalf("%s: %v; want %v", what, err, kind)
	}
}

func status(t *testing.T, s *store.Store, keys ...gate.Key) gate.Status {
	t.Helper()
	rs, err := s.Status(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 {
		t.Fatalf("status of %v: %d intents; want 1", keys, len(rs))
	}
	return rs[0].Status
}

func wantStatus(t *testing.T, s *store.Store, want gate.Status, keys ...gate.Key) {
	t.Helper()
	if got := status(t, s, keys...); got != want {
		t.Fatalf("status %s; want %s", got, want)
	}
}

func resume(t *testing.T, s *store.Store, k gate.Key, task string, token uint64) *store.Permit {
	t.Helper()
	p, err := s.Resume(context.Background(), k, gate.PermitRef{Task: task, Token: token})
	if err != nil {
		t.Fatalf("resume %s/%d: %v", task, token, err)
	}
	return p
}

var ctx = context.Background()

func testFreeIntentIsGranted(t *testing.T, s *store.Store, c *Clock) {
	k := key(t, "Bob", "report")
	wantStatus(t, s, gate.StatusFree, k)
	res, err := claim(t, s, "A", k)
	wantErr(t, "claim", err, nil)
	if res.Strength != gate.Weak || len(res.Keys) != 1 || res.Keys[0].Strength != gate.Weak || res.Permit.DispatchID() == "" {
		t.Fatalf("result %+v: want one weak key and a dispatch id", res)
	}
	if !res.Permit.LeaseExpires().Equal(c.Now().Add(lease)) {
		t.Fatalf("lease %v; want %v", res.Permit.LeaseExpires(), c.Now().Add(lease))
	}
	wantStatus(t, s, gate.StatusHeld, k)
	wantErr(t, "check open_picker", s.Check(ctx, res.Permit, gate.OpenPicker), nil)
}

func testLiveLeaseRefusesOthers(t *testing.T, s *store.Store, c *Clock) {
	k := key(t, "Bob", "report")
	p := mustClaim(t, s, "A", k)
	res, err := claim(t, s, "B", k)
	wantErr(t, "claim by B", err, gate.ErrHeld)
	if res.Granted || res.Refusal == nil || res.Refusal.Holder != "A" || !res.Refusal.HolderLeaseExpires.Equal(p.LeaseExpires()) {
		t.Fatalf("refusal %+v: want holder A until %v", res.Refusal, p.LeaseExpires())
	}
	if res.Prior == nil || res.Prior.DispatchID != p.DispatchID() {
		t.Fatalf("refusal names prior attempt %+v; want %s", res.Prior, p.DispatchID())
	}
	// A's permit still works; a guessed token does not.
	wantErr(t, "holder check", s.Check(ctx, p, gate.ChooseFile), nil)
	_, err = s.Resume(ctx, k, gate.PermitRef{Task: "B", Token: p.Token()})
	wantErr(t, "resume with another task", err, gate.ErrStale)
	_, err = s.Resume(ctx, k, gate.PermitRef{Task: "A", Token: p.Token() + 100})
	wantErr(t, "resume with a guessed token", err, gate.ErrStale)
}

func testResumeFencesOlderToken(t *testing.T, s *store.Store, c *Clock) {
	k := key(t, "Bob", "report")
	old := mustClaim(t, s, "A", k)
	res, err := claim(t, s, "A", k)
	wantErr(t, "resume claim", err, nil)
	if res.Fenced != old.Token() || res.Permit.Token() <= old.Token() {
		t.Fatalf("resume %+v: want token > %d fencing it", res, old.Token())
	}
	wantErr(t, "old check", s.Check(ctx, old, gate.OpenPicker), gate.ErrStale)
	_, err = s.Cross(ctx, old, gate.ChooseFile, "")
	wantErr(t, "old cross", err, gate.ErrStale)
	_, err = s.Renew(ctx, old, lease)
	wantErr(t, "old renew", err, gate.ErrStale)
	_, err = s.Record(ctx, old, store.RecordRequest{Outcome: gate.NotSent})
	wantErr(t, "old record", err, gate.ErrStale)
	wantErr(t, "new check", s.Check(ctx, res.Permit, gate.OpenPicker), nil)
}

func testExpiredLeaseBeforeCrossing(t *testing.T, s *store.Store, c *Clock) {
	k := key(t, "Bob", "report")
	a := mustClaim(t, s, "A", k)
	c.Advance(lease + time.Second)
	wantStatus(t, s, gate.StatusFree, k)
	wantErr(t, "expired check", s.Check(ctx, a, gate.OpenPicker), gate.ErrStale)
	_, err := s.Cross(ctx, a, gate.ChooseFile, "")
	wantErr(t, "expired cross", err, gate.ErrStale)
	_, err = s.Renew(ctx, a, lease)
	wantErr(t, "expired renew", err, gate.ErrStale)

	b := mustClaim(t, s, "B", k)
	_, err = s.Record(ctx, a, store.RecordRequest{Outcome: gate.NotSent})
	wantErr(t, "old holder records after takeover", err, gate.ErrStale)
	wantErr(t, "new holder check", s.Check(ctx, b, gate.OpenPicker), nil)

	// With no later token, the expired holder may still prove not_sent.
	k2 := key(t, "Bob", "other")
	a2 := mustClaim(t, s, "A", k2)
	c.Advance(lease + time.Second)
	got, err := s.Record(ctx, a2, store.RecordRequest{Outcome: gate.NotSent})
	wantErr(t, "expired holder records not_sent", err, nil)
	if got != gate.NotSent {
		t.Fatalf("recorded %s", got)
	}
	wantStatus(t, s, gate.StatusNotSent, k2)
}

func testCrossingConsumes(t *testing.T, s *store.Store, c *Clock) {
	k := key(t, "Bob", "report")
	a := mustClaim(t, s, "A", k)
	wantErr(t, "check open_picker", s.Check(ctx, a, gate.OpenPicker), nil)
	_, err := s.Cross(ctx, a, gate.OpenPicker, "")
	wantErr(t, "cross open_picker", err, gate.ErrInvalid)
	_, err = s.Cross(ctx, a, gate.ChooseFile, "head1")
	wantErr(t, "cross choose_file", err, nil)
	_, err = claim(t, s, "B", k)
	wantErr(t, "claim after crossing", err, gate.ErrConsumed)
	_, err = claim(t, s, "A", k)
	wantErr(t, "claim by the holder after crossing", err, gate.ErrConsumed)
	_, err = s.Cross(ctx, a, gate.ChooseFile, "")
	wantErr(t, "cross choose_file again", err, gate.ErrConsumed)
	wantErr(t, "check choose_file again", s.Check(ctx, a, gate.ChooseFile), gate.ErrConsumed)
	wantErr(t, "check send", s.Check(ctx, a, gate.Send), nil)
	_, err = s.Renew(ctx, a, lease)
	wantErr(t, "renew while crossed", err, nil)
	_, err = s.Cross(ctx, a, gate.Send, "head2")
	wantErr(t, "cross send", err, nil)
	_, err = s.Cross(ctx, a, gate.Send, "")
	wantErr(t, "cross send again", err, gate.ErrConsumed)
	rs, err := s.Status(ctx, []gate.Key{k})
	if err != nil {
		t.Fatal(err)
	}
	cr := rs[0].Latest().Crossings
	if len(cr) != 2 || cr[0].Boundary != gate.ChooseFile || cr[0].ChainHead != "head1" || cr[1].Boundary != gate.Send || cr[1].ChainHead != "head2" {
		t.Fatalf("crossings %+v", cr)
	}
	byID, err := s.AttemptByDispatch(ctx, a.DispatchID())
	if err != nil || byID == nil || byID.Token != a.Token() || len(byID.Crossings) != 2 || byID.Crossings[1].ChainHead != "head2" {
		t.Fatalf("attempt by dispatch id: %+v, %v", byID, err)
	}
	if none, err := s.AttemptByDispatch(ctx, "no-such-dispatch"); none != nil || err != nil {
		t.Fatalf("unknown dispatch id: %+v, %v; want nil, nil", none, err)
	}
}

func testCrossingExpiredIsUnknown(t *testing.T, s *store.Store, c *Clock) {
	k := key(t, "Bob", "report")
	a := mustClaim(t, s, "A", k)
	if _, err := s.Cross(ctx, a, gate.ChooseFile, ""); err != nil {
		t.Fatal(err)
	}
	c.Advance(lease + time.Second)
	wantStatus(t, s, gate.StatusSendStatusUnknown, k)
	_, err := claim(t, s, "B", k)
	wantErr(t, "claim after expired crossing", err, gate.ErrConsumed)
	wantErr(t, "check after expiry", s.Check(ctx, a, gate.Send), gate.ErrStale)
	_, err = s.Cross(ctx, a, gate.Send, "")
	wantErr(t, "cross after expiry", err, gate.ErrStale)
	got, err := s.Record(ctx, a, store.RecordRequest{Outcome: gate.SentVerified, Evidence: "/tmp/b"})
	wantErr(t, "late record by the crossing token", err, nil)
	if got != gate.SentVerified {
		t.Fatalf("recorded %s", got)
	}
	wantStatus(t, s, gate.StatusSentVerified, k)
}

func testOutcomesEndTheAttempt(t *testing.T, s *store.Store, c *Clock) {
	for _, o := range []gate.Outcome{gate.SentVerified, gate.SentRejected, gate.SendStatusUnknown} {
		k := key(t, "Bob", string(o))
		a := mustClaim(t, s, "A", k)
		if _, err := s.Cross(ctx, a, gate.Send, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Record(ctx, a, store.RecordRequest{Outcome: o}); err != nil {
			t.Fatalf("record %s: %v", o, err)
		}
		wantStatus(t, s, gate.Status(o), k)
		_, err := claim(t, s, "B", k)
		wantErr(t, "claim after "+string(o), err, gate.ErrConsumed)
		wantErr(t, "check after "+string(o), s.Check(ctx, a, gate.Send), gate.ErrStale)
		_, err = s.Record(ctx, a, store.RecordRequest{Outcome: gate.SentVerified})
		wantErr(t, "second record after "+string(o), err, gate.ErrStale)
		c.Advance(24 * time.Hour)
		_, err = claim(t, s, "C", k)
		wantErr(t, "claim a day after "+string(o), err, gate.ErrConsumed)
	}
}

func testNotSentFreesOneNewExecutor(t *testing.T, s *store.Store, c *Clock) {
	k := key(t, "Bob", "report")
	a := mustClaim(t, s, "A", k)
	if _, err := s.Record(ctx, a, store.RecordRequest{Outcome: gate.NotSent}); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, s, gate.StatusNotSent, k)
	res, err := claim(t, s, "B", k)
	wantErr(t, "claim after not_sent", err, nil)
	if res.Previous != gate.StatusNotSent {
		t.Fatalf("previous %s", res.Previous)
	}
	_, err = claim(t, s, "C", k)
	wantErr(t, "third claim", err, gate.ErrHeld)
}

func testNotSentAfterCrossingIsUnknown(t *testing.T, s *store.Store, c *Clock) {
	k := key(t, "Bob", "report")
	a := mustClaim(t, s, "A", k)
	if _, err := s.Cross(ctx, a, gate.ChooseFile, ""); err != nil {
		t.Fatal(err)
	}
	got, err := s.Record(ctx, a, store.RecordRequest{Outcome: gate.NotSent})
	wantErr(t, "not_sent after crossing", err, gate.ErrConsumed)
	if got != gate.SendStatusUnknown {
		t.Fatalf("recorded %s; want send_status_unknown", got)
	}
	wantStatus(t, s, gate.StatusSendStatusUnknown, k)
}

func testVerifiedNeedsCrossing(t *testing.T, s *store.Store, c *Clock) {
	k := key(t, "Bob", "report")
	a := mustClaim(t, s, "A", k)
	for _, o := range []gate.Outcome{gate.SentVerified, gate.SentRejected} {
		_, err := s.Record(ctx, a, store.RecordRequest{Outcome: o})
		wantErr(t, string(o)+" without crossing", err, gate.ErrInvalid)
	}
	wantStatus(t, s, gate.StatusHeld, k)
}

func testTokensOnlyIncrease(t *testing.T, s *store.Store, c *Clock) {
	var last uint64
	for i := 0; i < 5; i++ {
		p := mustClaim(t, s, "A", key(t, "Bob", fmt.Sprint(i)))
		if p.Token() <= last {
			t.Fatalf("token %d after %d", p.Token(), last)
		}
		last = p.Token()
	}
}

func testAliasReachesConsumedIntent(t *testing.T, s *store.Store, c *Clock) {
	title, dest := key(t, "Bob", "report"), destKey(t, "xmpp:bob@localhost", "report")
	a := mustClaim(t, s, "A", title)
	if _, err := s.Cross(ctx, a, gate.Send, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Record(ctx, a, store.RecordRequest{Outcome: gate.SentVerified}); err != nil {
		t.Fatal(err)
	}
	res, err := claim(t, s, "B", dest, title)
	wantErr(t, "claim by both keys", err, gate.ErrConsumed)
	if res.Strength != gate.Strong || len(res.Keys) != 2 {
		t.Fatalf("keys %+v strength %s: want both keys bound, strong", res.Keys, res.Strength)
	}
	// The provider id alone now reaches the consumed intent: no alias stays free.
	wantStatus(t, s, gate.StatusSentVerified, dest)
	_, err = claim(t, s, "C", dest)
	wantErr(t, "claim by provider id alone", err, gate.ErrConsumed)
}

func testAliasesOfFreeIntentsMerge(t *testing.T, s *store.Store, c *Clock) {
	k1, k2 := key(t, "Bob", "report"), destKey(t, "xmpp:bob@localhost", "report")
	a := mustClaim(t, s, "A", k1)
	if _, err := s.Record(ctx, a, store.RecordRequest{Outcome: gate.NotSent}); err != nil {
		t.Fatal(err)
	}
	b := mustClaim(t, s, "B", k2)
	if _, err := s.Record(ctx, b, store.RecordRequest{Outcome: gate.NotSent}); err != nil {
		t.Fatal(err)
	}
	p := mustClaim(t, s, "C", k2, k1)
	rs, err := s.Status(ctx, []gate.Key{k1, k2})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Status != gate.StatusHeld || len(rs[0].Keys) != 2 {
		t.Fatalf("after merge: %+v; want one held intent with both keys", rs)
	}
	_, err = claim(t, s, "D", k1)
	wantErr(t, "claim by title after merge", err, gate.ErrHeld)
	wantErr(t, "merged permit check", s.Check(ctx, p, gate.OpenPicker), nil)
}

func testAliasPrecedence(t *testing.T, s *store.Store, c *Clock) {
	held, consumed, free := key(t, "Bob", "h"), key(t, "Bob", "c"), key(t, "Bob", "f")
	mustClaim(t, s, "A", held)
	p := mustClaim(t, s, "A", consumed)
	if _, err := s.Cross(ctx, p, gate.Send, ""); err != nil {
		t.Fatal(err)
	}
	res, err := claim(t, s, "B", held, free, consumed)
	wantErr(t, "held+free+consumed", err, gate.ErrConsumed)
	if res.Refusal.Status != gate.StatusHeld { // crossed with a live lease is held, and consumed
		t.Fatalf("refusal status %s", res.Refusal.Status)
	}
	// The free key was bound to the strictest intent: claiming it alone is refused.
	_, err = claim(t, s, "C", free)
	wantErr(t, "free alias after refusal", err, gate.ErrConsumed)
	_, err = claim(t, s, "C", held)
	wantErr(t, "held alias", err, gate.ErrHeld)
}

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

func testEventLogExplainsDecisions(t *testing.T, s *store.Store, c *Clock) {
	k := key(t, "Bob", "report")
	a := mustClaim(t, s, "A", k)
	claim(t, s, "B", k)
	s.Check(ctx, a, gate.OpenPicker)
	s.Renew(ctx, a, lease)
	s.Cross(ctx, a, gate.ChooseFile, "h")
	s.Record(ctx, a, store.RecordRequest{Outcome: gate.SentVerified, Evidence: "/ev", ChainHead: "h2"})
	s.Check(ctx, a, gate.Send)
	rs, err := s.Show(ctx, []gate.Key{k})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []store.EventKind
	for _, e := range rs[0].Events {
		kinds = append(kinds, e.Kind)
	}
	want := []store.EventKind{store.EventIntentCreated, store.EventKeyBound, store.EventClaimGranted, store.EventClaimRefused,
		store.EventCheckPassed, store.EventRenewed, store.EventCrossed, store.EventRecorded, store.EventCheckRefused}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("events %v; want %v", kinds, want)
	}
	refused := rs[0].Events[3]
	if refused.Task != "B" || refused.Detail["holder"] != "A" || refused.Detail["reason"] == "" {
		t.Fatalf("refusal event %+v: want task B, holder A and a reason", refused)
	}
	rec := rs[0].Events[7]
	if rec.Token != a.Token() || rec.DispatchID != a.DispatchID() || rec.Detail["evidence"] != "/ev" || rec.Detail["chain_head"] != "h2" {
		t.Fatalf("record event %+v", rec)
	}
	for i := 1; i < len(rs[0].Events); i++ {
		if rs[0].Events[i].Seq <= rs[0].Events[i-1].Seq || rs[0].Events[i].At.Before(rs[0].Events[i-1].At) {
			t.Fatal("events out of order")
		}
	}
}

func testPassIsOneUse(t *testing.T, s *store.Store, c *Clock) {
	k := key(t, "Bob", "report")
	a := mustClaim(t, s, "A", k)
	pass, err := s.Cross(ctx, a, gate.Send, "")
	if err != nil {
		t.Fatal(err)
	}
	if pass.Boundary() != gate.Send || pass.Permit() != a {
		t.Fatal("pass does not name its crossing")
	}
	wantErr(t, "first use", pass.Use(), nil)
	wantErr(t, "second use", pass.Use(), store.ErrPassUsed)
	var none *store.Pass
	wantErr(t, "nil pass", none.Use(), gate.ErrStale)
}

func testConcurrentClaimsOneWinner(t *testing.T, s *store.Store, c *Clock) {
	k := key(t, "Bob", "report")
	const n = 16
	var wg sync.WaitGroup
	results := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{k}, Task: fmt.Sprint("task", i), Lease: lease})
			results <- err
		}(i)
	}
	wg.Wait()
	close(results)
	granted := 0
	for err := range results {
		switch {
		case err == nil:
			granted++
		case !errors.Is(err, gate.ErrHeld):
			t.Errorf("claim: %v; want granted or held", err)
		}
	}
	if granted != 1 {
		t.Fatalf("%d grants; want exactly 1", granted)
	}
}

func testDisplayLease(t *testing.T, s *store.Store, c *Clock) {
	a, err := s.AcquireDisplay(ctx, ":9", "A", lease)
	wantErr(t, "acquire", err, nil)
	_, err = s.AcquireDisplay(ctx, ":9", "B", lease)
	wantErr(t, "acquire while held", err, gate.ErrHeld)
	_, err = s.AcquireDisplay(ctx, ":8", "B", lease)
	wantErr(t, "another display", err, nil)
	wantErr(t, "check", s.CheckDisplay(ctx, a), nil)
	c.Advance(lease + time.Second)
	wantErr(t, "check after expiry", s.CheckDisplay(ctx, a), gate.ErrStale)
	b, err := s.AcquireDisplay(ctx, ":9", "B", lease)
	wantErr(t, "acquire after expiry", err, nil)
	wantErr(t, "paused worker wakes", s.CheckDisplay(ctx, a), gate.ErrStale)
	wantErr(t, "stale release is harmless", s.ReleaseDisplay(ctx, a), nil)
	wantErr(t, "new holder still holds", s.CheckDisplay(ctx, b), nil)
	wantErr(t, "release", s.ReleaseDisplay(ctx, b), nil)
	wantErr(t, "check after release", s.CheckDisplay(ctx, b), gate.ErrStale)
	_, err = s.AcquireDisplay(ctx, ":9", "C", lease)
	wantErr(t, "acquire after release", err, nil)
}

func testResolve(t *testing.T, s *store.Store, c *Clock) {
	k := destKey(t, "xmpp:bob@localhost", "report")
	a := mustClaim(t, s, "A", k)
	if _, err := s.Cross(ctx, a, gate.Send, ""); err != nil {
		t.Fatal(err)
	}
	// The provider's digest in upper case is the same digest: hex is compared in either
	// case (it once recorded sent_rejected, for ever).
	req := store.ResolveRequest{DispatchID: a.DispatchID(), Provider: "xmpp", ObjectID: "stanza-1", SHA256: strings.ToUpper(k.Digest().String()), Recipient: "xmpp:bob@localhost"}
	_, err := s.Resolve(ctx, req)
	wantErr(t, "resolve while the lease lives", err, gate.ErrHeld)
	c.Advance(lease + time.Second)
	wantStatus(t, s, gate.StatusSendStatusUnknown, k)
	wantErr(t, "note absence", s.NoteAbsence(ctx, a.DispatchID(), "xmpp", true, c.Now(), "MAM complete, nothing"), nil)
	rs, _ := s.Status(ctx, []gate.Key{k})
	if rs[0].Status != gate.StatusSendStatusUnknown || len(rs[0].Notes) != 1 {
		t.Fatalf("after an absence: %s %v; want still unknown, with a note", rs[0].Status, rs[0].Notes)
	}
	_, err = claim(t, s, "B", k)
	wantErr(t, "an absence frees nothing", err, gate.ErrConsumed)
	got, err := s.Resolve(ctx, req)
	wantErr(t, "resolve", err, nil)
	if got != gate.SentVerified {
		t.Fatalf("resolved %s", got)
	}
	wantStatus(t, s, gate.StatusSentVerified, k)
	_, err = s.Resolve(ctx, req)
	wantErr(t, "resolve twice", err, gate.ErrConsumed)

	// The same provider object cannot prove a second dispatch.
	k2 := destKey(t, "xmpp:bob@localhost", "other")
	b := mustClaim(t, s, "B", k2)
	s.Cross(ctx, b, gate.Send, "")
	s.Record(ctx, b, store.RecordRequest{Outcome: gate.SendStatusUnknown})
	_, err = s.Resolve(ctx, store.ResolveRequest{DispatchID: b.DispatchID(), Provider: "xmpp", ObjectID: "stanza-1", SHA256: k2.Digest().String()})
	wantErr(t, "object bound to another dispatch", err, gate.ErrInvalid)
	// Other bytes: rejected.
	got, err = s.Resolve(ctx, store.ResolveRequest{DispatchID: b.DispatchID(), Provider: "xmpp", ObjectID: "stanza-2", SHA256: k.Digest().String(), Recipient: "xmpp:bob@localhost"})
	wantErr(t, "other bytes", err, nil)
	if got != gate.SentRejected {
		t.Fatalf("other bytes resolved %s", got)
	}
	// Another recipient: rejected.
	k3 := destKey(t, "xmpp:bob@localhost", "third")
	c3 := mustClaim(t, s, "C", k3)
	s.Cross(ctx, c3, gate.Send, "")
	s.Record(ctx, c3, store.RecordRequest{Outcome: gate.SendStatusUnknown})
	got, _ = s.Resolve(ctx, store.ResolveRequest{DispatchID: c3.DispatchID(), Provider: "xmpp", ObjectID: "stanza-3", SHA256: k3.Digest().String(), Recipient: "xmpp:eve@localhost"})
	if got != gate.SentRejected {
		t.Fatalf("another recipient resolved %s", got)
	}
	// Nothing crossed: nothing to resolve.
	k4 := destKey(t, "xmpp:bob@localhost", "fourth")
	d := mustClaim(t, s, "D", k4)
	c.Advance(lease + time.Second)
	_, err = s.Resolve(ctx, store.ResolveRequest{DispatchID: d.DispatchID(), Provider: "xmpp", ObjectID: "stanza-4", SHA256: k4.Digest().String()})
	wantErr(t, "nothing crossed", err, gate.ErrInvalid)
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

// testClaimRequestIDs: a claim with a request id stores its answer with the decision.
// The same id again replays it (the same token and dispatch id, no new attempt); the
// id with another request is refused; a permanent refusal (consumed) is replayed; a
// held refusal is asked again.
func testClaimRequestIDs(t *testing.T, s *store.Store, c *Clock) {
	k := key(t, "Bob", "report")
	ask := func(task, id string) (store.ClaimResult, error) {
		return s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{k}, Task: task, Lease: lease, Request: store.RequestRef{Scope: "agent-1", ID: id}})
	}
	first, err := ask("A", "r1")
	if err != nil || !first.Granted || first.Replayed {
		t.Fatalf("first claim: %+v %v", first, err)
	}
	again, err := ask("A", "r1")
	if err != nil || !again.Granted || !again.Replayed || again.Permit.Token() != first.Permit.Token() || again.Permit.DispatchID() != first.Permit.DispatchID() {
		t.Fatalf("the same request id again: %+v %v; want the first grant replayed", again, err)
	}
	wantErr(t, "the id with another task", func() error { _, err := ask("Z", "r1"); return err }(), store.ErrRequestReused)

	// Held is asked again: B is refused while A holds, and granted once A freed the key.
	_, err = ask("B", "r2")
	wantErr(t, "B while A holds", err, gate.ErrHeld)
	if _, err := s.Record(ctx, first.Permit, store.RecordRequest{Outcome: gate.NotSent}); err != nil {
		t.Fatal(err)
	}
	b, err := ask("B", "r2")
	if err != nil || !b.Granted || b.Replayed {
		t.Fatalf("B after A's not_sent, same id: %+v %v; want a new grant (held was not stored)", b, err)
	}

	// Consumed is stored and replayed.
	if _, err := s.Cross(ctx, b.Permit, gate.ChooseFile, ""); err != nil {
		t.Fatal(err)
	}
	_, err = ask("C", "r3")
	wantErr(t, "C after a crossing", err, gate.ErrConsumed)
	res, err := ask("C", "r3")
	wantErr(t, "C again", err, gate.ErrConsumed)
	if !res.Replayed {
		t.Fatalf("the consumed refusal was decided again, not replayed: %+v", res)
	}
	// Another scope's id of the same name is another request.
	other, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{k}, Task: "D", Lease: lease, Request: store.RequestRef{Scope: "agent-2", ID: "r1"}})
	if !errors.Is(err, gate.ErrConsumed) || other.Replayed {
		t.Fatalf("the same id in another scope: %+v %v; want a decision of its own", other, err)
	}
}

// testRecordRequestIDs: a record with a request id is answered once; the same id again
// gets the same outcome (a retry after a lost response learns what was recorded), the
// id with another outcome is refused, and a record without an id on the ended attempt
// is refused as before.
func testRecordRequestIDs(t *testing.T, s *store.Store, c *Clock) {
	k := key(t, "Bob", "report")
	p := mustClaim(t, s, "A", k)
	if _, err := s.Cross(ctx, p, gate.ChooseFile, ""); err != nil {
		t.Fatal(err)
	}
	rec := func(o gate.Outcome, id string) (gate.Outcome, error) {
		return s.Record(ctx, p, store.RecordRequest{Outcome: o, Request: store.RequestRef{Scope: "agent-1", ID: id}})
	}
	got, err := rec(gate.SendStatusUnknown, "rec1")
	if err != nil || got != gate.SendStatusUnknown {
		t.Fatalf("record: %s %v", got, err)
	}
	got, err = rec(gate.SendStatusUnknown, "rec1")
	if err != nil || got != gate.SendStatusUnknown {
		t.Fatalf("the same record again: %s %v; want the stored answer", got, err)
	}
	_, err = rec(gate.NotSent, "rec1")
	wantErr(t, "the id with another outcome", err, store.ErrRequestReused)
	_, err = s.Record(ctx, p, store.RecordRequest{Outcome: gate.SendStatusUnknown})
	if err == nil {
		t.Fatal("a second record without a request id was accepted")
	}
	// not_sent after a crossing is recorded as unknown and refused; its replay is too.
	k2 := key(t, "Bob", "other")
	p2 := mustClaim(t, s, "B", k2)
	if _, err := s.Cross(ctx, p2, gate.ChooseFile, ""); err != nil {
		t.Fatal(err)
	}
	var first error
	for i := 0; i < 2; i++ {
		got, err := s.Record(ctx, p2, store.RecordRequest{Outcome: gate.NotSent, Request: store.RequestRef{ID: "rec2"}})
		if got != gate.SendStatusUnknown || !errors.Is(err, gate.ErrConsumed) {
			t.Fatalf("not_sent after a crossing, try %d: %s %v; want send_status_unknown and the consumed refusal", i+1, got, err)
		}
		if i == 0 {
			first = err
		} else if err.Error() != first.Error() {
			t.Fatalf("the replay's refusal %q differs from the first %q", err, first)
		}
	}
	wantStatus(t, s, gate.StatusSendStatusUnknown, k2)
	reps, err := s.Show(ctx, []gate.Key{k2})
	if err != nil {
		t.Fatal(err)
	}
	replays, recorded := 0, 0
	for _, e := range reps[0].Events {
		switch e.Kind {
		case store.EventReplayed:
			replays++
		case store.EventRecorded:
			recorded++
		}
	}
	if replays != 1 || recorded != 1 {
		t.Fatalf("%d replays and %d records in the log; want the second try to be a replay of the one record", replays, recorded)
	}
}

// A repeated cross of the same attempt and boundary is refused as consumed, with the
// first crossing's time: never a second crossing, whatever request id it carries.
func testCrossingGivenOutOnce(t *testing.T, s *store.Store, c *Clock) {
	k := key(t, "Bob", "report")
	p := mustClaim(t, s, "A", k)
	if _, err := s.Cross(ctx, p, gate.ChooseFile, ""); err != nil {
		t.Fatal(err)
	}
	first := c.Now()
	c.Advance(time.Second)
	_, err := s.Cross(ctx, p, gate.ChooseFile, "")
	var again *store.CrossedAgain
	if !errors.As(err, &again) || !errors.Is(err, gate.ErrConsumed) {
		t.Fatalf("a second cross of choose_file: %v; want CrossedAgain (consumed)", err)
	}
	if !again.FirstCrossedAt.Equal(first) || again.Boundary != gate.ChooseFile {
		t.Fatalf("CrossedAgain names %s at %v; want choose_file at %v", again.Boundary, again.FirstCrossedAt, first)
	}
	// send after choose_file is a new crossing; then choose_file again is a step back
	// (consumed) and send again is crossed again.
	if _, err := s.Cross(ctx, p, gate.Send, ""); err != nil {
		t.Fatal(err)
	}
	_, err = s.Cross(ctx, p, gate.Send, "")
	if !errors.As(err, &again) || again.Boundary != gate.Send {
		t.Fatalf("a second cross of send: %v; want CrossedAgain", err)
	}
	// Another executor never gets the crossing either.
	_, err = s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{k}, Task: "B"})
	wantErr(t, "a claim after the crossings", err, gate.ErrConsumed)
}

func testForgetRequests(t *testing.T, s *store.Store, c *Clock) {
	k := key(t, "Bob", "report")
	ref := store.RequestRef{Scope: "agent-1", ID: "claim-1"}
	res, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{k}, Task: "A", Request: ref})
	if err != nil || !res.Granted {
		t.Fatalf("claim: %v", err)
	}
	c.Advance(time.Hour)
	if n, err := s.ForgetRequests(ctx, c.Now().Add(-2*time.Hour)); err != nil || n != 0 {
		t.Fatalf("forget before the answer: %d %v; want 0", n, err)
	}
	again, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{k}, Task: "A", Request: ref})
	if err != nil || !again.Replayed || again.Permit.Token() != res.Permit.Token() {
		t.Fatalf("the same id within the retention: %+v %v; want the stored grant", again, err)
	}
	if n, err := s.ForgetRequests(ctx, c.Now()); err != nil || n != 1 {
		t.Fatalf("forget: %d %v; want 1", n, err)
	}
	// Forgotten: the rules decide again (the task resumes its own live claim, a new token).
	after, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{k}, Task: "A", Request: ref})
	if err != nil || after.Replayed || after.Permit.Token() == res.Permit.Token() {
		t.Fatalf("the id after it was forgotten: replayed=%v %v; want a new decision", after.Replayed, err)
	}
}

// A cross's request id is stored with the crossing: the id again is refused as a
// repeated cross; the id with another request is reused (bad input). A resolution's
// answer is stored with it and given again for the same id.
func testCrossAndResolveRequestIDs(t *testing.T, s *store.Store, c *Clock) {
	k := destKey(t, "xmpp:bob@localhost", "report")
	p := mustClaim(t, s, "A", k)
	ref := store.RequestRef{Scope: "agent-1", ID: "cross-1"}
	if _, err := s.CrossRequest(ctx, p, gate.ChooseFile, "", ref); err != nil {
		t.Fatal(err)
	}
	_, err := s.CrossRequest(ctx, p, gate.ChooseFile, "", ref)
	var again *store.CrossedAgain
	if !errors.As(err, &again) {
		t.Fatalf("the same cross request again: %v; want CrossedAgain", err)
	}
	_, err = s.CrossRequest(ctx, p, gate.Send, "", ref)
	wantErr(t, "the cross id with another boundary", err, store.ErrRequestReused)
	if _, err := s.CrossRequest(ctx, p, gate.Send, "", store.RequestRef{Scope: "agent-1", ID: "cross-2"}); err != nil {
		t.Fatalf("send under a new id: %v", err)
	}
	c.Advance(lease + time.Second)
	req := store.ResolveRequest{DispatchID: p.DispatchID(), Provider: "xmpp", ObjectID: "stanza-9", SHA256: k.Digest().String(),
		Recipient: "xmpp:bob@localhost", Request: store.RequestRef{Scope: "operator", ID: "resolve-1"}}
	for i := 0; i < 2; i++ {
		got, err := s.Resolve(ctx, req)
		if err != nil || got != gate.SentVerified {
			t.Fatalf("resolve, try %d: %s %v; want sent_verified (the stored answer the second time)", i+1, got, err)
		}
	}
	req.ObjectID = "stanza-10"
	_, err = s.Resolve(ctx, req)
	wantErr(t, "the resolve id with another object", err, store.ErrRequestReused)
}

// A workstation that was granted token N by this store refuses a store whose counter is
// below N: it was rolled back.
func testRolledBack(t *testing.T, s *store.Store, c *Clock) {
	p := mustClaim(t, s, "A", key(t, "Bob", "one"))
	res, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{key(t, "Bob", "two")}, Task: "B", MinToken: p.Token()})
	if err != nil || !res.Granted {
		t.Fatalf("a claim at the remembered token: %v; want granted", err)
	}
	// Claims refused for keys already bound (with a new alias beside them, too) take no
	// token: however many there are, a store behind the workstation stays behind it.
	for _, keys := range [][]gate.Key{{key(t, "Bob", "one"), key(t, "Bob", "two")}, {key(t, "Bob", "two"), key(t, "Bob", "alias of two")}, {key(t, "Bob", "one")}} {
		if _, err := s.Claim(ctx, store.ClaimRequest{Keys: keys, Task: "D"}); !errors.Is(err, gate.ErrHeld) {
			t.Fatalf("a claim of held keys %v: %v; want held", keys, err)
		}
	}
	_, err = s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{key(t, "Bob", "three")}, Task: "C", MinToken: res.Permit.Token() + 1})
	if !errors.Is(err, store.ErrRolledBack) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a claim on a store one token behind the workstation: %v; want rolled back (fail closed)", err)
	}
	wantStatus(t, s, gate.StatusFree, key(t, "Bob", "three"))
}

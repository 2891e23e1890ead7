// The suite's claims, leases and keys: who is granted, who is refused while a lease
// lives, fencing tokens, aliases of one intent, concurrent claims, display leases, and a
// rolled-back store.

package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

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

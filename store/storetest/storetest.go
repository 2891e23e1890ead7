// Package storetest is the conformance suite every store.Backend must pass: each cell
// of the gate contract, aliases, authorizations and the event log, through store.Store
// over the backend under test.
package storetest

import (
	"context"
	"errors"
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
		{"Lists", testLists},
		{"ReassertLostCrossings", testReassert},
		{"ReassertCases", testReassertCases},
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

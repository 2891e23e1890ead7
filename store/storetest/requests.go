// The suite's request ids: the same id gets the stored answer, never a second decision;
// an id with another request is refused; old answers are forgotten.

package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

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

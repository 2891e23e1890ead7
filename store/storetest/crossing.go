// The suite's crossings and outcomes: a crossing consumes, a pass is used once, what each
// outcome leaves, resolving with provider evidence, and the event log that explains it.

package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

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
	wantErr(t, "note absence", s.NoteAbsence(ctx, a.DispatchID(), "xmpp", true, c.Now(), "MAM complete, nothing", ""), nil)
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

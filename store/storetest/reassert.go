package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

// testReassert: crossings a store acknowledged and lost are found (MissingCrossings) and
// written back (Reassert): a claim that survived gets its crossing again; a claim that
// is gone comes back as a crossed attempt that fences whoever holds the key now; either
// way the key stops at unknown for a person, and a crossing the store still holds is
// left as it is.
func testReassert(t *testing.T, s *store.Store, c *Clock) {
	// Held, its crossing lost: the claim survived.
	kept := mustClaim(t, s, "A", key(t, "Bob", "kept claim"))
	// Gone altogether; another executor holds the key now.
	gone := key(t, "Bob", "lost claim")
	other := mustClaim(t, s, "B", gone)
	// Crossed and still there.
	there := mustClaim(t, s, "C", key(t, "Bob", "still there"))
	if _, err := s.Cross(ctx, there, gate.Send, ""); err != nil {
		t.Fatal(err)
	}
	now := c.Now()
	refs := []store.CrossingRef{
		{DispatchID: kept.DispatchID(), Key: kept.Key().String(), Token: kept.Token(), Task: "A", Boundary: gate.Send, At: now},
		{DispatchID: "0123456789abcdef0123456789abcdef", Key: gone.String(), Token: 1, Task: "lost", Boundary: gate.Send, At: now},
		{DispatchID: there.DispatchID(), Key: there.Key().String(), Token: there.Token(), Task: "C", Boundary: gate.Send, At: now},
	}
	missing, err := s.MissingCrossings(ctx, refs)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 2 || missing[0].DispatchID != refs[0].DispatchID || missing[1].DispatchID != refs[1].DispatchID {
		t.Fatalf("MissingCrossings = %+v; want the kept claim's and the lost one's", missing)
	}

	r, err := s.Reassert(ctx, refs[0], "ws-1")
	if err != nil || r.Present || r.DispatchID != kept.DispatchID() || len(r.Fenced) != 0 {
		t.Fatalf("Reassert(kept) = %+v, %v; want the crossing back on its own attempt", r, err)
	}
	if _, err := s.Cross(ctx, kept, gate.Send, ""); err == nil {
		t.Fatal("the kept claim crossed send again after its crossing was written back")
	}
	r, err = s.Reassert(ctx, refs[1], "ws-1")
	if err != nil || r.Present || r.DispatchID == refs[1].DispatchID || len(r.Fenced) != 1 || r.Fenced[0] != other.Token() {
		t.Fatalf("Reassert(gone) = %+v, %v; want a new attempt that fences %d", r, err, other.Token())
	}
	if _, err := s.Cross(ctx, other, gate.Send, ""); !errors.Is(err, gate.ErrStale) {
		t.Fatalf("the fenced holder crossed send: %v; want ErrStale", err)
	}
	if r, err := s.Reassert(ctx, refs[2], "ws-1"); err != nil || !r.Present {
		t.Fatalf("Reassert(there) = %+v, %v; want Present", r, err)
	}
	if r, err := s.Reassert(ctx, refs[0], "ws-1"); err != nil || !r.Present {
		t.Fatalf("Reassert(kept) again = %+v, %v; want Present", r, err)
	}
	if r, err := s.Reassert(ctx, refs[1], "ws-1"); err != nil || !r.Present {
		t.Fatalf("Reassert(gone) again = %+v, %v; want Present (written back once)", r, err)
	}
	if missing, err := s.MissingCrossings(ctx, refs); err != nil || len(missing) != 0 {
		t.Fatalf("MissingCrossings after = %+v, %v; want none: every one is held, the lost one under %s", missing, err, store.ReassertedID(refs[1].DispatchID))
	}

	c.Advance(lease + time.Second)
	stopsForAPerson(t, s, kept.Key())
	stopsForAPerson(t, s, gone)
	rs, err := s.Show(ctx, []gate.Key{gone})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range rs[0].Events {
		found = found || (e.Kind == store.EventCrossed && e.Detail["reasserted"] == "true" && e.Detail["lost_dispatch_id"] == refs[1].DispatchID && e.Detail["workstation"] == "ws-1")
	}
	if !found {
		t.Fatalf("no reasserted crossing in the key's log: %+v", rs[0].Events)
	}
}

// testReassertCases: a lost claim's two crossings both come back (the second onto the
// attempt the first made); a surviving attempt that recorded not_sent (the store let it,
// having lost its crossing) is fenced by a crossed one, so the key does not read
// not_sent; every key of the claim stops, the one another executor claimed alone after
// the loss included; a crossing of a revision a person moved past is not written back.
func testReassertCases(t *testing.T, s *store.Store, c *Clock) {
	now := c.Now()
	stops := func(k gate.Key) { t.Helper(); stopsForAPerson(t, s, k) }

	// Both crossings of a claim that is gone.
	k := key(t, "Bob", "two crossings")
	for _, b := range []gate.Boundary{gate.ChooseFile, gate.Send} {
		ref := store.CrossingRef{DispatchID: "11111111111111111111111111111111", Key: k.String(), Task: "A", Boundary: b, At: now}
		if r, err := s.Reassert(ctx, ref, "ws-1"); err != nil || r.Present || r.DispatchID != store.ReassertedID(ref.DispatchID) {
			t.Fatalf("Reassert(%s) = %+v, %v; want it written back on %s", b, r, err, store.ReassertedID(ref.DispatchID))
		}
	}
	c.Advance(time.Millisecond)
	stops(k)

	// The claim survived, recorded not_sent after the loss.
	ns := key(t, "Bob", "not_sent after the loss")
	p := mustClaim(t, s, "A", ns)
	if _, err := s.Record(ctx, p, store.RecordRequest{Outcome: gate.NotSent}); err != nil {
		t.Fatal(err)
	}
	ref := store.CrossingRef{DispatchID: p.DispatchID(), Key: ns.String(), Token: p.Token(), Task: "A", Boundary: gate.Send, At: now}
	if r, err := s.Reassert(ctx, ref, "ws-1"); err != nil || r.DispatchID == p.DispatchID() || r.Before != gate.StatusNotSent {
		t.Fatalf("Reassert(not_sent) = %+v, %v; want a new crossed attempt, the key read not_sent before", r, err)
	}
	c.Advance(time.Millisecond)
	stops(ns)

	// Every key of the claim: its provider id and title; the title claimed alone since.
	byID, byTitle := destKey(t, "xmpp:bob@example.org", "aliases"), key(t, "Bob", "aliases")
	holder := mustClaim(t, s, "B", byTitle)
	ref = store.CrossingRef{DispatchID: "22222222222222222222222222222222", Key: byID.String(), Keys: []string{byID.String(), byTitle.String()}, Task: "A", Boundary: gate.Send, At: now}
	r, err := s.Reassert(ctx, ref, "ws-1")
	if err != nil || len(r.Fenced) != 1 || r.Fenced[0] != holder.Token() {
		t.Fatalf("Reassert(aliases) = %+v, %v; want the title's holder (%d) fenced", r, err, holder.Token())
	}
	if _, err := s.Cross(ctx, holder, gate.Send, ""); err == nil {
		t.Fatal("the title's holder crossed send after the write-back")
	}
	c.Advance(time.Millisecond)
	stops(byID)
	stops(byTitle)
}

// stopsForAPerson fails the test unless k reads send_status_unknown and a new claim of
// it is refused.
func stopsForAPerson(t *testing.T, s *store.Store, k gate.Key) {
	t.Helper()
	rs, err := s.Status(ctx, []gate.Key{k})
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Status != gate.StatusSendStatusUnknown {
		t.Fatalf("%s after the write-back: %s; want %s", k, rs[0].Status, gate.StatusSendStatusUnknown)
	}
	if res, err := claim(t, s, "Z", k); err == nil || res.Granted {
		t.Fatalf("%s was granted again after its lost crossing was written back", k)
	}
}

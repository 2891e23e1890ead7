package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

// testLists: the console's lists. Attempts list newest first, in pages, filtered by
// state, destination, workstation and day; "needs a person" lists what is unknown or
// rejected, oldest first, and not what an authorized redelivery moved past.
func testLists(t *testing.T, s *store.Store, c *Clock) {
	type made struct {
		title, content, ws string
		outcome            gate.Outcome // "" leaves it held; "lapsed" lets the lease end before any crossing
		cross              bool
	}
	cases := []made{
		{"Bob", "a", "ws-1", gate.SentVerified, true},
		{"Bob", "b", "ws-1", gate.SendStatusUnknown, true},
		{"Carol", "c", "ws-2", gate.NotSent, false},
		{"Carol", "d", "ws-2", gate.SentRejected, true},
		{"Bob", "e", "ws-2", "", true}, // crossed, its lease ends: unknown
		{"Dave", "f", "ws-1", "", false},
	}
	tokens := map[string]uint64{}
	for i, m := range cases {
		if i == 3 {
			c.Advance(24 * time.Hour) // the last three on the next day
		}
		res, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{key(t, m.title, m.content)}, Task: "T" + m.content, Lease: lease,
			Origin: store.Origin{Workstation: m.ws, FileName: m.content + ".txt", Size: 1}})
		if err != nil || res.Permit == nil {
			t.Fatalf("claim %s: %v", m.content, err)
		}
		tokens[m.content] = res.Permit.Token()
		if m.cross {
			if _, err := s.Cross(ctx, res.Permit, gate.Send, ""); err != nil {
				t.Fatal(err)
			}
		}
		if m.outcome != "" {
			if _, err := s.Record(ctx, res.Permit, store.RecordRequest{Outcome: m.outcome}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// "f" is still held; "e" too, until its lease ends.
	list := func(q store.AttemptQuery) []string {
		t.Helper()
		if q.Limit == 0 {
			q.Limit = 10
		}
		ls, _, err := s.ListAttempts(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, l := range ls {
			out = append(out, l.FileName+"="+string(l.State))
			if len(l.Keys) == 0 {
				t.Errorf("%s listed without its keys", l.FileName)
			}
		}
		return out
	}
	want := func(what string, got, want []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v; want %v", what, got, want)
		}
	}
	want("all, newest first", list(store.AttemptQuery{}), []string{"f.txt=held", "e.txt=held", "d.txt=sent_rejected", "c.txt=not_sent", "b.txt=send_status_unknown", "a.txt=sent_verified"})
	c.Advance(lease + time.Second)
	want("after the leases", list(store.AttemptQuery{Limit: 2}), []string{"f.txt=lapsed", "e.txt=send_status_unknown"})
	want("the next page", list(store.AttemptQuery{Limit: 2, Before: tokens["e"]}), []string{"d.txt=sent_rejected", "c.txt=not_sent"})
	want("unknown", list(store.AttemptQuery{State: store.StateUnknown}), []string{"e.txt=send_status_unknown", "b.txt=send_status_unknown"})
	want("lapsed", list(store.AttemptQuery{State: store.StateLapsed}), []string{"f.txt=lapsed"})
	want("verified", list(store.AttemptQuery{State: store.StateVerified}), []string{"a.txt=sent_verified"})
	carol := key(t, "Carol", "x").String()
	want("Carol's", list(store.AttemptQuery{KeyPrefix: carol[:len(carol)-64]}), []string{"d.txt=sent_rejected", "c.txt=not_sent"})
	want("ws-1's", list(store.AttemptQuery{Workstation: "ws-1"}), []string{"f.txt=lapsed", "b.txt=send_status_unknown", "a.txt=sent_verified"})
	day := NewClock().Now().Truncate(24 * time.Hour)
	want("the first day", list(store.AttemptQuery{From: day, To: day.Add(24 * time.Hour)}), []string{"c.txt=not_sent", "b.txt=send_status_unknown", "a.txt=sent_verified"})
	if _, _, err := s.ListAttempts(ctx, store.AttemptQuery{State: "lost", Limit: 1}); err == nil {
		t.Error("a state that is none was listed")
	}

	needs := func(after uint64, limit int) []string {
		t.Helper()
		ls, _, err := s.NeedsPerson(ctx, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, l := range ls {
			out = append(out, l.FileName+"="+string(l.State))
		}
		return out
	}
	want("needs a person, oldest first", needs(0, 10), []string{"b.txt=send_status_unknown", "d.txt=sent_rejected", "e.txt=send_status_unknown"})
	want("its next page", needs(tokens["b"], 1), []string{"d.txt=sent_rejected"})
	// The provider's word is listed with it.
	if err := s.NoteAbsence(ctx, dispatchOf(t, s, tokens["b"]), "xmpp", true, c.Now(), "nothing", "olga"); err != nil {
		t.Fatal(err)
	}
	ls, _, _ := s.NeedsPerson(ctx, 0, 1)
	if len(ls) != 1 || ls[0].ProviderSaid == "" {
		t.Errorf("the provider's absence is not what the list says it last said: %+v", ls)
	}
}

// dispatchOf is the dispatch id of the attempt with token.
func dispatchOf(t *testing.T, s *store.Store, token uint64) string {
	t.Helper()
	ls, _, err := s.ListAttempts(ctx, store.AttemptQuery{Before: token + 1, Limit: 1})
	if err != nil || len(ls) != 1 || ls[0].Token != token {
		t.Fatalf("attempt %d: %v %v", token, ls, err)
	}
	return ls[0].DispatchID
}

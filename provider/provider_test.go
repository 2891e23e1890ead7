package provider

import (
	"context"
	"errors"
	"github.com/sendonce/sendonce/gate"
	"strings"
	"testing"
	"time"
)

const (
	shaA = "8a3c0b6f2f0e7d1c3b9a4e5f60718293a4b5c6d7e8f90112233445566778899a"
	shaB = "1111111111111111111111111111111111111111111111111111111111111111"
	bob  = "xmpp:bob@localhost"
	carl = "xmpp:carl@localhost"
)

func obj(id, sha, to, name string) Object {
	return Object{
		ID:        id,
		Link:      "https://localhost/file_share/" + id + "/" + name,
		At:        time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		SHA256:    sha,
		Recipient: to,
		FileName:  name,
	}
}

// bobID is bob as a dispatch names him.
var bobID = mustProviderID(bob)

func mustProviderID(s string) gate.Identity {
	id, err := gate.ProviderID(s)
	if err != nil {
		panic(err)
	}
	return id
}

func TestMatch(t *testing.T) {
	d := Dispatch{
		DispatchID:  "d1",
		Destination: bobID,
		FileName:    "report.pdf",
		Size:        58,
		SHA256:      shaA,
		From:        time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC),
		Until:       time.Date(2026, 1, 2, 3, 10, 0, 0, time.UTC),
	}
	found := func(objs ...Object) Answer { return Answer{Result: Found, Objects: objs, Authoritative: true} }

	tests := []struct {
		name    string
		a       Answer
		d       Dispatch
		taken   map[string]bool
		confirm string // ID, "" for nil
		wrongB  string
		wrongR  string
	}{
		{name: "exact match", a: found(obj("s1", shaA, bob, "report.pdf")), confirm: "s1"},
		{name: "match with upper-case hex", a: found(obj("s1", "8A3C0B6F2F0E7D1C3B9A4E5F60718293A4B5C6D7E8F90112233445566778899A", bob, "report.pdf")), confirm: "s1"},
		{name: "first of two matches", a: found(obj("s1", shaA, bob, "report.pdf"), obj("s2", shaA, bob, "report.pdf")), confirm: "s1"},
		{name: "first match already taken: the second", a: found(obj("s1", shaA, bob, "report.pdf"), obj("s2", shaA, bob, "report.pdf")), taken: map[string]bool{"s1": true}, confirm: "s2"},
		{name: "only match taken: nothing", a: found(obj("s1", shaA, bob, "report.pdf")), taken: map[string]bool{"s1": true}},
		{name: "taken by others does not hide wrong bytes", a: found(obj("s1", shaA, bob, "report.pdf"), obj("s2", shaB, bob, "report.pdf")), taken: map[string]bool{"s1": true}, wrongB: "s2"},
		{name: "wrong bytes at the destination", a: found(obj("s1", shaB, bob, "report.pdf")), wrongB: "s1"},
		{name: "right bytes at another recipient", a: found(obj("s1", shaA, carl, "report.pdf")), wrongR: "s1"},
		{name: "both kinds of wrong", a: found(obj("s1", shaB, bob, "report.pdf"), obj("s2", shaA, carl, "report.pdf")), wrongB: "s1", wrongR: "s2"},
		{name: "first of each kind of wrong", a: found(obj("s1", shaB, bob, "report.pdf"), obj("s2", shaA, carl, "report.pdf"), obj("s3", shaB, bob, "report.pdf"), obj("s4", shaA, carl, "report.pdf")), wrongB: "s1", wrongR: "s2"},
		{name: "a confirmation wins over wrongs before it", a: found(obj("s1", shaB, bob, "report.pdf"), obj("s2", shaA, carl, "report.pdf"), obj("s3", shaA, bob, "report.pdf")), confirm: "s3"},
		{name: "other bytes at another recipient: unrelated", a: found(obj("s1", shaB, carl, "report.pdf"))},
		{name: "other file name ignored", a: found(obj("s1", shaA, bob, "other.pdf"))},
		{name: "file name compared exactly", a: found(obj("s1", shaA, bob, "Report.pdf"))},
		{name: "unknown bytes neither confirm nor contradict", a: found(obj("s1", "", bob, "report.pdf"), obj("s2", "", carl, "report.pdf"))},
		{name: "unknown bytes skipped, later match found", a: found(obj("s1", "", bob, "report.pdf"), obj("s2", shaA, bob, "report.pdf")), confirm: "s2"},
		{name: "recipient compared exactly", a: found(obj("s1", shaA, "xmpp:bob@localhost/phone", "report.pdf")), wrongR: "s1"},
		{name: "absent matches nothing", a: Answer{Result: Absent, Authoritative: true, Objects: []Object{obj("s1", shaA, bob, "report.pdf")}}},
		{name: "cant_tell matches nothing", a: Answer{Result: CantTell, Objects: []Object{obj("s1", shaA, bob, "report.pdf")}}},
		{name: "empty found", a: found()},
		{name: "dispatch without sha256", a: found(obj("s1", "", bob, "report.pdf")), d: Dispatch{Destination: bobID, FileName: "report.pdf"}},
		{name: "dispatch without destination", a: found(obj("s1", shaA, "", "report.pdf")), d: Dispatch{SHA256: shaA, FileName: "report.pdf"}},
		{name: "nil taken is fine", a: found(obj("s1", shaA, bob, "report.pdf")), taken: nil, confirm: "s1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dd := d
			if tt.d != (Dispatch{}) {
				dd = tt.d
			}
			c, wb, wr := Match(tt.a, dd, tt.taken)
			check := func(what string, got *Object, want string) {
				t.Helper()
				switch {
				case got == nil && want != "":
					t.Errorf("%s = nil, want %s", what, want)
				case got != nil && want == "":
					t.Errorf("%s = %s, want nil", what, got.ID)
				case got != nil && got.ID != want:
					t.Errorf("%s = %s, want %s", what, got.ID, want)
				}
			}
			check("confirm", c, tt.confirm)
			check("wrongBytes", wb, tt.wrongB)
			check("wrongRecipient", wr, tt.wrongR)
		})
	}
}

func TestMatchPointsIntoAnswer(t *testing.T) {
	a := Answer{Result: Found, Objects: []Object{obj("s1", shaA, bob, "f.txt")}}
	c, _, _ := Match(a, Dispatch{Destination: bobID, FileName: "f.txt", SHA256: shaA}, nil)
	if c != &a.Objects[0] {
		t.Fatalf("confirm does not point into the answer's objects")
	}
}

// The spellings are persisted: they never change.
func TestResultSpelling(t *testing.T) {
	for r, want := range map[Result]string{Found: "found", Absent: "absent", CantTell: "cant_tell"} {
		if string(r) != want {
			t.Errorf("%q, want %q", r, want)
		}
	}
}

type fixed struct {
	a   Answer
	err error
}

func (f fixed) Lookup(context.Context, Dispatch) (Answer, error) { return f.a, f.err }

type unbound struct{}

func (unbound) ObjectBinding(context.Context, string) (string, error) { return "", nil }

// TestAskAlwaysSaysWhy: whatever a provider answers, the verdict's Detail is never
// empty: a caller that logs or records it always has a reason to show.
func TestAskAlwaysSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    fixed
		want string
	}{
		{"can't tell with no detail", fixed{a: Answer{Result: CantTell}}, "cant_tell and gave no reason"},
		{"found, bytes unknown, a blank detail", fixed{a: Answer{Result: Found, Objects: []Object{obj("o1", "", "xmpp:bob@localhost", "f.txt")}, Detail: " "}}, "found and gave no reason"},
		{"an error", fixed{err: errors.New("the account file is unreadable")}, "the account file is unreadable"},
		{"a detail of its own is kept", fixed{a: Answer{Result: CantTell, Detail: "the server is down."}}, "the server is down."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Ask(context.Background(), tc.p, Dispatch{DispatchID: "d", FileName: "f.txt", Destination: bobID, SHA256: "ab"}, unbound{})
			if !strings.HasSuffix(v.Answer.Detail, tc.want) || strings.TrimSpace(v.Answer.Detail) == "" {
				t.Errorf("detail %q; want %q", v.Answer.Detail, tc.want)
			}
		})
	}
}

// countingProvider answers absent until its confirmAt-th lookup (0: never), which
// finds the dispatch's bytes at its destination.
type countingProvider struct {
	asks, confirmAt int
	final           bool
}

func (p *countingProvider) Lookup(_ context.Context, d Dispatch) (Answer, error) {
	p.asks++
	if p.confirmAt > 0 && p.asks >= p.confirmAt {
		return Answer{Result: Found, Objects: []Object{{ID: "o1", SHA256: d.SHA256, Recipient: d.Destination.String(), FileName: d.FileName}}}, nil
	}
	return Answer{Result: Absent, Authoritative: true, Detail: "nothing yet", Final: p.final}, nil
}

// TestAskBeside: beside the look only a confirmation ends the asking; once the look
// ended it is asked asksAfterLook more times; a Final answer ends it at once.
func TestAskBeside(t *testing.T) {
	d := Dispatch{DispatchID: "d", Destination: bobID, FileName: "f.txt", SHA256: shaA}
	running := make(chan struct{}) // the look never ends
	p := &countingProvider{confirmAt: 3}
	if v := AskBeside(context.Background(), p, d, unbound{}, running); v.Confirm == nil || v.Confirm.ID != "o1" || p.asks != 3 {
		t.Errorf("confirmed at the 3rd ask: verdict %+v after %d asks; want o1 after 3", v, p.asks)
	}
	ended := make(chan struct{})
	close(ended)
	p = &countingProvider{}
	if v := AskBeside(context.Background(), p, d, unbound{}, ended); v.Confirm != nil || p.asks != 1+asksAfterLook {
		t.Errorf("never found, the look ended: verdict %+v after %d asks; want none after %d", v, p.asks, 1+asksAfterLook)
	}
	p = &countingProvider{final: true}
	if v := AskBeside(context.Background(), p, d, unbound{}, running); !v.Answer.Final || p.asks != 1 {
		t.Errorf("a Final answer: verdict %+v after %d asks; want it after 1", v, p.asks)
	}
}

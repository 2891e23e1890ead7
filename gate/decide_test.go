package gate

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const lease = 5 * time.Minute

// claimed returns an intent whose latest attempt was granted to task with token at t0.
func claimed(task string, token uint64, crossed ...Boundary) Intent {
	return Intent{Latest: &Attempt{Task: task, Token: token, DispatchID: "d" + task, LeaseExpires: t0.Add(lease), Crossed: crossed}}
}

func recorded(in Intent, o Outcome) Intent {
	a := *in.Latest
	a.Recorded, a.Axes = true, AxesFor(o)
	in.Latest = &a
	return in
}

func wantKind(t *testing.T, what string, r *Refusal, kind error) {
	t.Helper()
	switch {
	case kind == nil && r != nil:
		t.Fatalf("%s: refused %v; want allowed", what, r)
	case kind != nil && r == nil:
		t.Fatalf("%s: allowed; want %v", what, kind)
	case kind != nil && !errors.Is(r, kind):
		t.Fatalf("%s: refused %v; want %v", what, r, kind)
	}
}

// TestContract walks every cell of the contract table (docs/gate.md): for each situation of
// an intent, a claim by task X, check/cross/renew by the holder's token and by another
// token, and record by both.
func TestContract(t *testing.T) {
	live := t0.Add(time.Minute)
	expired := t0.Add(lease + time.Second)
	type ops struct {
		claimX       error // claim by task X
		holderCheck  error // check/renew by the latest token at the next boundary
		holderCross  error // cross choose_file (or send when choose_file was crossed)
		holderRecord error // record sent_verified where a crossing exists, else not_sent
		otherToken   error // check, cross, renew and record by a token that is not the latest
	}
	tests := []struct {
		name   string
		in     Intent
		now    time.Time
		status Status
		want   ops
	}{
		{"free: nothing claimed", Intent{}, live, StatusFree, ops{nil, ErrStale, ErrStale, ErrStale, ErrStale}},
		{"free: last attempt not_sent", recorded(claimed("A", 1), NotSent), live, StatusNotSent, ops{nil, ErrStale, ErrStale, ErrStale, ErrStale}},
		{"live lease held by another task, no crossing", claimed("A", 1), live, StatusHeld, ops{ErrHeld, nil, nil, nil, ErrStale}},
		{"live lease held by X itself, no crossing", claimed("X", 1), live, StatusHeld, ops{nil, nil, nil, nil, ErrStale}},
		{"lease expired, no crossing", claimed("A", 1), expired, StatusFree, ops{nil, ErrStale, ErrStale, nil, ErrStale}},
		{"crossing, lease live", claimed("A", 1, ChooseFile), live, StatusHeld, ops{ErrConsumed, nil, nil, nil, ErrStale}},
		{"crossing, lease expired", claimed("A", 1, ChooseFile), expired, StatusSendStatusUnknown, ops{ErrConsumed, ErrStale, ErrStale, nil, ErrStale}},
		{"sent_verified", recorded(claimed("A", 1, ChooseFile, Send), SentVerified), live, StatusSentVerified, ops{ErrConsumed, ErrStale, ErrStale, ErrStale, ErrStale}},
		{"sent_rejected", recorded(claimed("A", 1, ChooseFile, Send), SentRejected), live, StatusSentRejected, ops{ErrConsumed, ErrStale, ErrStale, ErrStale, ErrStale}},
		{"send_status_unknown recorded", recorded(claimed("A", 1, ChooseFile), SendStatusUnknown), live, StatusSendStatusUnknown, ops{ErrConsumed, ErrStale, ErrStale, ErrStale, ErrStale}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StatusOf(tt.in, tt.now); got != tt.status {
				t.Fatalf("status %s; want %s", got, tt.status)
			}
			_, g, r := Claim(tt.in, "X", tt.now, tt.now.Add(lease), 9, "dX")
			wantKind(t, "claim by X", r, tt.want.claimX)
			if r == nil && (g.Attempt.Token != 9 || g.Attempt.Task != "X") {
				t.Fatalf("grant %+v", g)
			}
			if errors.Is(r, ErrHeld) && (r.Holder != "A" || !r.HolderLeaseExpires.Equal(t0.Add(lease))) {
				t.Fatalf("held refusal names %q until %v", r.Holder, r.HolderLeaseExpires)
			}

			holder := PermitRef{Task: "A", Token: 1}
			if tt.in.Latest != nil {
				holder.Task = tt.in.Latest.Task
			}
			next, cross := ChooseFile, ChooseFile
			if tt.in.Latest != nil && tt.in.Latest.HasCrossed() {
				next, cross = Send, Send
			}
			wantKind(t, "holder check", Check(tt.in, holder, next, tt.now), tt.want.holderCheck)
			_, r = Renew(tt.in, holder, tt.now, tt.now.Add(lease))
			wantKind(t, "holder renew", r, tt.want.holderCheck)
			_, r = Cross(tt.in, holder, cross, tt.now)
			wantKind(t, "holder cross", r, tt.want.holderCross)
			o := NotSent
			if tt.in.Latest != nil && tt.in.Latest.HasCrossed() {
				o = SentVerified
			}
			_, _, r = Record(tt.in, holder, o, tt.now)
			wantKind(t, "holder record", r, tt.want.holderRecord)

			other := PermitRef{Task: "Z", Token: 7}
			wantKind(t, "other check", Check(tt.in, other, next, tt.now), tt.want.otherToken)
			_, r = Cross(tt.in, other, cross, tt.now)
			wantKind(t, "other cross", r, tt.want.otherToken)
			_, r = Renew(tt.in, other, tt.now, tt.now.Add(lease))
			wantKind(t, "other renew", r, tt.want.otherToken)
			_, _, r = Record(tt.in, other, NotSent, tt.now)
			wantKind(t, "other record", r, tt.want.otherToken)
		})
	}
}

func TestResumeFencesOlderToken(t *testing.T) {
	in := claimed("X", 1)
	next, g, r := Claim(in, "X", t0.Add(time.Minute), t0.Add(2*lease), 2, "d2")
	wantKind(t, "resume", r, nil)
	if !g.Resumed || g.Fenced == nil || g.Fenced.Token != 1 {
		t.Fatalf("grant %+v: want resumed, fencing token 1", g)
	}
	wantKind(t, "old token check", Check(next, PermitRef{"X", 1}, OpenPicker, t0.Add(time.Minute)), ErrStale)
	wantKind(t, "new token check", Check(next, PermitRef{"X", 2}, OpenPicker, t0.Add(time.Minute)), nil)
}

func TestExpiredHolderRecordsNotSentOnlyWithoutLaterToken(t *testing.T) {
	in := claimed("A", 1)
	late := t0.Add(lease + time.Minute)
	_, o, r := Record(in, PermitRef{"A", 1}, NotSent, late)
	wantKind(t, "record not_sent after expiry, no later token", r, nil)
	if o != NotSent {
		t.Fatalf("recorded %s", o)
	}
	taken, _, r := Claim(in, "B", late, late.Add(lease), 2, "dB")
	wantKind(t, "takeover", r, nil)
	_, _, r = Record(taken, PermitRef{"A", 1}, NotSent, late)
	wantKind(t, "old holder after takeover", r, ErrStale)
}

func TestCrossingRules(t *testing.T) {
	now := t0.Add(time.Second)
	in := claimed("A", 1)
	p := PermitRef{"A", 1}
	wantKind(t, "check open_picker", Check(in, p, OpenPicker, now), nil)
	_, r := Cross(in, p, OpenPicker, now)
	wantKind(t, "cross open_picker", r, ErrInvalid)
	in, r = Cross(in, p, ChooseFile, now)
	wantKind(t, "cross choose_file", r, nil)
	wantKind(t, "check open_picker after choose_file", Check(in, p, OpenPicker, now), ErrConsumed)
	_, r = Cross(in, p, ChooseFile, now)
	wantKind(t, "cross choose_file twice", r, ErrConsumed)
	wantKind(t, "check send", Check(in, p, Send, now), nil)
	in, r = Cross(in, p, Send, now)
	wantKind(t, "cross send", r, nil)
	_, r = Cross(in, p, Send, now)
	wantKind(t, "cross send twice", r, ErrConsumed)
	wantKind(t, "check bogus", Check(in, p, Boundary("submit"), now), ErrInvalid)

	// not_sent after a crossing is stored as unknown and refused.
	after, o, r := Record(in, p, NotSent, now)
	wantKind(t, "not_sent after crossing", r, ErrConsumed)
	if o != SendStatusUnknown || StatusOf(after, now) != StatusSendStatusUnknown {
		t.Fatalf("recorded %s, status %s", o, StatusOf(after, now))
	}
	// sent_verified needs a crossing.
	_, _, r = Record(claimed("A", 1), p, SentVerified, now)
	wantKind(t, "verified without crossing", r, ErrInvalid)
	_, _, r = Record(claimed("A", 1), p, SentRejected, now)
	wantKind(t, "rejected without crossing", r, ErrInvalid)
	_, _, r = Record(claimed("A", 1), p, Outcome("sent"), now)
	wantKind(t, "unknown outcome", r, ErrInvalid)
	// send_status_unknown is always allowed to the holder: it only consumes.
	after, _, r = Record(claimed("A", 1), p, SendStatusUnknown, now)
	wantKind(t, "unknown without crossing", r, nil)
	if StatusOf(after, now) != StatusSendStatusUnknown {
		t.Fatal("unknown did not consume")
	}
}

func TestAuthorizeOpensOneRevision(t *testing.T) {
	now := t0.Add(time.Second)
	done := recorded(claimed("A", 1, ChooseFile, Send), SentVerified)
	_, r := Authorize(done, 2, now)
	wantKind(t, "skip a revision", r, ErrInvalid)
	r1, r := Authorize(done, 1, now)
	wantKind(t, "open r1", r, nil)
	if StatusOf(r1, now) != StatusFree {
		t.Fatalf("r1 status %s", StatusOf(r1, now))
	}
	_, r = Authorize(r1, 2, now)
	wantKind(t, "open r2 while r1 is free", r, ErrInvalid)
	got, g, r := Claim(r1, "B", now, now.Add(lease), 2, "dB")
	wantKind(t, "claim r1", r, nil)
	if g.Attempt.Revision != 1 {
		t.Fatalf("attempt revision %d", g.Attempt.Revision)
	}
	_, _, r = Claim(got, "C", now, now.Add(lease), 3, "dC")
	wantKind(t, "second claim of r1", r, ErrHeld)
	_, r = Authorize(claimed("A", 1), 1, now)
	wantKind(t, "authorize while held", r, ErrHeld)
	_, r = Authorize(Intent{}, 1, now)
	wantKind(t, "authorize a free intent", r, ErrInvalid)
}

func TestEarlierRevisionMayStillRecordItsCrossing(t *testing.T) {
	now := t0.Add(lease + time.Minute)
	unknown := claimed("A", 1, ChooseFile) // crossed, lease expired: unknown
	r1, r := Authorize(unknown, 1, now)
	wantKind(t, "authorize unknown", r, nil)
	after, o, r := Record(r1, PermitRef{"A", 1}, SentVerified, now)
	wantKind(t, "late record of r0", r, nil)
	if o != SentVerified || StatusOf(after, now) != StatusFree {
		t.Fatalf("recorded %s; status %s (r1 must stay free)", o, StatusOf(after, now))
	}
}

func TestStrictest(t *testing.T) {
	c, h, s, i := refuse(ErrConsumed, "", ""), refuse(ErrHeld, "", ""), refuse(ErrStale, "", ""), refuse(ErrInvalid, "", "")
	if Strictest(h, s, nil) != s || Strictest(h, c, s) != c || Strictest(nil, h) != h || Strictest(c, i) != i || Strictest() != nil {
		t.Fatal("precedence is invalid, consumed, stale, held")
	}
}

func TestAxes(t *testing.T) {
	for _, o := range []Outcome{NotSent, SentVerified, SentRejected, SendStatusUnknown} {
		got, err := AxesFor(o).Outcome()
		if err != nil || got != o {
			t.Errorf("AxesFor(%s).Outcome() = %s, %v", o, got, err)
		}
	}
	pending := AxesFor(SendStatusUnknown)
	if _, err := pending.Judge(AcceptanceAccepted); !errors.Is(err, ErrInvalid) {
		t.Error("acceptance before confirmed delivery must fail")
	}
	if _, err := AxesFor(NotSent).Confirm(); !errors.Is(err, ErrInvalid) {
		t.Error("a failed delivery cannot be confirmed")
	}
	conf, err := pending.Confirm()
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := conf.Outcome(); o != SendStatusUnknown {
		t.Errorf("confirmed, acceptance pending = %s; want send_status_unknown (consumed, unjudged)", o)
	}
	acc, err := conf.Judge(AcceptanceRejected)
	if o, _ := acc.Outcome(); err != nil || o != SentRejected {
		t.Errorf("confirmed+rejected = %s %v", o, err)
	}
	if _, err := (Axes{DeliveryFailed, AcceptanceAccepted}).Outcome(); !errors.Is(err, ErrInvalid) {
		t.Error("failed+accepted must be invalid")
	}
}

// TestNamedRules names each decision rule of the issue as its own case.
func TestNamedRules(t *testing.T) {
	now := t0.Add(time.Second)
	later := t0.Add(lease + time.Hour) // an overnight resume
	claimBy := func(in Intent, task string, at time.Time) *Refusal {
		_, _, r := Claim(in, task, at, at.Add(lease), 99, "d")
		return r
	}
	t.Run("no matching task: grant", func(t *testing.T) { wantKind(t, "claim", claimBy(Intent{}, "A", now), nil) })
	t.Run("prior attempt proven not_sent: one new executor", func(t *testing.T) {
		wantKind(t, "claim", claimBy(recorded(claimed("A", 1), NotSent), "B", now), nil)
	})
	for _, o := range []Outcome{SentVerified, SentRejected, SendStatusUnknown} {
		t.Run("prior "+string(o)+": refuse", func(t *testing.T) {
			wantKind(t, "claim", claimBy(recorded(claimed("A", 1, Send), o), "B", later), ErrConsumed)
		})
	}
	t.Run("resume after the task itself may have sent: refuse", func(t *testing.T) {
		wantKind(t, "claim", claimBy(claimed("A", 1, Send), "A", later), ErrConsumed)
	})
	t.Run("resume after a sibling may have sent: refuse", func(t *testing.T) {
		wantKind(t, "claim", claimBy(claimed("B", 1, ChooseFile), "A", later), ErrConsumed)
	})
	t.Run("several tasks at once: the first wins, the others are refused with the winner named", func(t *testing.T) {
		in, _, r := Claim(Intent{}, "A", now, now.Add(lease), 1, "dA")
		wantKind(t, "first", r, nil)
		r = claimBy(in, "B", now)
		wantKind(t, "second", r, ErrHeld)
		if r.Holder != "A" {
			t.Fatalf("holder %q", r.Holder)
		}
	})
}

func TestResolve(t *testing.T) {
	later := t0.Add(lease + time.Minute)
	crossedExpired := *claimed("A", 1, Send).Latest
	a, o, r := Resolve(crossedExpired, AcceptanceAccepted, later)
	wantKind(t, "crossed, expired, accepted", r, nil)
	if o != SentVerified || !a.Recorded {
		t.Fatalf("resolved %s", o)
	}
	recordedUnknown := *recorded(claimed("A", 1, ChooseFile), SendStatusUnknown).Latest
	if _, o, r := Resolve(recordedUnknown, AcceptanceRejected, t0); r != nil || o != SentRejected {
		t.Fatalf("recorded unknown, rejected: %s %v", o, r)
	}
	_, _, r = Resolve(*claimed("A", 1, Send).Latest, AcceptanceAccepted, t0.Add(time.Second))
	wantKind(t, "live lease", r, ErrHeld)
	_, _, r = Resolve(*claimed("A", 1).Latest, AcceptanceAccepted, later)
	wantKind(t, "nothing crossed", r, ErrInvalid)
	_, _, r = Resolve(*recorded(claimed("A", 1, Send), SentVerified).Latest, AcceptanceRejected, later)
	wantKind(t, "already verified", r, ErrConsumed)
	_, _, r = Resolve(crossedExpired, AcceptancePending, later)
	wantKind(t, "no judgement", r, ErrInvalid)
}

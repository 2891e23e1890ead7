package gate

import (
	"errors"
	"fmt"
	"time"
)

// Sentinels for refusals; callers branch on them with errors.Is. The CLI's exit codes
// follow them: ErrInvalid 2, ErrConsumed 3, ErrHeld 4, ErrStale 6 (5, fail-closed, is the
// store's ErrUnavailable).
var (
	// ErrConsumed: the intent was crossed or has a consuming outcome; nothing may be
	// sent for it again without a deliberate, authorized redelivery.
	ErrConsumed = errors.New("refused: consumed or crossed")
	// ErrHeld: another executor holds a live lease on the intent.
	ErrHeld = errors.New("refused: another executor holds it")
	// ErrStale: the permit is fenced, ended or its lease expired.
	ErrStale = errors.New("refused: stale or expired permit")
)

// Refusal is a rule's "no", with the reason a person can act on. It wraps one of the
// sentinels above.
type Refusal struct {
	Kind   error  // ErrConsumed, ErrHeld, ErrStale or ErrInvalid
	Reason string // a sentence for the user
	// Holder and HolderLeaseExpires name the live executor when Kind is ErrHeld.
	Holder             string
	HolderLeaseExpires time.Time
	// Status is the intent's status when the refusal was made.
	Status Status
}

func (r *Refusal) Error() string { return r.Kind.Error() + ": " + r.Reason }

// Unwrap returns the sentinel. A nil *Refusal unwraps to nil, so errors.Is on a nil
// refusal held in an error is false rather than a panic.
func (r *Refusal) Unwrap() error {
	if r == nil {
		return nil
	}
	return r.Kind
}

func refuse(kind error, st Status, format string, args ...any) *Refusal {
	return &Refusal{Kind: kind, Reason: fmt.Sprintf(format, args...), Status: st}
}

// Strictest returns the refusal that wins when several apply: invalid input first,
// then consumed, then stale, then held (fail-closed store errors precede all of these
// and never reach gate). Nil refusals are ignored.
func Strictest(rs ...*Refusal) *Refusal {
	rank := func(r *Refusal) int {
		switch {
		case r == nil:
			return 0
		case errors.Is(r, ErrInvalid):
			return 5
		case errors.Is(r, ErrConsumed):
			return 4
		case errors.Is(r, ErrStale):
			return 3
		case errors.Is(r, ErrHeld):
			return 2
		}
		return 1
	}
	var best *Refusal
	for _, r := range rs {
		if rank(r) > rank(best) {
			best = r
		}
	}
	return best
}

// Boundary is a point in a delivery where the gate is asked again.
type Boundary string

const (
	// OpenPicker is checked, not crossed: opening the attachment picker submits nothing.
	OpenPicker Boundary = "open_picker"
	// ChooseFile is crossed: once the picker accepts the file, some apps send at once.
	ChooseFile Boundary = "choose_file"
	// Send is crossed: pressing the send control.
	Send Boundary = "send"
)

// ParseBoundary reads a boundary's name.
func ParseBoundary(s string) (Boundary, error) {
	switch b := Boundary(s); b {
	case OpenPicker, ChooseFile, Send:
		return b, nil
	}
	return "", fmt.Errorf("%w: unknown boundary %q (one of open_picker, choose_file, send)", ErrInvalid, s)
}

// Crossable reports whether passing the boundary may submit something, so that it is
// recorded as a crossing before the action.
func (b Boundary) Crossable() bool { return b == ChooseFile || b == Send }

// order places the boundaries in the sequence a delivery passes them.
func (b Boundary) order() int {
	switch b {
	case OpenPicker:
		return 1
	case ChooseFile:
		return 2
	case Send:
		return 3
	}
	return 0
}

// Attempt is one executor's try at an intent, as the rules need to see it.
type Attempt struct {
	Revision     int
	Task         string
	Token        uint64
	DispatchID   string
	LeaseExpires time.Time
	Crossed      []Boundary // in the order crossed
	Recorded     bool       // an outcome was recorded; the attempt has ended
	Axes         Axes       // meaningful when Recorded
}

// HasCrossed reports whether the attempt crossed any boundary.
func (a *Attempt) HasCrossed() bool { return len(a.Crossed) > 0 }

func (a *Attempt) lastCrossedOrder() int {
	n := 0
	for _, b := range a.Crossed {
		n = max(n, b.order())
	}
	return n
}

// Live reports whether the attempt's lease is still running at now.
func (a *Attempt) Live(now time.Time) bool { return now.Before(a.LeaseExpires) }

// Intent is an intended delivery as the rules need to see it: its current revision and
// its latest attempt (of any revision). Earlier attempts never matter: an attempt is
// superseded only when it could not have crossed, and its token is fenced from then on.
type Intent struct {
	Revision int      // 0 until a deliberate redelivery opens revision 1, 2, ...
	Latest   *Attempt // nil when nothing was ever claimed
}

// current returns the latest attempt when it belongs to the current revision.
func (in Intent) current() *Attempt {
	if in.Latest == nil || in.Latest.Revision != in.Revision {
		return nil
	}
	return in.Latest
}

// Status is what an intent is, as status and show print it. The values are persisted in
// the event log and printed: append-only, spelling never changes.
type Status string

const (
	StatusFree              Status = "free"                // nothing claimed, or a lease expired before any crossing
	StatusHeld              Status = "held"                // a live lease; an executor is at work
	StatusNotSent           Status = "not_sent"            // the last attempt proved nothing was submitted: free to claim
	StatusSentVerified      Status = "sent_verified"       // consumed
	StatusSentRejected      Status = "sent_rejected"       // consumed
	StatusSendStatusUnknown Status = "send_status_unknown" // consumed: crossed with no proof, or recorded unknown
)

// StatusOf derives an intent's status at now.
func StatusOf(in Intent, now time.Time) Status {
	a := in.current()
	switch {
	case a == nil:
		return StatusFree
	case a.Recorded:
		o, err := a.Axes.Outcome()
		if err != nil {
			return StatusSendStatusUnknown // an impossible record fails closed
		}
		return Status(o)
	case a.Live(now):
		return StatusHeld
	case a.HasCrossed():
		return StatusSendStatusUnknown
	default:
		return StatusFree
	}
}

// Grant is what a successful claim hands the store to persist.
type Grant struct {
	Attempt  Attempt
	Fenced   *Attempt // the earlier attempt this grant fences, if any
	Resumed  bool     // the claimant held the live lease itself
	Previous Status   // the intent's status before the grant
}

// Claim decides whether task may start an attempt at now. token and dispatchID are the
// store's fresh values for a new attempt (token greater than every earlier one).
func Claim(in Intent, task string, now, leaseExpires time.Time, token uint64, dispatchID string) (Intent, Grant, *Refusal) {
	if task == "" {
		return in, Grant{}, refuse(ErrInvalid, StatusOf(in, now), "a task id is required")
	}
	if !leaseExpires.After(now) {
		return in, Grant{}, refuse(ErrInvalid, StatusOf(in, now), "the lease must end after now")
	}
	st := StatusOf(in, now)
	a := in.current()
	g := Grant{Previous: st}
	switch st {
	case StatusFree, StatusNotSent:
		// Nothing claimed, the last attempt proved nothing was sent, or a lease ran out
		// before any crossing: one new executor may go on.
		g.Fenced = a
	case StatusHeld:
		if a.HasCrossed() {
			return in, Grant{}, refuse(ErrConsumed, st, "attempt %s (task %s) crossed %s and has no outcome yet; a crossing is never retried", a.DispatchID, a.Task, a.Crossed[len(a.Crossed)-1])
		}
		if a.Task != task {
			r := refuse(ErrHeld, st, "task %s holds the lease until %s", a.Task, a.LeaseExpires.UTC().Format(time.RFC3339Nano))
			r.Holder, r.HolderLeaseExpires = a.Task, a.LeaseExpires
			return in, Grant{}, r
		}
		// The holder itself resumes: a new token fences its older one.
		g.Fenced, g.Resumed = a, true
	case StatusSendStatusUnknown:
		if !a.Recorded {
			return in, Grant{}, refuse(ErrConsumed, st, "attempt %s (task %s) crossed %s and its lease expired with no outcome: the result is unknown and the key is consumed", a.DispatchID, a.Task, a.Crossed[len(a.Crossed)-1])
		}
		return in, Grant{}, refuse(ErrConsumed, st, "attempt %s (task %s) recorded send_status_unknown: the key is consumed", a.DispatchID, a.Task)
	default: // sent_verified, sent_rejected
		return in, Grant{}, refuse(ErrConsumed, st, "attempt %s (task %s) recorded %s: the key is consumed", a.DispatchID, a.Task, st)
	}
	if in.Latest != nil && token <= in.Latest.Token {
		return in, Grant{}, refuse(ErrInvalid, st, "token %d does not increase past %d", token, in.Latest.Token)
	}
	g.Attempt = Attempt{Revision: in.Revision, Task: task, Token: token, DispatchID: dispatchID, LeaseExpires: leaseExpires}
	next := in
	na := g.Attempt
	next.Latest = &na
	return next, g, nil
}

// PermitRef is what a caller presents: the task and the fencing token it was granted.
type PermitRef struct {
	Task  string
	Token uint64
}

// holderOf checks that p is the latest attempt's live permit and returns it.
func holderOf(in Intent, p PermitRef, now time.Time) (*Attempt, *Refusal) {
	st := StatusOf(in, now)
	a := in.Latest
	switch {
	case a == nil:
		return nil, refuse(ErrStale, st, "token %d was never granted for this intent", p.Token)
	case a.Token != p.Token:
		return nil, refuse(ErrStale, st, "token %d is fenced: the latest token is %d (task %s)", p.Token, a.Token, a.Task)
	case a.Task != p.Task:
		return nil, refuse(ErrStale, st, "token %d belongs to task %s, not %s", p.Token, a.Task, p.Task)
	case a.Recorded:
		o, _ := a.Axes.Outcome()
		return nil, refuse(ErrStale, st, "attempt %s already recorded %s; its permit has ended", a.DispatchID, o)
	}
	return a, nil
}

// livePermit also requires the current revision and a running lease.
func livePermit(in Intent, p PermitRef, now time.Time) (*Attempt, *Refusal) {
	a, r := holderOf(in, p, now)
	if r != nil {
		return nil, r
	}
	st := StatusOf(in, now)
	if a.Revision != in.Revision {
		return nil, refuse(ErrStale, st, "attempt %s belongs to revision %d; revision %d is open", a.DispatchID, a.Revision, in.Revision)
	}
	if !a.Live(now) {
		return nil, refuse(ErrStale, st, "the lease of token %d expired at %s", p.Token, a.LeaseExpires.UTC().Format(time.RFC3339Nano))
	}
	return a, nil
}

// Check decides whether the holder of p may go on to boundary b at now. A boundary at
// or before one this attempt already crossed is refused as consumed: repeating input
// across it could submit twice.
func Check(in Intent, p PermitRef, b Boundary, now time.Time) *Refusal {
	if b.order() == 0 {
		return refuse(ErrInvalid, StatusOf(in, now), "unknown boundary %q", b)
	}
	a, r := livePermit(in, p, now)
	if r != nil {
		return r
	}
	if b.order() <= a.lastCrossedOrder() {
		return refuse(ErrConsumed, StatusOf(in, now), "attempt %s already crossed %s; %s must not be passed again", a.DispatchID, a.Crossed[len(a.Crossed)-1], b)
	}
	return nil
}

// Cross decides whether the holder of p may cross b at now and returns the intent with
// the crossing added. The store makes the crossing durable before the caller acts.
func Cross(in Intent, p PermitRef, b Boundary, now time.Time) (Intent, *Refusal) {
	if !b.Crossable() {
		return in, refuse(ErrInvalid, StatusOf(in, now), "%s is checked, not crossed (crossed boundaries: choose_file, send)", b)
	}
	if r := Check(in, p, b, now); r != nil {
		return in, r
	}
	a := *in.Latest
	a.Crossed = append(append([]Boundary(nil), a.Crossed...), b)
	in.Latest = &a
	return in, nil
}

// Renew extends the holder's live lease to leaseExpires.
func Renew(in Intent, p PermitRef, now, leaseExpires time.Time) (Intent, *Refusal) {
	a, r := livePermit(in, p, now)
	if r != nil {
		return in, r
	}
	if !leaseExpires.After(now) {
		return in, refuse(ErrInvalid, StatusOf(in, now), "the lease must end after now")
	}
	na := *a
	na.LeaseExpires = leaseExpires
	in.Latest = &na
	return in, nil
}

// Record ends the holder's attempt with outcome o and returns the intent with the
// outcome stored and the outcome actually recorded. The lease need not be live: a slow
// executor may still report what happened. not_sent needs proof that nothing was
// crossed; after a crossing it is recorded as send_status_unknown and refused as
// consumed. sent_verified and sent_rejected need a crossing.
func Record(in Intent, p PermitRef, o Outcome, now time.Time) (Intent, Outcome, *Refusal) {
	if _, err := ParseOutcome(string(o)); err != nil {
		return in, "", refuse(ErrInvalid, StatusOf(in, now), "%v", err)
	}
	a, r := holderOf(in, p, now)
	if r != nil {
		return in, "", r
	}
	if a.Revision != in.Revision && !a.HasCrossed() {
		return in, "", refuse(ErrStale, StatusOf(in, now), "attempt %s belongs to revision %d, which it never crossed; revision %d is open", a.DispatchID, a.Revision, in.Revision)
	}
	var refusal *Refusal
	switch {
	case o == NotSent && a.HasCrossed():
		refusal = refuse(ErrConsumed, StatusOf(in, now), "attempt %s crossed %s, so not_sent cannot be proven; recorded send_status_unknown", a.DispatchID, a.Crossed[len(a.Crossed)-1])
		o = SendStatusUnknown
	case (o == SentVerified || o == SentRejected) && !a.HasCrossed():
		return in, "", refuse(ErrInvalid, StatusOf(in, now), "%s needs a crossing, and attempt %s crossed nothing", o, a.DispatchID)
	}
	na := *a
	na.Recorded, na.Axes = true, AxesFor(o)
	in.Latest = &na
	return in, o, refusal
}

// Authorize opens revision next of a consumed intent: one new revision, claimable once
// under the same rules. The intent must be consumed, and next must be the revision
// right after the current one.
func Authorize(in Intent, next int, now time.Time) (Intent, *Refusal) {
	st := StatusOf(in, now)
	switch st {
	case StatusSentVerified, StatusSentRejected, StatusSendStatusUnknown:
	case StatusHeld:
		return in, refuse(ErrHeld, st, "task %s is still at work on this intent; wait for its outcome", in.Latest.Task)
	default:
		return in, refuse(ErrInvalid, st, "the intent is %s, not consumed: nothing to redeliver, claim it instead", st)
	}
	if next != in.Revision+1 {
		return in, refuse(ErrInvalid, st, "the authorization opens revision %d, but the next revision is %d", next, in.Revision+1)
	}
	in.Revision = next
	return in, nil
}

// Resolve settles an attempt whose result was unknown with the provider's evidence
// bound to its dispatch: the delivery is confirmed and its acceptance judged (accepted:
// the right bytes at the right recipient; rejected: otherwise). Only an unknown attempt
// can be resolved: one that recorded send_status_unknown, or crossed and let its lease
// expire. Never while its lease is live (the executor may still report), never one that
// crossed nothing, and a provider's "nothing found" never resolves anything.
func Resolve(a Attempt, acc Acceptance, now time.Time) (Attempt, Outcome, *Refusal) {
	o, _ := a.Axes.Outcome()
	switch {
	case a.Recorded && o != SendStatusUnknown:
		return a, "", refuse(ErrConsumed, Status(o), "attempt %s already recorded %s; only an unknown result can be resolved", a.DispatchID, o)
	case !a.Recorded && !a.HasCrossed():
		return a, "", refuse(ErrInvalid, StatusFree, "attempt %s crossed nothing: there is nothing to resolve", a.DispatchID)
	case !a.Recorded && a.Live(now):
		return a, "", refuse(ErrHeld, StatusHeld, "attempt %s (task %s) holds a live lease until %s: it may still report its outcome", a.DispatchID, a.Task, a.LeaseExpires.UTC().Format(time.RFC3339Nano))
	}
	axes, err := AxesFor(SendStatusUnknown).Confirm()
	if err == nil {
		axes, err = axes.Judge(acc)
	}
	if err != nil {
		return a, "", refuse(ErrInvalid, StatusSendStatusUnknown, "%v", err)
	}
	a.Recorded, a.Axes = true, axes
	o, _ = axes.Outcome()
	return a, o, nil
}

// Package provider asks a chat provider whether a dispatch arrived.
//
// When the screen cannot prove a delivery, the provider (for XMPP: the server's
// message archive) is the only other witness. A Provider answers one question
// for one Dispatch: which objects carrying the dispatch's file name did the
// sending account create in the attempt's window, where do they point, and what
// are their bytes. Match then decides whether one of them confirms the
// dispatch, or whether the answer shows the file went out with other bytes or to
// another recipient.
//
// This package is pure Go and uses the standard library and gate's identities only;
// implementations live in sub-packages (provider/xmpp, provider/matrix).
package provider

import (
	"context"
	"strings"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/internal/clock"
)

// Dispatch is what one attempt sent, as a lookup needs it.
type Dispatch struct {
	DispatchID  string
	Destination gate.Identity // its provider id, e.g. xmpp:bob@localhost; the zero Identity asks about any recipient
	FileName    string
	Size        int64
	SHA256      string    // lowercase hex of the bytes sent
	From, Until time.Time // the attempt's window: from its claim to now
}

// Result is a lookup's answer. Persisted: append-only, spelling never changes.
type Result string

const (
	Found    Result = "found"     // objects for this file name in the window: see Objects
	Absent   Result = "absent"    // nothing in the window: authoritative only when Answer.Authoritative
	CantTell Result = "cant_tell" // the provider could not answer
)

// Object is one provider object that may be the dispatch.
//
// SHA256 is empty when the bytes at Link could not be fetched (gone, too large,
// network error): such an object neither confirms nor contradicts a dispatch,
// and the Answer's Detail says so.
type Object struct {
	ID        string // the provider's stable id (XMPP: the archive's stanza-id)
	Link      string // where the bytes are
	At        time.Time
	SHA256    string // of the bytes at Link, downloaded and hashed
	Recipient string // canonical identity of the recipient, e.g. "xmpp:bob@localhost"
	FileName  string
}

// Answer is what a Provider said about one Dispatch.
type Answer struct {
	Result        Result
	Objects       []Object // with Found: every object in the window whose file name is Dispatch.FileName, any recipient
	Authoritative bool     // the provider's "nothing" is complete for the window (XMPP: MAM returned complete)
	Detail        string   // a sentence for the evidence; never empty in a Verdict (Ask fills one in)
	// Final: asking again cannot change this answer, since what it lacks is refused by the
	// provider's own settings (a download from an address they do not allow): a caller
	// that asks again and again may stop. Detail names the setting.
	Final bool
}

// Provider looks a dispatch up. Implementations never log and never put a password in an error or in Detail.
//
// Lookup returns an error only for a programming error (an invalid Dispatch, a
// misconfigured Provider); everything the provider or the network did wrong is
// an Answer with Result CantTell and a Detail.
type Provider interface {
	Lookup(ctx context.Context, d Dispatch) (Answer, error)
}

// Match picks the object that confirms d among a Found answer's objects: the first with d's SHA-256 at d's Destination whose ID is not in taken (objects already bound to other dispatches), and says whether the answer instead shows other bytes or another recipient.
//
// Precisely, considering only objects whose FileName is d.FileName, whose ID is
// not in taken and whose SHA256 is known (not empty), in the answer's order:
//
//   - confirm is the first object with d.SHA256 at d.Destination. When there is
//     one, wrongBytes and wrongRecipient are nil.
//   - otherwise wrongBytes is the first object at d.Destination with other bytes,
//     and wrongRecipient the first object with d.SHA256 at another recipient.
//     An object with other bytes at another recipient is neither: it is another
//     file that happens to share the name.
//
// A non-Found answer, or a d without SHA256 or Destination, matches nothing.
// SHA-256 values are compared case-insensitively; identities exactly (both
// sides are canonical). The returned pointers point into a.Objects.
func Match(a Answer, d Dispatch, taken map[string]bool) (confirm *Object, wrongBytes, wrongRecipient *Object) {
	if a.Result != Found || d.SHA256 == "" || d.Destination.IsZero() {
		return nil, nil, nil
	}
	for i := range a.Objects {
		o := &a.Objects[i]
		if o.FileName != d.FileName || o.SHA256 == "" || taken[o.ID] {
			continue
		}
		sameBytes := strings.EqualFold(o.SHA256, d.SHA256)
		sameRecipient := o.Recipient == d.Destination.String()
		switch {
		case sameBytes && sameRecipient:
			return o, nil, nil
		case sameRecipient && wrongBytes == nil:
			wrongBytes = o
		case sameBytes && wrongRecipient == nil:
			wrongRecipient = o
		}
	}
	return nil, wrongBytes, wrongRecipient
}

// Bindings says which dispatch a provider object is already bound to: "" when none.
// The store implements it.
type Bindings interface {
	ObjectBinding(ctx context.Context, objectID string) (string, error)
}

// Verdict is one lookup of one dispatch, matched.
type Verdict struct {
	Answer  Answer
	Confirm *Object // the object that confirms the dispatch, if any
	// Pick is the object the answer is about: Confirm, else the first object with other
	// bytes at the destination, else the first with these bytes at another recipient.
	Pick *Object
}

// Ask looks d up once and matches the answer, leaving out objects that are bound to
// another dispatch (one provider object is proof for one dispatch only). A lookup that
// fails is an Answer with Result CantTell: Ask returns no error.
func Ask(ctx context.Context, p Provider, d Dispatch, bound Bindings) Verdict {
	ans, err := p.Lookup(ctx, d)
	if err != nil {
		ans = Answer{Result: CantTell, Detail: err.Error()}
	}
	if strings.TrimSpace(ans.Detail) == "" {
		ans.Detail = "the provider answered " + string(ans.Result) + " and gave no reason"
	}
	taken := map[string]bool{}
	for _, o := range ans.Objects {
		if id, err := bound.ObjectBinding(ctx, o.ID); err == nil && id != "" && id != d.DispatchID {
			taken[o.ID] = true
		}
	}
	v := Verdict{Answer: ans}
	confirm, wrongBytes, wrongRecipient := Match(ans, d, taken)
	v.Confirm, v.Pick = confirm, confirm
	if v.Pick == nil {
		v.Pick = wrongBytes
	}
	if v.Pick == nil {
		v.Pick = wrongRecipient
	}
	return v
}

// While a screen still looks for the sent item, AskBeside asks again askFirst after its
// first answer, then less and less often, up to askMost apart.
const (
	askFirst = 250 * time.Millisecond
	askMost  = 2 * time.Second
	// asksAfterLook is how often it is asked once the look ended: at once, then a
	// second apart (as it was asked before it ran beside the look).
	asksAfterLook = 4
)

// AskBeside asks about d beside the screen's look for the sent item, until lookEnded is
// closed and then asksAfterLook more times, and returns the last verdict. While the look
// runs only a confirmation ends the asking (our own object may not be archived yet, and
// an older one with other bytes or another recipient must not be taken for it); after
// it, any pick ends it; an answer marked Final ends it at once (the provider's settings
// refuse what it lacks). It is never asked less than asksAfterLook times after the look.
func AskBeside(ctx context.Context, p Provider, d Dispatch, bound Bindings, lookEnded <-chan struct{}) Verdict {
	var v Verdict
	interval := askFirst
	for after := 0; after <= asksAfterLook; { // after: the asks made since the look ended, and the one due
		v = Ask(ctx, p, d, bound)
		if v.Confirm != nil || (v.Pick != nil && after > 0) || v.Answer.Final {
			break
		}
		select {
		case <-lookEnded: // the asks after the look: at once, then a second apart
			if after++; after > 1 && after <= asksAfterLook && clock.Sleep(ctx, time.Second) != nil {
				after = asksAfterLook + 1
			}
		case <-time.After(interval):
			interval = min(2*interval, askMost)
		case <-ctx.Done():
			after = asksAfterLook + 1
		}
	}
	return v
}

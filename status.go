package sendonce

import (
	"context"
	"fmt"
	"strings"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

// StatusRequest names a delivery by a key (or ref) printed by a claim, or by its
// destination and content.
type StatusRequest struct {
	Key         string
	Destination Destination
	Content     Content
}

func (r StatusRequest) keys() ([]gate.Key, error) {
	if r.Key != "" {
		if r.Destination != (Destination{}) || r.Content != (Content{}) {
			return nil, gate.Invalidf("give either --key or the destination and file, not both")
		}
		ref, err := gate.ParseRef(r.Key)
		if err != nil {
			return nil, err
		}
		return []gate.Key{ref.Key}, nil
	}
	dest, err := r.Destination.parse()
	if err != nil {
		return nil, err
	}
	return keysFor(dest, r.Content)
}

// Status is what the store says about a delivery.
func (c *Client) Status(ctx context.Context, req StatusRequest) (StatusResult, error) {
	return c.report(ctx, req, false)
}

// Show is Status with every event of the delivery's log.
func (c *Client) Show(ctx context.Context, req StatusRequest) (StatusResult, error) {
	return c.report(ctx, req, true)
}

func (c *Client) report(ctx context.Context, req StatusRequest, events bool) (StatusResult, error) {
	keys, err := req.keys()
	if err != nil {
		return StatusResult{}, err
	}
	var reports []store.IntentReport
	if events {
		reports, err = c.store.Show(ctx, keys)
	} else {
		reports, err = c.store.Status(ctx, keys)
	}
	if err != nil {
		return StatusResult{}, err
	}
	// Several intents happen only when aliases were never claimed together: the
	// strictest status speaks for them all.
	top := reports[0]
	for _, r := range reports[1:] {
		if statusRank(r.Status) > statusRank(top.Status) {
			top = r
		}
	}
	out := StatusResult{Status: top.Status, Key: keys[0].String(), IdentityStrength: top.Strength, Explanation: explain(top), Intents: make([]Intent, len(reports))}
	for i, r := range reports {
		out.Intents[i] = intentOf(r)
	}
	return out, nil
}

func statusRank(s gate.Status) int {
	return strings.Index("free not_sent held sent_verified sent_rejected send_status_unknown", string(s))
}

func intentOf(r store.IntentReport) Intent {
	in := Intent{Intent: r.ID, Status: r.Status, Revision: r.Revision, IdentityStrength: r.Strength, Keys: r.Keys,
		Attempts: make([]Attempt, len(r.Attempts)), AsOf: at(r.AsOf), Explanation: explain(r), Events: r.Events}
	for i, a := range r.Attempts {
		in.Attempts[i] = attemptOf(a)
	}
	if len(r.Notes) > 0 {
		in.Notes = r.Notes
	}
	return in
}

func attemptOf(a store.AttemptRecord) Attempt {
	out := Attempt{DispatchID: a.DispatchID, Task: a.Task, Token: a.Token, Revision: a.Revision, ClaimedAt: at(a.ClaimedAt),
		LeaseExpiresAt: at(a.LeaseExpires), Crossings: a.Crossings, Superseded: a.Superseded, Evidence: a.Evidence, ChainHead: a.ChainHead,
		Workstation: a.Workstation, FileName: a.FileName, Size: a.Size, CopiedFrom: a.CopiedFrom, SourceToken: a.SourceToken}
	if out.Crossings == nil {
		out.Crossings = []store.Crossing{}
	}
	if a.Recorded {
		o, _ := a.Axes.Outcome()
		out.Outcome, out.Delivery, out.Acceptance, out.EndedAt = o, a.Axes.Delivery, a.Axes.Acceptance, at(a.EndedAt)
	}
	return out
}

// explain says what a status means for the user, in a sentence.
func explain(r store.IntentReport) string {
	a := r.Latest()
	switch r.Status {
	case gate.StatusFree:
		if a == nil || a.Revision != r.Revision {
			if r.Revision > 0 {
				return fmt.Sprintf("revision %d was opened by an authorization and is free: one executor may claim it", r.Revision)
			}
			return "nothing was ever claimed for this key: one executor may claim it"
		}
		return fmt.Sprintf("task %s's lease expired before any crossing: one new executor may claim it", a.Task)
	case gate.StatusHeld:
		if a.HasCrossed() {
			return fmt.Sprintf("task %s crossed %s and is still at work (lease until %s); the key is already consumed", a.Task, a.Crossed[len(a.Crossed)-1], at(a.LeaseExpires))
		}
		return fmt.Sprintf("task %s holds the lease until %s and has crossed nothing yet", a.Task, at(a.LeaseExpires))
	case gate.StatusNotSent:
		return fmt.Sprintf("task %s proved nothing was sent: one new executor may claim it", a.Task)
	case gate.StatusSentVerified:
		return fmt.Sprintf("delivered and confirmed by task %s: do not send again", a.Task)
	case gate.StatusSentRejected:
		return fmt.Sprintf("task %s delivered, but to the wrong recipient or with the wrong bytes: do not send again; a person decides what next", a.Task)
	case gate.StatusSendStatusUnknown:
		crossed := "nothing, but recorded unknown"
		if len(a.Crossed) > 0 {
			crossed = string(a.Crossed[len(a.Crossed)-1])
		}
		return fmt.Sprintf("task %s may have sent (it crossed %s) and nothing proves the result: do not send again; reconcile with the provider, or a person authorizes a redelivery", a.Task, crossed)
	}
	return string(r.Status)
}

package sendonce

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

// The gate operations, for an agent that drives an app itself: claim once, check before
// each boundary, cross (durably, just before the one act that may send), renew while at
// work, record the outcome. If you cannot tell whether your own act happened, record
// send_status_unknown.

// DefaultLease is a claim's lease when none is given.
const DefaultLease = store.DefaultLease

// ClaimRequest asks for the right to deliver Content to Destination.
type ClaimRequest struct {
	Destination Destination
	Content     Content
	Task        string        // the claiming task's id (required)
	Lease       time.Duration // DefaultLease when zero
	// Request, when set, stores the answer with the decision: a retry with the same
	// request id gets the same answer (Replayed), never a second decision.
	Request RequestRef
}

// Claim grants one executor an attempt at a delivery, or refuses with the reason. A
// refusal returns the result and an error (ErrConsumed, ErrHeld).
func (c *Client) Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error) {
	if req.Task == "" {
		return ClaimResult{}, fieldError("task", errors.New("is required"))
	}
	if err := checkTask(req.Task); err != nil {
		return ClaimResult{}, err
	}
	if req.Lease < 0 {
		return ClaimResult{}, fieldError("lease", errors.New("must be positive"))
	}
	dest, err := req.Destination.parse()
	if err != nil {
		return ClaimResult{}, err
	}
	origin := store.Origin{}
	content := req.Content
	if content.Path != "" || content.File != nil {
		// One open: the bytes hashed are the ones whose size is recorded.
		// The name is the opened file's: a path's last element, or an open file's own
		// (MCP hands over the file it opened beneath an allowed folder).
		f, name, size, closeFile, err := content.open()
		if err != nil {
			return ClaimResult{}, err
		}
		defer closeFile()
		origin.Size, origin.FileName = size, name
		content = Content{File: f}
	}
	keys, err := keysFor(dest, content)
	if err != nil {
		return ClaimResult{}, err
	}
	floor, err := c.tokenFloor(ctx)
	if err != nil {
		return ClaimResult{}, err
	}
	if err := c.checkCrossings(ctx); err != nil {
		return ClaimResult{}, err
	}
	if c.ws != nil {
		origin.Workstation = c.ws.ID
	}
	res, err := c.store.Claim(ctx, store.ClaimRequest{Keys: keys, Task: req.Task, Lease: req.Lease, Request: req.Request, MinToken: floor, Origin: origin})
	var refusal *gate.Refusal
	if err != nil && !errors.As(err, &refusal) {
		return ClaimResult{}, err
	}
	if res.Granted {
		if err := c.noteToken(ctx, res.Permit.Token()); err != nil {
			return ClaimResult{}, err // the grant stays held until its lease ends, nothing crossed
		}
	}
	out := claimResult(req.Task, res)
	ev := Event{Key: out.Key}
	if out.Granted() {
		ev.DispatchID = out.DispatchID
		c.info("claim granted", ev)
	} else {
		ev.Detail = out.Reason
		c.info("claim refused", ev)
	}
	return out, err
}

func claimResult(task string, res store.ClaimResult) ClaimResult {
	out := ClaimResult{Decision: "refused", Reason: res.Reason(), Key: res.Key.String(), Keys: make([]string, len(res.Keys)),
		IdentityStrength: res.Strength, Task: task, PreviousStatus: res.Previous, Replayed: res.Replayed}
	for i, k := range res.Keys {
		out.Keys[i] = k.Key
	}
	if res.Granted {
		p := res.Permit
		out.Decision = "granted"
		out.Grant = &Grant{DispatchID: p.DispatchID(), Token: p.Token(), LeaseExpiresAt: at(p.LeaseExpires()), Revision: p.Revision(), FencedToken: res.Fenced}
	}
	if r := res.Refusal; r != nil {
		out.ClaimRefusal = &ClaimRefusal{Status: r.Status}
		if r.Holder != "" {
			out.Holder, out.HolderLeaseExpiresAt = r.Holder, at(r.HolderLeaseExpires)
		}
	}
	if a := res.Prior; a != nil && !res.Granted {
		pa := attemptOf(*a)
		out.PriorAttempt = &pa
	}
	return out
}

// resume finds the permit ref names.
func (c *Client) resume(ctx context.Context, ref PermitRef) (*store.Permit, gate.Key, error) {
	if ref.Key == "" || ref.Task == "" || ref.Token == 0 {
		return nil, gate.Key{}, gate.Invalidf("--key, --task and --token are all required")
	}
	k, err := gate.ParseKey(ref.Key)
	if err != nil {
		return nil, k, fieldError("key", err)
	}
	p, err := c.store.Resume(ctx, k, gate.PermitRef{Task: ref.Task, Token: ref.Token})
	return p, k, err
}

func decision(ref PermitRef) Decision {
	return Decision{Decision: "ok", Key: ref.Key, Task: ref.Task, Token: ref.Token}
}

// Check asks again, just before a boundary, whether the permit may pass it.
func (c *Client) Check(ctx context.Context, ref PermitRef, b gate.Boundary) (Decision, error) {
	if _, err := gate.ParseBoundary(string(b)); err != nil {
		return Decision{}, err
	}
	p, _, err := c.resume(ctx, ref)
	if err != nil {
		return Decision{}, err
	}
	if err := c.store.Check(ctx, p, b); err != nil {
		return Decision{}, err
	}
	d := decision(ref)
	d.Boundary, d.LeaseExpiresAt = b, at(p.LeaseExpires())
	return d, nil
}

// Cross records, durably, that the permit is about to cross b (choose_file or send).
// Act exactly once after it; a crossing is never given out twice.
func (c *Client) Cross(ctx context.Context, ref PermitRef, b gate.Boundary, chainHead string) (Decision, error) {
	return c.CrossRequest(ctx, ref, b, chainHead, RequestRef{})
}

// CrossRequest is Cross with a request id stored with the crossing: the same id again
// is refused as every repeated cross is (Replayed, with the first crossing's time), the
// id with another request is bad input.
func (c *Client) CrossRequest(ctx context.Context, ref PermitRef, b gate.Boundary, chainHead string, req RequestRef) (Decision, error) {
	if _, err := gate.ParseBoundary(string(b)); err != nil {
		return Decision{}, err
	}
	if !b.Crossable() {
		return Decision{}, gate.Invalidf("%s is checked, not crossed: use 'gate check' (crossed boundaries: choose_file, send)", b)
	}
	p, _, err := c.resume(ctx, ref)
	if err != nil {
		return Decision{}, err
	}
	if _, err := c.crossJournaled(ctx, p, b, func() (*store.Pass, error) { return c.store.CrossRequest(ctx, p, b, chainHead, req) }); err != nil {
		var again *store.CrossedAgain
		if !errors.As(err, &again) {
			return Decision{}, err
		}
		d := decision(ref)
		d.Decision, d.Boundary, d.Reason = "refused", b, again.Refusal.Reason
		d.Replayed, d.FirstCrossedAt = true, at(again.FirstCrossedAt)
		return d, err
	}
	d := decision(ref)
	d.Boundary, d.Crossed = b, true
	return d, nil
}

// Renew extends the permit's lease to lease from now.
func (c *Client) Renew(ctx context.Context, ref PermitRef, lease time.Duration) (Decision, error) {
	if lease <= 0 {
		return Decision{}, fieldError("lease", errors.New("must be positive"))
	}
	p, _, err := c.resume(ctx, ref)
	if err != nil {
		return Decision{}, err
	}
	exp, err := c.store.Renew(ctx, p, lease)
	if err != nil {
		return Decision{}, err
	}
	d := decision(ref)
	d.LeaseExpiresAt = at(exp)
	return d, nil
}

// RecordRequest is an attempt's outcome as its executor reports it.
type RecordRequest struct {
	Outcome   gate.Outcome
	Evidence  string // the attempt's evidence bundle folder
	ChainHead string // the bundle's chain head when the outcome was decided
	ObjectID  string // the provider object that confirmed the delivery, if one did
	Note      string // recorded with the outcome
	// Request, when set, stores the answer with the decision: a retry with the same
	// request id gets the same answer, never a second decision.
	Request RequestRef
}

// Record records the permit's outcome. The store may record a stricter one than asked
// (not_sent after a crossing is send_status_unknown): the result says what it recorded,
// with the refusal as the error. An error with an empty result recorded nothing.
func (c *Client) Record(ctx context.Context, ref PermitRef, req RecordRequest) (Decision, error) {
	if _, err := gate.ParseOutcome(string(req.Outcome)); err != nil {
		return Decision{}, err
	}
	p, _, err := c.resume(ctx, ref)
	if err != nil {
		return Decision{}, err
	}
	got, err := c.store.Record(ctx, p, store.RecordRequest{Outcome: req.Outcome, Evidence: req.Evidence, ChainHead: req.ChainHead,
		ObjectID: req.ObjectID, Note: req.Note, Request: req.Request})
	if got == "" {
		return Decision{}, err
	}
	d := decision(ref)
	d.Outcome, d.RequestedOutcome = got, req.Outcome
	if err != nil {
		d.Decision, d.Reason = "refused", err.Error()
	}
	return d, err
}

// AuthorizeRequest opens a deliberate redelivery of a consumed intent.
type AuthorizeRequest struct {
	Key    string
	Reason string // why (recorded)
	Signed []byte // the signed authorization, as 'authorizer sign' writes it
	By     string // who accepted it, when not the caller's own user (a console's operator)
}

// Authorize opens the next revision of a consumed intent with a registered person's
// signed authorization. A signature is accepted once.
func (c *Client) Authorize(ctx context.Context, req AuthorizeRequest) (AuthorizeResult, error) {
	if req.Key == "" || len(req.Signed) == 0 || strings.TrimSpace(req.Reason) == "" {
		return AuthorizeResult{}, gate.Invalidf("gate authorize: --key, --reason and --signed are all required")
	}
	k, err := gate.ParseKey(req.Key)
	if err != nil {
		return AuthorizeResult{}, fieldError("key", err)
	}
	a, err := gate.ParseAuthorization(req.Signed)
	if err != nil {
		return AuthorizeResult{}, err
	}
	if a.Key != k {
		return AuthorizeResult{}, gate.Invalidf("the authorization is for key %s, not %s", a.Key, k)
	}
	if err := c.store.AuthorizeBy(ctx, a, req.Reason, req.By); err != nil {
		return AuthorizeResult{}, err
	}
	ref := gate.Ref{Key: k, Revision: a.Revision}
	c.info("redelivery authorized", Event{Key: k.String(), Detail: a.Signer})
	return AuthorizeResult{Decision: "authorized", Key: k.String(), Revision: a.Revision, Ref: ref.String(), Authorizer: a.Signer, Reason: req.Reason}, nil
}

// ResolveRequest is provider evidence for an unknown attempt.
type ResolveRequest = store.ResolveRequest

// Resolve settles an unknown attempt with provider evidence bound to its dispatch:
// sent_verified, or sent_rejected for other bytes or another recipient. It refuses while
// the attempt's lease lives, and for an attempt that crossed nothing.
func (c *Client) Resolve(ctx context.Context, req ResolveRequest) (ResolveResult, error) {
	if req.DispatchID == "" || req.Provider == "" || req.ObjectID == "" || req.SHA256 == "" {
		return ResolveResult{}, gate.Invalidf("gate resolve: --dispatch, --provider, --object and --sha256 are required: only provider evidence resolves an unknown attempt")
	}
	if _, err := gate.ParseDigest(req.SHA256); err != nil {
		return ResolveResult{}, err
	}
	if req.Recipient != "" {
		id, err := gate.ProviderID(req.Recipient)
		if err != nil {
			return ResolveResult{}, fieldError("recipient", err)
		}
		req.Recipient = id.String()
	}
	o, err := c.store.Resolve(ctx, req)
	if err != nil {
		return ResolveResult{}, err
	}
	return ResolveResult{Decision: "resolved", DispatchID: req.DispatchID, Outcome: o, ObjectID: req.ObjectID}, nil
}

// ConfirmRequest is a person's word that an unknown attempt's file arrived, learnt by
// other means than the provider (they asked the recipient, they saw it in the app).
type ConfirmRequest struct {
	DispatchID string
	By         string // who confirms it: recorded
	Note       string // how they know: recorded
}

// ProviderPerson is the provider a person's confirmation is recorded under.
const ProviderPerson = "person"

// ConfirmDelivery records, as sent_verified, an unknown attempt a person confirmed by
// other means: bound to the attempt's dispatch (one confirmation, one dispatch), with
// who and how. The store's rules still apply: it refuses while the attempt's lease
// lives, for an attempt that crossed nothing, and for one already settled.
func (c *Client) ConfirmDelivery(ctx context.Context, req ConfirmRequest) (ResolveResult, error) {
	switch {
	case req.DispatchID == "":
		return ResolveResult{}, FieldErrorf("dispatch", "is required: the attempt to confirm")
	case strings.TrimSpace(req.By) == "":
		return ResolveResult{}, FieldErrorf("by", "is required: who confirms the delivery")
	case strings.TrimSpace(req.Note) == "":
		return ResolveResult{}, FieldErrorf("note", "is required: how the delivery was confirmed (asked the recipient, saw it in the chat, ...)")
	}
	a, revision, err := c.store.Dispatch(ctx, req.DispatchID)
	switch {
	case err != nil:
		return ResolveResult{}, err
	case a == nil || len(a.Keys) == 0:
		return ResolveResult{}, FieldErrorf("dispatch", "no attempt has dispatch id %s", req.DispatchID)
	case a.State != store.StateUnknown:
		return ResolveResult{}, gate.Invalidf("attempt %s is %s, not unknown: only an unknown attempt whose lease ended can be confirmed", req.DispatchID, a.State)
	case a.Revision != revision:
		return ResolveResult{}, gate.Invalidf("attempt %s is of revision %d, and a redelivery opened revision %d since: it is not for a person to confirm now", req.DispatchID, a.Revision, revision)
	}
	k, err := gate.ParseKey(a.Keys[0].Key)
	if err != nil {
		return ResolveResult{}, err
	}
	return c.Resolve(ctx, ResolveRequest{DispatchID: a.DispatchID, Provider: ProviderPerson, ObjectID: ProviderPerson + ":" + a.DispatchID,
		SHA256: k.Digest().String(), By: req.By, Note: req.Note, Asserted: true})
}

// ApplyStatement adds or revokes an authorizer with a statement signed by an existing
// one ('authorizer statement' makes it, on the person's own machine). action, when not
// "", is what the caller means to do: a statement that says otherwise is refused before
// anything changes.
func (c *Client) ApplyStatement(ctx context.Context, signed []byte, action string) (AuthorizerResult, error) {
	st, err := gate.ParseAuthorizerStatement(signed)
	if err != nil {
		return AuthorizerResult{}, err
	}
	if action != "" && st.Action != action {
		return AuthorizerResult{}, gate.Invalidf("the statement says %s %s, not %s: nothing was changed", st.Action, st.Name, action)
	}
	if err := c.store.ApplyStatement(ctx, st); err != nil {
		return AuthorizerResult{}, err
	}
	res := AuthorizerResult{Action: st.Action, Authorizer: st.Name, SignedBy: st.Signer}
	if st.PublicKey != nil {
		res.PublicKey = encodeKey(st.PublicKey)
	}
	c.info("authorizer "+st.Action, Event{Detail: st.Name + " by " + st.Signer})
	return res, nil
}

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

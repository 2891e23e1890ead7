package sendonce

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/internal/staging"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/registry"
	"github.com/sendonce/sendonce/store"
)

// ReconcileRequest says which unknown attempts to settle, and how to ask the provider.
type ReconcileRequest struct {
	// Key limits reconcile to this key's unknown attempts; every unknown attempt when "".
	Key string
	// Namespace is the provider to ask; when "", the provider the key's destination
	// names (with Key), else the one whose account ProviderConfig (or the environment)
	// holds, XMPP's when it could be either. Attempts whose keys name no identity of it are
	// skipped.
	Namespace string
	// ProviderConfig is the account file; the provider's environment variables (through
	// Options.Getenv) when "".
	ProviderConfig string
	// Staging is the staging folder deliver used: the snapshot of an attempt reconcile
	// resolves is removed from it. Nothing is removed when "".
	Staging string
	// By, when set, is who asked (a console's operator): recorded with what the
	// provider said.
	By string
}

// Reconcile settles unknown attempts by asking the provider, never by sending again.
// Only provider evidence bound to an attempt's dispatch resolves it; an absence is
// noted (status shows it) and never frees a key. First, an attempt whose outcome could
// not be recorded (the store was unreachable when it ended) and whose sealed bundle is
// on this workstation gets the outcome its bundle was sealed with, once the bundle is
// authenticated against the store; the store's rules still apply (not_sent after a
// crossing is recorded unknown).
func (c *Client) Reconcile(ctx context.Context, req ReconcileRequest) (ReconcileResult, error) {
	var only *gate.Key
	if req.Key != "" {
		ref, err := gate.ParseRef(req.Key)
		if err != nil {
			return ReconcileResult{}, err
		}
		only = &ref.Key
	}
	ns := req.Namespace
	if ns == "" && only != nil && registry.Known(only.Identity().Namespace()) {
		ns = only.Identity().Namespace()
	}
	if ns == "" {
		ns = registry.AccountNamespace(req.ProviderConfig, c.getenv)
	}
	p, err := registry.Open(ns, req.ProviderConfig, c.getenv)
	if err != nil {
		return ReconcileResult{}, err
	}
	attempts, keys, err := c.store.Unresolved(ctx)
	if err != nil {
		return ReconcileResult{}, err
	}
	// The staging folder is checked once; a folder that fails the rules is left alone.
	var area *staging.Area
	if req.Staging != "" {
		if a, err := openStaging(req.Staging); err == nil {
			area = &a
		}
	}
	out := ReconcileResult{Reconciled: []Reconciled{}}
	for _, a := range attempts {
		ks := keys[a.IntentID]
		if only != nil && !hasKey(ks, *only) {
			continue
		}
		if late, done := c.recordFromBundle(ctx, a, ks); late != nil {
			c.info("reconcile", Event{Key: late.Key, DispatchID: late.DispatchID, Detail: late.Result + " " + late.Outcome})
			out.Reconciled = append(out.Reconciled, *late)
			if done {
				continue
			}
		}
		r := c.reconcileOne(ctx, ns, p, a, ks, req.By)
		if r.Result == "resolved" && area != nil {
			area.Remove(a.DispatchID)
		}
		c.info("reconcile", Event{Key: r.Key, DispatchID: r.DispatchID, Detail: r.Result + " " + r.Outcome})
		out.Reconciled = append(out.Reconciled, r)
	}
	return out, nil
}

// recordFromBundle records the outcome an attempt's sealed bundle holds, when its
// executor could not record it: the attempt ended without an outcome, its bundle is
// here, sealed, and authenticated by the store (the attempt's task and token, every
// chain head the store holds, the seal signed by the key registered for the
// workstation). It returns what it did (nil when it did nothing) and whether that
// settled the attempt (an unknown outcome leaves the provider to ask).
func (c *Client) recordFromBundle(ctx context.Context, a store.AttemptRecord, ks []store.KeyRecord) (*Reconciled, bool) {
	if a.Recorded || a.Evidence == "" {
		return nil, false
	}
	if c.ws != nil && a.Workstation != "" && a.Workstation != c.ws.ID {
		return nil, false // its bundle is on workstation a.Workstation
	}
	r := &Reconciled{DispatchID: a.DispatchID, Key: ks[0].Key, Result: "recorded_from_bundle"}
	v, err := c.VerifyEvidence(ctx, VerifyRequest{Path: a.Evidence})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false
	case err != nil:
		r.Result, r.Detail = "skipped", "the evidence bundle cannot be used: "+err.Error()
		return r, false
	case !v.Sealed || v.Signed == nil || !*v.Signed:
		return nil, false // unsealed: its process died before it could judge its evidence
	}
	key, err := gate.ParseKey(ks[0].Key)
	if err != nil {
		r.Result, r.Detail = "skipped", err.Error()
		return r, false
	}
	permit, err := c.store.Resume(ctx, key, gate.PermitRef{Token: a.Token, Task: a.Task})
	if err != nil {
		r.Result, r.Detail = "skipped", err.Error()
		return r, false
	}
	got, err := c.store.Record(ctx, permit, store.RecordRequest{Outcome: gate.Outcome(v.SealOutcome), Evidence: a.Evidence, ChainHead: v.ChainHead,
		Note: "recorded by reconcile from the sealed evidence bundle: the store could not be reached when the attempt ended"})
	if got == "" {
		r.Result, r.Detail = "skipped", fmt.Sprintf("recording the bundle's outcome %s failed: %v", v.SealOutcome, err)
		return r, false
	}
	r.Outcome, r.Detail = string(got), "the bundle was sealed with "+v.SealOutcome
	if err != nil {
		r.Detail += "; the store recorded " + string(got) + ": " + err.Error()
	}
	return r, got != gate.SendStatusUnknown
}

func hasKey(ks []store.KeyRecord, k gate.Key) bool {
	for _, kr := range ks {
		if kr.Key == k.String() {
			return true
		}
	}
	return false
}

// reconcileOne asks the provider about one unknown attempt and settles it only on
// evidence bound to its dispatch.
func (c *Client) reconcileOne(ctx context.Context, ns string, p provider.Provider, a store.AttemptRecord, ks []store.KeyRecord, by string) Reconciled {
	r := Reconciled{DispatchID: a.DispatchID, Key: ks[0].Key}
	d, why := c.dispatchOf(ns, a, ks)
	if why != "" {
		r.Result, r.Detail = "skipped", why
		return r
	}
	v := provider.Ask(ctx, p, d, c.store)
	switch v.Answer.Result {
	case provider.Absent:
		r.Result, r.Detail = "absent", v.Answer.Detail
		if err := c.store.NoteAbsence(ctx, a.DispatchID, ns, v.Answer.Authoritative, c.clock(), v.Answer.Detail, by); err != nil {
			r.Detail += "; recording it failed: " + err.Error()
		}
		return r
	case provider.CantTell:
		r.Result, r.Detail = "cant_tell", v.Answer.Detail
		return r
	}
	if v.Pick == nil {
		r.Result, r.Detail = "cant_tell", "the provider holds objects with this file name in the window, but none can be bound to this dispatch: "+v.Answer.Detail
		return r
	}
	o, err := c.store.Resolve(ctx, store.ResolveRequest{DispatchID: a.DispatchID, Provider: ns, ObjectID: v.Pick.ID, SHA256: v.Pick.SHA256, Recipient: v.Pick.Recipient, Link: v.Pick.Link, By: by})
	if err != nil {
		r.Result, r.Detail = "cant_tell", err.Error()
		return r
	}
	r.Result, r.Outcome, r.Detail = "resolved", string(o), fmt.Sprintf("provider object %s (%s)", v.Pick.ID, v.Pick.Link)
	return r
}

// dispatchOf is what the provider is asked about an attempt: its destination (the
// intent's key in the provider's namespace) and the file as its evidence bundle names
// it; or why it cannot be asked.
func (c *Client) dispatchOf(ns string, a store.AttemptRecord, ks []store.KeyRecord) (provider.Dispatch, string) {
	var dest gate.Identity
	var other string
	var digest gate.Digest
	for _, kr := range ks {
		k, err := gate.ParseKey(kr.Key)
		if err != nil {
			continue
		}
		switch got := k.Identity().Namespace(); {
		case got == ns && (dest.IsZero() || k.Version() == gate.KeyVersion):
			dest, digest = k.Identity(), k.Digest() // the current scheme's spelling, when the intent has one
			if up, err := k.Upgrade(); err == nil {
				dest = up.Identity() // an older scheme's key is asked about in the current spelling
			}
		case got != ns && registry.Known(got):
			other = got
		}
	}
	switch {
	case dest.IsZero() && other != "":
		return provider.Dispatch{}, fmt.Sprintf("the key's destination is %s's and this run asks %s: reconcile it with --key, or with --provider %s and that provider's account", other, ns, other)
	case dest.IsZero():
		return provider.Dispatch{}, "the key has no provider id (deliver with --dest-id xmpp:... or matrix:...), so the provider cannot be asked"
	}
	name, size := a.FileName, a.Size
	if name == "" { // an attempt stored before attempts named their file: its bundle does
		bundle := a.Evidence
		if bundle == "" { // the process died before recording: its bundle is where deliver puts them
			bundle = filepath.Join(c.evidenceRoot, a.DispatchID)
		}
		b, err := evidence.Verify(bundle, evidence.VerifyOptions{})
		if err != nil {
			return provider.Dispatch{}, fmt.Sprintf("the evidence bundle %s cannot be read: %v", filepath.Base(bundle), err)
		}
		name, size = b.Manifest.FileName, b.Manifest.Size
	}
	from, until := lookupWindow(a)
	return provider.Dispatch{DispatchID: a.DispatchID, Destination: dest, FileName: name, Size: size,
		SHA256: digest.String(), From: from, Until: until}, ""
}

// lookupMargin widens a lookup window on both sides: the provider's clock and ours
// need not agree to the second.
const lookupMargin = time.Minute

// lookupWindow is the one window a provider is asked about for an attempt, for deliver
// and reconcile alike: from the claim to the lease's expiry or the attempt's end,
// whichever is later, with a margin; all of it from the store's times.
func lookupWindow(a store.AttemptRecord) (from, until time.Time) {
	until = a.LeaseExpires
	if a.EndedAt.After(until) {
		until = a.EndedAt
	}
	return a.ClaimedAt.Add(-lookupMargin), until.Add(lookupMargin)
}

// DeliveriesRequest selects a page of attempts across the store (the fleet's, when it
// is shared), newest first.
type DeliveriesRequest struct {
	// Destination keeps one destination's attempts: give its title or its provider id
	// (one of them), as a claim names it.
	Destination Destination
	// State is an outcome, held (a lease lives) or lapsed (a lease ended before any
	// crossing); "" for any.
	State string
	// Workstation is a workstation's id; "" for any.
	Workstation string
	// Day is a UTC day, 2006-01-02: the attempts claimed on it; "" for any.
	Day string
	// Before is the Next of the page before; 0 for the first page.
	Before uint64
	// Limit is the page's size: 1 to 500 (50 when 0).
	Limit int
}

// DeliveriesResult is one page of attempts.
type DeliveriesResult struct {
	Deliveries []Listed `json:"deliveries"`
	// Next, when not 0, is the Before of the next page.
	Next uint64 `json:"next,omitempty"`
	AsOf Time   `json:"as_of"`
}

// Listed is one attempt as a list shows it: the destination it went to (its strength
// shown: a title is weak), the bytes' digest, where it stands, and the attempt.
type Listed struct {
	Key              string        `json:"key"`
	Namespace        string        `json:"namespace"`   // "title", "xmpp", "matrix", ...
	Destination      string        `json:"destination"` // the identity's value: a title, an address
	IdentityStrength gate.Strength `json:"identity_strength"`
	SHA256           string        `json:"sha256"`
	// State is the attempt's outcome, or held, or lapsed (store.AttemptState).
	State store.AttemptState `json:"state"`
	// ProviderSaid is what the provider last said of this attempt (NeedsPerson only).
	ProviderSaid string  `json:"provider_said,omitempty"`
	Attempt      Attempt `json:"attempt"`
}

// NeedsPersonRequest pages the list of what needs a person.
type NeedsPersonRequest struct {
	After uint64 // the Next of the page before; 0 for the first
	Limit int    // 1 to 500 (100 when 0)
}

// NeedsPersonResult is the attempts only a person can settle, oldest first.
type NeedsPersonResult struct {
	Attempts []Listed `json:"attempts"`
	Next     uint64   `json:"next,omitempty"`
	AsOf     Time     `json:"as_of"`
}

// Deliveries lists attempts across the store, newest first, filtered by destination,
// state, workstation and day.
func (c *Client) Deliveries(ctx context.Context, req DeliveriesRequest) (DeliveriesResult, error) {
	q := store.AttemptQuery{State: store.AttemptState(req.State), Workstation: req.Workstation, Before: req.Before, Limit: req.Limit}
	if q.Limit == 0 {
		q.Limit = 50
	}
	if q.State != "" && !slices.Contains(store.AttemptStates, q.State) {
		return DeliveriesResult{}, FieldErrorf("state", "%q is not a state: one of %s", req.State, joinStates())
	}
	if req.Day != "" {
		day, err := time.Parse(time.DateOnly, req.Day)
		if err != nil {
			return DeliveriesResult{}, FieldErrorf("day", "%q is not a day: write it 2006-01-02 (UTC)", req.Day)
		}
		q.From, q.To = day, day.AddDate(0, 0, 1)
	}
	if req.Destination != (Destination{}) {
		if req.Destination.Title != "" && req.Destination.ProviderID != "" {
			return DeliveriesResult{}, FieldErrorf("to", "give the destination's title or its provider id, not both")
		}
		dest, err := req.Destination.parse()
		if err != nil {
			return DeliveriesResult{}, err
		}
		// Every key of a destination starts with the same text before its digest.
		k := dest.Keys(gate.Digest{})[0].String()
		q.KeyPrefix = k[:len(k)-len(gate.Digest{}.String())]
	}
	ls, now, err := c.store.ListAttempts(ctx, q)
	if err != nil {
		return DeliveriesResult{}, err
	}
	out := DeliveriesResult{Deliveries: listed(ls), AsOf: at(now)}
	if len(ls) == q.Limit {
		out.Next = ls[len(ls)-1].Token
	}
	return out, nil
}

// NeedsPerson lists what only a person can settle now, oldest first: attempts whose
// result is unknown (recorded so, or a lease that ended after a crossing) or that were
// rejected, with what the provider last said of each.
func (c *Client) NeedsPerson(ctx context.Context, req NeedsPersonRequest) (NeedsPersonResult, error) {
	if req.Limit == 0 {
		req.Limit = 100
	}
	ls, now, err := c.store.NeedsPerson(ctx, req.After, req.Limit)
	if err != nil {
		return NeedsPersonResult{}, err
	}
	out := NeedsPersonResult{Attempts: listed(ls), AsOf: at(now)}
	if len(ls) == req.Limit {
		out.Next = ls[len(ls)-1].Token
	}
	return out, nil
}

func joinStates() string {
	s := make([]string, len(store.AttemptStates))
	for i, st := range store.AttemptStates {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}

// listed shows each attempt under its intent's best key: of the current scheme before
// an older one, and a provider id before a title.
func listed(ls []store.Listing) []Listed {
	out := make([]Listed, len(ls))
	for i, l := range ls {
		row := Listed{State: l.State, ProviderSaid: l.ProviderSaid, Attempt: attemptOf(l.AttemptRecord)}
		pick, best := -1, -1
		for j, k := range l.Keys {
			score := 0
			if k.Version == gate.KeyVersion {
				score += 2
			}
			if k.Strength == gate.Strong {
				score++
			}
			if score > best {
				pick, best = j, score
			}
		}
		if pick >= 0 {
			row.Key, row.IdentityStrength = l.Keys[pick].Key, l.Keys[pick].Strength
			if k, err := gate.ParseKey(row.Key); err == nil {
				row.Namespace, row.Destination, row.SHA256 = k.Identity().Namespace(), k.Identity().Value(), k.Digest().String()
			}
		}
		out[i] = row
	}
	return out
}

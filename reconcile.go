package sendonce

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/registry"
	"github.com/sendonce/sendonce/store"
)

// ReconcileRequest says which unknown attempts to settle, and how to ask the provider.
type ReconcileRequest struct {
	// Key limits reconcile to this key's unknown attempts; every unknown attempt when "".
	Key string
	// Namespace is the provider to ask ("xmpp" when ""): attempts whose keys name no
	// identity of it are skipped.
	Namespace string
	// ProviderConfig is the account file; the provider's environment variables (through
	// Options.Getenv) when "".
	ProviderConfig string
	// Staging is the staging folder deliver used: the snapshot of an attempt reconcile
	// resolves is removed from it. Nothing is removed when "".
	Staging string
}

// Reconcile settles unknown attempts by asking the provider, never by sending again.
// Only provider evidence bound to an attempt's dispatch resolves it; an absence is
// noted (status shows it) and never frees a key.
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
	if ns == "" {
		ns = "xmpp"
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
	var staging *stagingArea
	if req.Staging != "" {
		if area, err := openStaging(req.Staging); err == nil {
			staging = &area
		}
	}
	out := ReconcileResult{Reconciled: []Reconciled{}}
	for _, a := range attempts {
		ks := keys[a.IntentID]
		if only != nil && !hasKey(ks, *only) {
			continue
		}
		r := c.reconcileOne(ctx, ns, p, a, ks)
		if r.Result == "resolved" && staging != nil {
			staging.remove(a.DispatchID)
		}
		c.info("reconcile", Event{Key: r.Key, DispatchID: r.DispatchID, Detail: r.Result + " " + r.Outcome})
		out.Reconciled = append(out.Reconciled, r)
	}
	return out, nil
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
func (c *Client) reconcileOne(ctx context.Context, ns string, p provider.Provider, a store.AttemptRecord, ks []store.KeyRecord) Reconciled {
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
		if err := c.store.NoteAbsence(ctx, a.DispatchID, ns, v.Answer.Authoritative, c.clock(), v.Answer.Detail); err != nil {
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
	o, err := c.store.Resolve(ctx, store.ResolveRequest{DispatchID: a.DispatchID, Provider: ns, ObjectID: v.Pick.ID, SHA256: v.Pick.SHA256, Recipient: v.Pick.Recipient, Link: v.Pick.Link})
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
	var dest string
	var digest gate.Digest
	for _, kr := range ks {
		k, err := gate.ParseKey(kr.Key)
		if err == nil && k.Identity().Namespace() == ns && (dest == "" || k.Version() == gate.KeyVersion) {
			dest, digest = k.Identity().String(), k.Digest() // the current scheme's spelling, when the intent has one
		}
	}
	if dest == "" {
		return provider.Dispatch{}, "the key has no provider id (deliver with --dest-id xmpp:...), so the provider cannot be asked"
	}
	bundle := a.Evidence
	if bundle == "" { // the process died before recording: its bundle is where deliver puts them
		bundle = filepath.Join(c.evidenceRoot, a.DispatchID)
	}
	b, err := evidence.Verify(bundle, evidence.VerifyOptions{})
	if err != nil {
		return provider.Dispatch{}, fmt.Sprintf("the evidence bundle %s cannot be read: %v", filepath.Base(bundle), err)
	}
	from, until := lookupWindow(a)
	return provider.Dispatch{DispatchID: a.DispatchID, Destination: dest, FileName: b.Manifest.FileName, Size: b.Manifest.Size,
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

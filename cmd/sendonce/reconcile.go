package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/xmpp"
	"github.com/sendonce/sendonce/store"
)

// reconciled is what reconcile did for one unknown attempt.
type reconciled struct {
	DispatchID string `json:"dispatch_id"`
	Key        string `json:"key"`
	Result     string `json:"result"` // resolved, absent, cant_tell, skipped
	Outcome    string `json:"outcome,omitempty"`
	Detail     string `json:"detail"`
}

// providerConfig loads the provider account from --provider-config or the environment.
func (env *environment) providerConfig(path string) (xmpp.Config, error) {
	cfg, err := xmpp.LoadConfig(path, env.getenv)
	if err != nil {
		return cfg, usagef("provider account: %v (give --provider-config FILE with {\"jid\", \"password\", \"addr\"}, or set SENDONCE_XMPP_JID and SENDONCE_XMPP_PASSWORD)", err)
	}
	return cfg, nil
}

func cmdReconcile(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("reconcile", "[--key KEY] [--provider-config FILE]")
	keyFlag := fs.String("key", "", "reconcile only this `KEY`'s unknown attempts (default: every unknown attempt)")
	cfgPath := fs.String("provider-config", "", "the provider account `FILE` (JSON: jid, password, addr); or SENDONCE_XMPP_JID/PASSWORD/ADDR")
	evidenceDir := fs.String("evidence-dir", "", "where deliver kept evidence bundles, for attempts that died before recording theirs (default: next to the store)")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	var only *gate.Key
	if *keyFlag != "" {
		ref, err := gate.ParseRef(*keyFlag)
		if err != nil {
			return err
		}
		only = &ref.Key
	}
	cfg, err := env.providerConfig(*cfgPath)
	if err != nil {
		return err
	}
	s, err := env.openStore(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	attempts, keys, err := s.Unresolved(ctx)
	if err != nil {
		return err
	}
	if *evidenceDir == "" {
		path, err := env.storeFile()
		if err != nil {
			return err
		}
		*evidenceDir = filepath.Join(filepath.Dir(path), "evidence")
	}
	p := xmpp.New(cfg)
	var out []reconciled
	for _, a := range attempts {
		ks := keys[a.IntentID]
		if only != nil && !hasKey(ks, *only) {
			continue
		}
		if a.Evidence == "" { // the process died before recording: its bundle is where deliver puts them
			a.Evidence = filepath.Join(*evidenceDir, a.DispatchID)
		}
		r := env.reconcileOne(ctx, s, p, a, ks)
		env.log.Info().Str("dispatch", a.DispatchID).Str("result", r.Result).Str("outcome", r.Outcome).Msg("reconcile")
		out = append(out, r)
	}
	env.print(map[string]any{"reconciled": nonNil(out)}, func(w io.Writer) {
		if len(out) == 0 {
			fmt.Fprintln(w, "no unknown attempts to reconcile")
		}
		for _, r := range out {
			fmt.Fprintf(w, "%s %s: %s %s\n  %s\n", r.DispatchID, r.Key, r.Result, r.Outcome, r.Detail)
		}
	})
	return nil
}

func nonNil(rs []reconciled) []reconciled {
	if rs == nil {
		return []reconciled{}
	}
	return rs
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
func (env *environment) reconcileOne(ctx context.Context, s *store.Store, p provider.Provider, a store.AttemptRecord, ks []store.KeyRecord) reconciled {
	r := reconciled{DispatchID: a.DispatchID, Key: ks[0].Key}
	d, why := dispatchOf(a, ks)
	if why != "" {
		r.Result, r.Detail = "skipped", why
		return r
	}
	ans, err := p.Lookup(ctx, d)
	if err != nil {
		r.Result, r.Detail = "cant_tell", err.Error()
		return r
	}
	switch ans.Result {
	case provider.Absent:
		r.Result, r.Detail = "absent", ans.Detail
		if err := s.NoteAbsence(ctx, a.DispatchID, "xmpp", ans.Authoritative, time.Now(), ans.Detail); err != nil {
			r.Detail += "; recording it failed: " + err.Error()
		}
		return r
	case provider.CantTell:
		r.Result, r.Detail = "cant_tell", ans.Detail
		return r
	}
	taken := map[string]bool{}
	for _, o := range ans.Objects {
		if bound, err := s.ObjectBinding(ctx, o.ID); err == nil && bound != "" && bound != a.DispatchID {
			taken[o.ID] = true
		}
	}
	confirm, wrongBytes, wrongRecipient := provider.Match(ans, d, taken)
	pick := confirm
	switch {
	case pick != nil:
	case wrongBytes != nil:
		pick = wrongBytes
	case wrongRecipient != nil:
		pick = wrongRecipient
	default:
		r.Result, r.Detail = "cant_tell", "the provider holds objects with this file name in the window, but none can be bound to this dispatch: "+ans.Detail
		return r
	}
	o, err := s.Resolve(ctx, store.ResolveRequest{DispatchID: a.DispatchID, Provider: "xmpp", ObjectID: pick.ID, SHA256: pick.SHA256, Recipient: pick.Recipient, Link: pick.Link})
	if err != nil {
		r.Result, r.Detail = "cant_tell", err.Error()
		return r
	}
	r.Result, r.Outcome, r.Detail = "resolved", string(o), fmt.Sprintf("provider object %s (%s)", pick.ID, pick.Link)
	return r
}

// dispatchOf is what the provider is asked about an attempt: its destination (the
// intent's xmpp key) and the file as its evidence bundle names it.
func dispatchOf(a store.AttemptRecord, ks []store.KeyRecord) (provider.Dispatch, string) {
	var dest string
	var digest gate.Digest
	for _, kr := range ks {
		k, err := gate.ParseKey(kr.Key)
		if err == nil && k.Identity().Namespace() == "xmpp" {
			dest, digest = k.Identity().String(), k.Digest()
		}
	}
	if dest == "" {
		return provider.Dispatch{}, "the key has no provider id (deliver with --dest-id xmpp:...), so the provider cannot be asked"
	}
	if a.Evidence == "" {
		return provider.Dispatch{}, "the attempt recorded no evidence bundle, so the file's name is not known"
	}
	b, err := evidence.Verify(a.Evidence, evidence.VerifyOptions{})
	if err != nil {
		return provider.Dispatch{}, fmt.Sprintf("the evidence bundle %s cannot be read: %v", filepath.Base(a.Evidence), err)
	}
	until := a.LeaseExpires
	if !a.EndedAt.IsZero() && a.EndedAt.After(until) {
		until = a.EndedAt
	}
	return provider.Dispatch{DispatchID: a.DispatchID, Destination: dest, FileName: b.Manifest.FileName, Size: b.Manifest.Size,
		SHA256: digest.String(), From: a.ClaimedAt, Until: until.Add(time.Minute)}, ""
}

package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

// destination is how a command names an intent: --to and/or --dest-id, plus the bytes.
type destination struct {
	to, destID, file, sha string
}

func (d *destination) register(fs interface {
	StringVar(*string, string, string, string)
}) {
	fs.StringVar(&d.to, "to", "", "the destination's exact visible `TITLE` (a weak identity)")
	fs.StringVar(&d.destID, "dest-id", "", "the destination's provider id, `NS:ID` (a strong identity), e.g. xmpp:bob@example.org")
	fs.StringVar(&d.file, "file", "", "the file to deliver; its SHA-256 is hashed from the bytes")
	fs.StringVar(&d.sha, "sha256", "", "the SHA-256 of the bytes, when the file is not at hand")
}

// keys resolves the destination into its keys, strong first.
func (d *destination) keys() ([]gate.Key, error) {
	if d.to == "" && d.destID == "" {
		return nil, usagef("name the destination with --to TITLE and/or --dest-id NS:ID")
	}
	if (d.file == "") == (d.sha == "") {
		return nil, usagef("give exactly one of --file PATH and --sha256 HEX")
	}
	var digest gate.Digest
	var err error
	if d.file != "" {
		digest, _, err = hashFile(d.file)
	} else {
		digest, err = gate.ParseDigest(d.sha)
	}
	if err != nil {
		return nil, err
	}
	var keys []gate.Key
	if d.destID != "" {
		id, err := gate.ProviderID(d.destID)
		if err != nil {
			return nil, fmt.Errorf("--dest-id: %w", err)
		}
		keys = append(keys, gate.KeysFor(id, digest)...)
	}
	if d.to != "" {
		id, err := gate.Title(d.to)
		if err != nil {
			return nil, fmt.Errorf("--to: %w", err)
		}
		keys = append(keys, gate.KeysFor(id, digest)...)
	}
	return keys, nil
}

// hashFile hashes a regular file's bytes.
func hashFile(path string) (gate.Digest, int64, error) {
	var d gate.Digest
	f, err := os.Open(path)
	if err != nil {
		return d, 0, usagef("cannot read %s: %v", path, errors.Unwrap(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return d, 0, usagef("cannot read %s: %v", path, err)
	}
	if !fi.Mode().IsRegular() {
		return d, 0, usagef("%s is not a regular file", path)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return d, 0, usagef("cannot read %s: %v", path, err)
	}
	copy(d[:], h.Sum(nil))
	return d, n, nil
}

func cmdClaim(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("gate claim", "[--to TITLE] [--dest-id NS:ID] (--file PATH | --sha256 HEX) --task ID [--lease DUR]")
	var dest destination
	dest.register(fs)
	task := fs.String("task", "", "the claiming task's `ID` (required)")
	lease := fs.Duration("lease", store.DefaultLease, "how long the grant holds before another task may take over")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	if *task == "" {
		return usagef("gate claim: --task ID is required")
	}
	if *lease <= 0 {
		return usagef("gate claim: --lease must be positive")
	}
	keys, err := dest.keys()
	if err != nil {
		return err
	}
	s, err := env.openStore(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	res, err := s.Claim(ctx, store.ClaimRequest{Keys: keys, Task: *task, Lease: *lease})
	var refusal *gate.Refusal
	if err != nil && !errors.As(err, &refusal) {
		return err
	}
	env.printClaim(*task, res)
	if res.Granted {
		env.log.Info().Str("key", res.Key.String()).Str("task", *task).Uint64("token", res.Permit.Token()).Msg("claim granted")
	} else {
		env.log.Info().Str("key", res.Key.String()).Str("task", *task).Str("reason", res.Reason()).Msg("claim refused")
	}
	return err
}

func (env *environment) printClaim(task string, res store.ClaimResult) {
	keys := make([]string, len(res.Keys))
	for i, k := range res.Keys {
		keys[i] = k.Key
	}
	out := map[string]any{
		"decision": "refused", "reason": res.Reason(), "key": res.Key.String(), "keys": keys,
		"identity_strength": res.Strength, "task": task, "previous_status": res.Previous,
	}
	if res.Granted {
		p := res.Permit
		out["decision"], out["dispatch_id"], out["token"], out["lease_expires_at"], out["revision"] = "granted", p.DispatchID(), p.Token(), formatTime(p.LeaseExpires()), p.Revision()
		if res.Fenced != 0 {
			out["fenced_token"] = res.Fenced
		}
	}
	if r := res.Refusal; r != nil {
		out["status"] = r.Status
		if r.Holder != "" {
			out["holder"], out["holder_lease_expires_at"] = r.Holder, formatTime(r.HolderLeaseExpires)
		}
	}
	if a := res.Prior; a != nil && !res.Granted {
		out["prior_attempt"] = attemptJSON(*a)
	}
	env.print(out, func(w io.Writer) {
		fmt.Fprintf(w, "%s: %s\nkey: %s\n", out["decision"], res.Reason(), res.Key)
		if res.Strength == gate.Weak {
			fmt.Fprintln(w, "identity: WEAK (a visible title; two conversations can show the same title)")
		} else {
			fmt.Fprintln(w, "identity: strong (a provider id)")
		}
		if res.Granted {
			fmt.Fprintf(w, "task: %s\ntoken: %d\ndispatch id: %s\nlease expires: %s\n", task, res.Permit.Token(), res.Permit.DispatchID(), formatTime(res.Permit.LeaseExpires()))
		}
		if a := res.Prior; a != nil && !res.Granted {
			fmt.Fprintf(w, "earlier attempt: %s by task %s", a.DispatchID, a.Task)
			if a.Evidence != "" {
				fmt.Fprintf(w, ", evidence %s", a.Evidence)
			}
			fmt.Fprintln(w)
		}
	})
}

// permitFlags are the flags that name an existing permit.
type permitFlags struct {
	key, task string
	token     uint64
}

func (p *permitFlags) register(fs interface {
	StringVar(*string, string, string, string)
	Uint64Var(*uint64, string, uint64, string)
}) {
	fs.StringVar(&p.key, "key", "", "the `KEY` the claim printed")
	fs.StringVar(&p.task, "task", "", "the task `ID` the claim was granted to")
	fs.Uint64Var(&p.token, "token", 0, "the fencing `TOKEN` the claim printed")
}

// resume opens the store and finds the permit the flags name.
func (p *permitFlags) resume(ctx context.Context, env *environment) (*store.Store, *store.Permit, error) {
	if p.key == "" || p.task == "" || p.token == 0 {
		return nil, nil, usagef("--key, --task and --token are all required")
	}
	k, err := gate.ParseKey(p.key)
	if err != nil {
		return nil, nil, fmt.Errorf("--key: %w", err)
	}
	s, err := env.openStore(ctx)
	if err != nil {
		return nil, nil, err
	}
	permit, err := s.Resume(ctx, k, gate.PermitRef{Task: p.task, Token: p.token})
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return s, permit, nil
}

func boundaryFlag(s string, crossing bool) (gate.Boundary, error) {
	if s == "" {
		return "", usagef("--boundary is required (open_picker, choose_file or send)")
	}
	b, err := gate.ParseBoundary(s)
	if err != nil {
		return "", err
	}
	if crossing && !b.Crossable() {
		return "", usagef("%s is checked, not crossed: use 'gate check' (crossed boundaries: choose_file, send)", b)
	}
	return b, nil
}

func (env *environment) printDecision(what string, p permitFlags, extra map[string]any, text string) {
	out := map[string]any{"decision": "ok", "key": p.key, "task": p.task, "token": p.token}
	for k, v := range extra {
		out[k] = v
	}
	env.print(out, func(w io.Writer) { fmt.Fprintf(w, "ok: %s\n", text) })
	env.log.Info().Str("key", p.key).Str("task", p.task).Uint64("token", p.token).Msg(what)
}

func cmdCheck(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("gate check", "--key KEY --task ID --token N --boundary open_picker|choose_file|send")
	var pf permitFlags
	pf.register(fs)
	boundary := fs.String("boundary", "", "the `BOUNDARY` about to be passed")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	b, err := boundaryFlag(*boundary, false)
	if err != nil {
		return err
	}
	s, permit, err := pf.resume(ctx, env)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.Check(ctx, permit, b); err != nil {
		return err
	}
	env.printDecision("check passed", pf, map[string]any{"boundary": b, "lease_expires_at": formatTime(permit.LeaseExpires())}, fmt.Sprintf("%s may be passed", b))
	return nil
}

func cmdCross(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("gate cross", "--key KEY --task ID --token N --boundary choose_file|send [--chain-head HEX]")
	var pf permitFlags
	pf.register(fs)
	boundary := fs.String("boundary", "", "the `BOUNDARY` about to be crossed: choose_file or send")
	chainHead := fs.String("chain-head", "", "the evidence bundle's chain head at this moment")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	b, err := boundaryFlag(*boundary, true)
	if err != nil {
		return err
	}
	s, permit, err := pf.resume(ctx, env)
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.Cross(ctx, permit, b, *chainHead); err != nil {
		return err
	}
	env.killpoint("cross")
	env.printDecision("crossed", pf, map[string]any{"boundary": b, "crossed": true}, fmt.Sprintf("crossing of %s is durable; act once", b))
	return nil
}

func cmdRenew(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("gate renew", "--key KEY --task ID --token N [--lease DUR]")
	var pf permitFlags
	pf.register(fs)
	lease := fs.Duration("lease", store.DefaultLease, "the new lease, from now")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	if *lease <= 0 {
		return usagef("gate renew: --lease must be positive")
	}
	s, permit, err := pf.resume(ctx, env)
	if err != nil {
		return err
	}
	defer s.Close()
	exp, err := s.Renew(ctx, permit, *lease)
	if err != nil {
		return err
	}
	env.printDecision("renewed", pf, map[string]any{"lease_expires_at": formatTime(exp)}, "lease expires "+formatTime(exp))
	return nil
}

func cmdRecord(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("gate record", "--key KEY --task ID --token N --outcome OUTCOME [--evidence DIR] [--chain-head HEX]")
	var pf permitFlags
	pf.register(fs)
	outcome := fs.String("outcome", "", "not_sent, sent_verified, sent_rejected or send_status_unknown")
	evidence := fs.String("evidence", "", "the attempt's evidence bundle `DIR`")
	chainHead := fs.String("chain-head", "", "the bundle's chain head when the outcome was decided")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	o, err := gate.ParseOutcome(*outcome)
	if err != nil {
		return err
	}
	s, permit, err := pf.resume(ctx, env)
	if err != nil {
		return err
	}
	defer s.Close()
	got, err := s.Record(ctx, permit, store.RecordRequest{Outcome: o, Evidence: *evidence, ChainHead: *chainHead})
	if got == "" {
		return err
	}
	extra := map[string]any{"outcome": got, "requested_outcome": o}
	if err != nil {
		extra["decision"], extra["reason"] = "refused", err.Error()
	}
	env.printDecision("recorded", pf, extra, "recorded "+string(got))
	return err
}

func cmdAuthorize(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("gate authorize", "--key KEY --reason TEXT --signed FILE")
	keyFlag := fs.String("key", "", "the consumed intent's `KEY`")
	reason := fs.String("reason", "", "why this redelivery is wanted (recorded)")
	signed := fs.String("signed", "", "the signed authorization `FILE` ('sendonce authorizer sign' makes one)")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	if *keyFlag == "" || *signed == "" || strings.TrimSpace(*reason) == "" {
		return usagef("gate authorize: --key, --reason and --signed are all required")
	}
	k, err := gate.ParseKey(*keyFlag)
	if err != nil {
		return fmt.Errorf("--key: %w", err)
	}
	b, err := os.ReadFile(*signed)
	if err != nil {
		return usagef("cannot read %s: %v", *signed, errors.Unwrap(err))
	}
	a, err := gate.ParseAuthorization(b)
	if err != nil {
		return err
	}
	if a.Key != k {
		return usagef("the authorization in %s is for key %s, not %s", *signed, a.Key, k)
	}
	s, err := env.openStore(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.Authorize(ctx, a, *reason); err != nil {
		return err
	}
	ref := gate.Ref{Key: k, Revision: a.Revision}
	env.print(map[string]any{"decision": "authorized", "key": k.String(), "revision": a.Revision, "ref": ref.String(), "authorizer": a.Signer, "reason": *reason},
		func(w io.Writer) {
			fmt.Fprintf(w, "authorized: %s opens revision %d (%s), signed by %s\n", k, a.Revision, ref, a.Signer)
		})
	env.log.Info().Str("key", k.String()).Int("revision", a.Revision).Str("authorizer", a.Signer).Msg("redelivery authorized")
	return nil
}

func cmdResolve(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("gate resolve", "--dispatch ID --provider NAME --object ID --sha256 HEX [--recipient NS:ID] [--link URL]")
	var req store.ResolveRequest
	fs.StringVar(&req.DispatchID, "dispatch", "", "the unknown attempt's dispatch `ID`")
	fs.StringVar(&req.Provider, "provider", "", "the provider that holds the object, e.g. xmpp")
	fs.StringVar(&req.ObjectID, "object", "", "the provider's `ID` for the object (XMPP: the archive's stanza-id)")
	fs.StringVar(&req.SHA256, "sha256", "", "the SHA-256 of the bytes the provider holds")
	fs.StringVar(&req.Recipient, "recipient", "", "who the provider delivered it to, `NS:ID`")
	fs.StringVar(&req.Link, "link", "", "where the provider holds the bytes")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	if req.DispatchID == "" || req.Provider == "" || req.ObjectID == "" || req.SHA256 == "" {
		return usagef("gate resolve: --dispatch, --provider, --object and --sha256 are required: only provider evidence resolves an unknown attempt")
	}
	if _, err := gate.ParseDigest(req.SHA256); err != nil {
		return err
	}
	if req.Recipient != "" {
		id, err := gate.ProviderID(req.Recipient)
		if err != nil {
			return fmt.Errorf("--recipient: %w", err)
		}
		req.Recipient = id.String()
	}
	s, err := env.openStore(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	o, err := s.Resolve(ctx, req)
	if err != nil {
		return err
	}
	env.print(map[string]any{"decision": "resolved", "dispatch_id": req.DispatchID, "outcome": o, "object_id": req.ObjectID}, func(w io.Writer) {
		fmt.Fprintf(w, "resolved: dispatch %s is %s (provider object %s)\n", req.DispatchID, o, req.ObjectID)
	})
	return nil
}

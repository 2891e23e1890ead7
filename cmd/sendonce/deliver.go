//go:build cgo

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/driver/replay"
	"github.com/sendonce/sendonce/driver/x11"
	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/xmpp"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/vision"
	"github.com/sendonce/sendonce/vision/tesseract"
)

// deliverFlags are deliver's inputs.
type deliverFlags struct {
	app, to, destID, file, task, display, staging, evidenceDir string
	providerConfig, replay                                     string
	lease, displayWait, sentItemTimeout                        time.Duration
	dryRun                                                     bool
}

func (f *deliverFlags) register(env *environment, name string) *flag.FlagSet {
	fs := env.flags(name, "--app gajim --to TITLE --file PATH [--dest-id NS:ID] [--task ID] [--dry-run]")
	fs.StringVar(&f.app, "app", "", "the chat app's profile: "+strings.Join(driver.KnownApps(), ", "))
	fs.StringVar(&f.to, "to", "", "the destination's exact visible `TITLE`")
	fs.StringVar(&f.destID, "dest-id", "", "the destination's provider id `NS:ID` (strong identity), e.g. xmpp:bob@example.org")
	fs.StringVar(&f.file, "file", "", "the file to deliver")
	fs.StringVar(&f.task, "task", "", "this task's `ID` (default: a new one)")
	fs.StringVar(&f.display, "display", "", "the X display (default $DISPLAY)")
	fs.StringVar(&f.staging, "staging", "", "where snapshots of files are kept (default $SENDONCE_STAGING, else /var/tmp/sendonce/staging)")
	fs.StringVar(&f.evidenceDir, "evidence-dir", "", "where evidence bundles go (default: next to the store, in evidence/)")
	fs.DurationVar(&f.lease, "lease", store.DefaultLease, "the claim's lease")
	fs.DurationVar(&f.displayWait, "display-wait", 2*time.Minute, "how long to wait for another delivery on this display to finish")
	fs.BoolVar(&f.dryRun, "dry-run", false, "claim nothing and cross nothing: say what the gate would decide and whether the title matches")
	fs.DurationVar(&f.sentItemTimeout, "sent-item-timeout", 0, "how long to look for the sent item (default: the app profile's)")
	fs.StringVar(&f.replay, "replay", "", "testing: drive a recorded fixture `DIR` instead of the live desktop (no X server)")
	fs.StringVar(&f.providerConfig, "provider-config", "", "with --dest-id xmpp:..., ask the XMPP server after the send; the account `FILE` (or SENDONCE_XMPP_JID/PASSWORD/ADDR)")
	return fs
}

func desktopCommands() []command {
	return []command{
		{"deliver", "deliver a file through a chat app, at most once, with evidence", cmdDeliver},
		{"record", "deliver, recording the desktop into a replay fixture", cmdRecordFixture},
	}
}

func cmdDeliver(ctx context.Context, env *environment, args []string) error {
	var f deliverFlags
	fs := f.register(env, "deliver")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	open := openDesktop(openLive)
	switch {
	case env.desktop != nil:
		open = env.desktop
	case f.replay != "":
		open = func(string) (driver.Driver, func(), error) {
			d, err := replay.New(f.replay)
			if err != nil {
				return nil, nil, usagef("--replay: %v", err)
			}
			return d, func() {}, nil
		}
		if f.display == "" {
			f.display = ":replay"
		}
		if f.sentItemTimeout == 0 {
			f.sentItemTimeout = 2 * time.Second
		}
	}
	return env.deliver(ctx, f, open)
}

func openLive(display string) (driver.Driver, func(), error) {
	os.Setenv("DISPLAY", display) // screen capture reads it
	d, err := x11.Open(display)
	if err != nil {
		return nil, nil, usagef("%v", err)
	}
	return d, d.Close, nil
}

// cmdRecordFixture delivers like deliver and records the desktop into a replay fixture: the
// frames after every input event, the inputs, and the outcome as the expected one.
func cmdRecordFixture(ctx context.Context, env *environment, args []string) error {
	var f deliverFlags
	fs := f.register(env, "record")
	fixture := fs.String("fixture", "", "the fixture `DIR` to write (must not exist)")
	name := fs.String("name", "", "the fixture's name")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	if *fixture == "" {
		return usagef("record: --fixture DIR is required")
	}
	if _, err := os.Stat(*fixture); err == nil {
		return usagef("record: %s exists; it never overwrites a fixture", *fixture)
	}
	var rec *replay.Recorder
	open := func(display string) (driver.Driver, func(), error) {
		d, closer, err := openLive(display)
		if err != nil {
			return nil, nil, err
		}
		if rec, err = replay.NewRecorder(d, *fixture); err != nil {
			closer()
			return nil, nil, err
		}
		return rec, closer, nil
	}
	env.onOutcome = func(outcome string) error {
		if rec == nil {
			return nil
		}
		content, err := os.ReadFile(f.file)
		if err != nil {
			return err
		}
		return rec.Save(replay.Fixture{Name: *name, App: f.app, To: f.to, DestID: f.destID, FileName: filepath.Base(f.file), Expected: outcome}, content)
	}
	return env.deliver(ctx, f, open)
}

// deliveryOutput is what deliver prints.
type deliveryOutput struct {
	Outcome          string   `json:"outcome"`
	Key              string   `json:"key"`
	Keys             []string `json:"keys"`
	IdentityStrength string   `json:"identity_strength"`
	Task             string   `json:"task"`
	DispatchID       string   `json:"dispatch_id,omitempty"`
	Token            uint64   `json:"token,omitempty"`
	Evidence         string   `json:"evidence,omitempty"`
	Reasons          []string `json:"reasons,omitempty"`
	Stopped          string   `json:"stopped,omitempty"`
	DryRun           bool     `json:"dry_run,omitempty"`
	WouldProceed     *bool    `json:"would_proceed,omitempty"`
	TitleMatches     *bool    `json:"title_matches,omitempty"`
	Gate             string   `json:"gate,omitempty"`
}

// deliver runs one delivery on the desktop open gives.
func (env *environment) deliver(ctx context.Context, f deliverFlags, open openDesktop) error {
	in, err := env.checkDeliverInput(f)
	if err != nil {
		return err
	}
	snap, err := stageFile(f.file, in.staging)
	if err != nil {
		return err
	}
	keys, err := deliveryKeys(f, snap.Digest)
	if err != nil {
		return err
	}
	task := f.task
	if task == "" {
		task = newTaskID()
	}
	out := deliveryOutput{Key: keys[0].String(), Task: task, IdentityStrength: string(gate.Weak)}
	for _, k := range keys {
		out.Keys = append(out.Keys, k.String())
		if k.Identity().Strength() == gate.Strong {
			out.IdentityStrength = string(gate.Strong)
		}
	}

	// The desktop and OCR are opened before the claim: a display that cannot be
	// reached or missing language data is bad input, and nothing is claimed for it.
	d, closeDesktop, err := open(in.display)
	if err != nil {
		return err
	}
	defer closeDesktop()
	if f.sentItemTimeout > 0 {
		in.profile.SentItemTimeout.Duration = f.sentItemTimeout
	}
	ocr, err := tesseract.New()
	if err != nil {
		return usagef("%v", err)
	}
	defer ocr.Close()

	s, err := env.openStore(ctx)
	if err != nil {
		return err
	}
	defer s.Close()

	var permit *store.Permit
	if f.dryRun {
		out.DryRun = true
		rs, err := s.Status(ctx, keys)
		if err != nil {
			return err
		}
		out.Gate = string(rs[0].Status)
		proceed := rs[0].Status == gate.StatusFree || rs[0].Status == gate.StatusNotSent
		out.WouldProceed = &proceed
	} else {
		res, err := s.Claim(ctx, store.ClaimRequest{Keys: keys, Task: task, Lease: f.lease})
		if err != nil {
			var r *gate.Refusal
			if errors.As(err, &r) {
				out.Outcome, out.Gate, out.Stopped = "refused", string(r.Status), r.Reason
				if a := res.Prior; a != nil {
					out.DispatchID, out.Evidence = a.DispatchID, a.Evidence
				}
				env.printDelivery(out)
			}
			return err
		}
		permit = res.Permit
		out.DispatchID, out.Token, out.Gate = permit.DispatchID(), permit.Token(), "granted"
		env.killpoint("claim")
	}

	// From here on this process holds the key: every way out records an outcome.
	dispatch := out.DispatchID
	if dispatch == "" {
		dispatch = "dry-run-" + task
	}
	bundleDir := filepath.Join(in.evidenceRoot, dispatch)
	title := f.to
	m := evidence.Manifest{Keys: out.Keys, Identity: keys[0].Identity().String(), IdentityStrength: out.IdentityStrength, Title: title,
		App: f.app, Task: task, Token: out.Token, DispatchID: dispatch, ContentSHA256: snap.Digest.String(), Size: snap.Size,
		FileName: snap.Name, ToolVersion: toolVersion(), Host: hostname()}
	rec, err := evidence.Create(bundleDir, m, nil)
	if err != nil {
		return env.abandon(ctx, s, permit, out, fmt.Errorf("%w: evidence bundle: %v", store.ErrUnavailable, err))
	}
	out.Evidence = bundleDir

	lease, err := env.waitForDisplay(ctx, s, in.display, task, f.lease, f.displayWait)
	if err != nil {
		rec.Close()
		return env.abandon(ctx, s, permit, out, err)
	}
	defer s.ReleaseDisplay(context.WithoutCancel(ctx), lease)

	guarded := driver.Guarded{Driver: d, Guard: func(ctx context.Context) error { return s.CheckDisplay(ctx, lease) }}
	runner := &driver.Runner{
		Driver: guarded, Reader: &vision.Reader{Screen: guarded, OCR: ocr}, Gate: s, Permit: permit, Rec: rec,
		Profile: in.profile, Killpoint: env.killpoint,
		Vars: driver.Vars{Address: address(f), Title: title, FilePath: snap.Path, FileName: snap.Name, Size: snap.Size},
	}
	if !env.jsonOut {
		runner.Progress = func(format string, args ...any) { fmt.Fprintf(env.stderr, "  "+format+"\n", args...) }
	}
	if f.dryRun {
		return env.dryRun(ctx, runner, rec, out)
	}
	claimedAt := time.Now()
	// Both leases are renewed while the delivery runs; a refused renewal (fenced,
	// expired) stops it at once, and a paused process renews nothing.
	runCtx, stopRenewing := context.WithCancel(ctx)
	renewed := store.KeepAlive(runCtx, f.lease/3, stopRenewing, func(ctx context.Context) error {
		if _, err := s.Renew(ctx, permit, f.lease); err != nil {
			return err
		}
		return s.RenewDisplay(ctx, lease, f.lease)
	})
	res, err := runner.Deliver(runCtx)
	stopRenewing()
	if rerr := <-renewed; rerr != nil {
		env.log.Warn().Err(rerr).Msg("lease renewal refused: stopped")
	}
	if err != nil {
		env.log.Warn().Err(err).Msg("delivery stopped")
		out.Stopped = err.Error()
	}
	objectID := ""
	if res.Crossed && env.providerWanted(f) {
		objectID = env.askProvider(ctx, s, f, rec, provider.Dispatch{DispatchID: permit.DispatchID(), Destination: keys[0].Identity().String(),
			FileName: snap.Name, Size: snap.Size, SHA256: snap.Digest.String(), From: claimedAt.Add(-time.Minute), Until: time.Now().Add(time.Minute)})
	}
	return env.finish(ctx, s, permit, rec, out, objectID)
}

// providerWanted: a provider id in the xmpp namespace and an account to ask with.
func (env *environment) providerWanted(f deliverFlags) bool {
	if f.destID == "" {
		return false
	}
	id, err := gate.ProviderID(f.destID)
	if err != nil || id.Namespace() != "xmpp" {
		return false
	}
	return f.providerConfig != "" || env.getenv("SENDONCE_XMPP_JID") != ""
}

// askProvider looks the dispatch up right after the send (a few tries while the
// server stores it) and writes the answer into the evidence, bound to this dispatch.
// It returns the confirming object's id, if any.
func (env *environment) askProvider(ctx context.Context, s *store.Store, f deliverFlags, rec *evidence.Recorder, d provider.Dispatch) string {
	cfg, err := env.providerConfig(f.providerConfig)
	if err != nil {
		env.log.Warn().Err(err).Msg("provider lookup skipped")
		return ""
	}
	p := xmpp.New(cfg)
	var ans provider.Answer
	var confirm, wrongBytes, wrongRecipient *provider.Object
	for try := 0; try < 4; try++ {
		ans, err = p.Lookup(ctx, d)
		if err != nil {
			ans = provider.Answer{Result: provider.CantTell, Detail: err.Error()}
		}
		taken := map[string]bool{}
		for _, o := range ans.Objects {
			if bound, err := s.ObjectBinding(ctx, o.ID); err == nil && bound != "" && bound != d.DispatchID {
				taken[o.ID] = true
			}
		}
		confirm, wrongBytes, wrongRecipient = provider.Match(ans, d, taken)
		if confirm != nil || wrongBytes != nil || wrongRecipient != nil {
			break
		}
		time.Sleep(time.Second)
	}
	l := &evidence.Lookup{Provider: "xmpp", DispatchID: d.DispatchID, Result: string(ans.Result), Authoritative: ans.Authoritative}
	pick := confirm
	if pick == nil {
		pick = wrongBytes
	}
	if pick == nil {
		pick = wrongRecipient
	}
	if pick != nil {
		l.Result, l.ObjectID, l.SHA256, l.Recipient = "found", pick.ID, pick.SHA256, pick.Recipient
	} else if ans.Result == provider.Found {
		l.Result = "cant_tell" // objects with the name, none bindable to this dispatch
	}
	if _, err := rec.Append(evidence.Record{Kind: evidence.KindLookup, Intent: "ask the provider", Lookup: l}); err != nil {
		env.log.Warn().Err(err).Msg("writing the lookup to the evidence")
	}
	env.log.Info().Str("result", l.Result).Str("object", l.ObjectID).Msg("provider lookup")
	if confirm != nil {
		return confirm.ID
	}
	return ""
}

// finish classifies the attempt from its evidence, records the outcome with the
// permit, seals the bundle and prints the result.
func (env *environment) finish(ctx context.Context, s *store.Store, permit *store.Permit, rec *evidence.Recorder, out deliveryOutput, objectID string) error {
	head := rec.Head()
	rec.Close()
	b, err := evidence.Verify(rec.Dir(), evidence.VerifyOptions{})
	var c evidence.Classification
	if err != nil {
		c = evidence.FailClosed(err)
	} else {
		c = evidence.Classify(evidence.Transcript{Manifest: b.Manifest, Records: b.Records, Complete: true})
	}
	ctx = context.WithoutCancel(ctx) // an interrupt must not stop the outcome being recorded
	req := store.RecordRequest{Outcome: c.Outcome, Evidence: rec.Dir(), ChainHead: head}
	if c.Outcome == gate.SentVerified {
		req.ObjectID = objectID
	}
	got, rerr := s.Record(ctx, permit, req)
	env.killpoint("recorded")
	if got == "" {
		// The store refused the record (a fenced or expired permit: another task took
		// over before anything was crossed) or could not be written. Report that, with
		// what the evidence says; nothing here may read as a right to retry.
		c.Reasons = append(c.Reasons, fmt.Sprintf("recording the outcome failed: %v", rerr))
		if err := sealBundle(rec.Dir(), string(c.Outcome), c.Reasons); err != nil {
			env.log.Warn().Err(err).Msg("sealing the evidence bundle")
		}
		out.Outcome, out.Reasons, out.Stopped = string(c.Outcome), c.Reasons, rerr.Error()
		env.printDelivery(out)
		return rerr
	}
	if err := sealBundle(rec.Dir(), string(got), c.Reasons); err != nil {
		env.log.Warn().Err(err).Msg("sealing the evidence bundle")
	}
	out.Outcome, out.Reasons = string(got), c.Reasons
	if env.onOutcome != nil {
		if err := env.onOutcome(out.Outcome); err != nil {
			env.log.Warn().Err(err).Msg("saving the fixture")
		}
	}
	env.printDelivery(out)
	if rerr != nil && got != c.Outcome {
		return exitError{outcomeExit(got), rerr}
	}
	if code := outcomeExit(got); code != exitOK {
		return exitError{code, fmt.Errorf("outcome %s", got)}
	}
	return nil
}

// sealBundle reopens a closed bundle to seal it.
func sealBundle(dir, outcome string, reasons []string) error {
	r, err := evidence.Reopen(dir, nil)
	if err != nil {
		return err
	}
	_, err = r.Seal(outcome, reasons, nil)
	return err
}

// abandon ends an attempt that never reached the desktop: nothing was crossed, so it is
// not_sent, and the key is free again.
func (env *environment) abandon(ctx context.Context, s *store.Store, permit *store.Permit, out deliveryOutput, cause error) error {
	if permit != nil {
		if _, err := s.Record(context.WithoutCancel(ctx), permit, store.RecordRequest{Outcome: gate.NotSent, Evidence: out.Evidence}); err != nil {
			env.log.Warn().Err(err).Msg("recording not_sent")
		}
	}
	return cause
}

func (env *environment) dryRun(ctx context.Context, r *driver.Runner, rec *evidence.Recorder, out deliveryOutput) error {
	matches, err := r.DryRun(ctx)
	rec.Close()
	out.TitleMatches = &matches
	proceed := *out.WouldProceed && matches
	out.WouldProceed = &proceed
	out.Outcome = "dry_run"
	if err != nil {
		out.Stopped = err.Error()
	}
	env.printDelivery(out)
	if !proceed {
		return exitError{exitNotSent, fmt.Errorf("a real run would not proceed")}
	}
	return nil
}

func (env *environment) waitForDisplay(ctx context.Context, s *store.Store, display, task string, lease, wait time.Duration) (*store.DisplayLease, error) {
	deadline := time.Now().Add(wait)
	for {
		l, err := s.AcquireDisplay(ctx, display, task, lease)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, gate.ErrHeld) || time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (env *environment) printDelivery(out deliveryOutput) {
	env.print(out, func(w io.Writer) {
		fmt.Fprintf(w, "outcome: %s\nkey: %s\n", out.Outcome, out.Key)
		if out.IdentityStrength == string(gate.Weak) {
			fmt.Fprintln(w, "identity: WEAK (a visible title; two conversations can show the same title)")
		} else {
			fmt.Fprintln(w, "identity: strong (a provider id)")
		}
		if out.DryRun {
			fmt.Fprintf(w, "dry run: the gate says %s; the visible title matches: %v; a real run would proceed: %v\n", out.Gate, deref(out.TitleMatches), deref(out.WouldProceed))
		}
		if out.Stopped != "" {
			fmt.Fprintf(w, "stopped: %s\n", out.Stopped)
		}
		for _, r := range out.Reasons {
			fmt.Fprintf(w, "  - %s\n", r)
		}
		if out.Evidence != "" {
			fmt.Fprintf(w, "evidence: %s\n", out.Evidence)
		}
	})
}

func deref(b *bool) bool { return b != nil && *b }

// deliverInput is deliver's input, checked before anything is touched.
type deliverInput struct {
	profile      *driver.Profile
	display      string
	staging      string
	evidenceRoot string
}

func (env *environment) checkDeliverInput(f deliverFlags) (deliverInput, error) {
	var in deliverInput
	if f.app == "" {
		return in, usagef("deliver: --app is required (%s)", strings.Join(driver.KnownApps(), ", "))
	}
	p, err := driver.LoadProfile(f.app)
	if err != nil {
		return in, usagef("deliver: %v", err)
	}
	in.profile = p
	if f.to == "" {
		return in, usagef("deliver: --to TITLE is required: the visible title is checked on screen before anything is sent")
	}
	if _, err := gate.Title(f.to); err != nil {
		return in, fmt.Errorf("--to: %w", err)
	}
	if f.destID != "" {
		if _, err := gate.ProviderID(f.destID); err != nil {
			return in, fmt.Errorf("--dest-id: %w", err)
		}
	}
	if f.file == "" {
		return in, usagef("deliver: --file PATH is required")
	}
	fi, err := os.Stat(f.file)
	switch {
	case err != nil:
		return in, usagef("cannot read %s: %v", f.file, errors.Unwrap(err))
	case !fi.Mode().IsRegular():
		return in, usagef("%s is not a regular file", f.file)
	case p.UploadLimitBytes > 0 && fi.Size() > p.UploadLimitBytes:
		return in, usagef("%s is %d bytes, over %s's upload limit of %d bytes", f.file, fi.Size(), p.App, p.UploadLimitBytes)
	}
	if fh, err := os.Open(f.file); err != nil {
		return in, usagef("cannot read %s: %v", f.file, errors.Unwrap(err))
	} else {
		fh.Close()
	}
	in.display = f.display
	if in.display == "" {
		in.display = env.getenv("DISPLAY")
	}
	if in.display == "" {
		return in, usagef("deliver: no display: set DISPLAY or give --display")
	}
	if err := tesseract.LanguageAvailable("eng"); err != nil {
		return in, usagef("deliver: %v", err)
	}
	in.staging = f.staging
	if in.staging == "" {
		in.staging = env.getenv("SENDONCE_STAGING")
	}
	if in.staging == "" {
		in.staging = "/var/tmp/sendonce/staging"
	}
	in.evidenceRoot = f.evidenceDir
	if in.evidenceRoot == "" {
		path, err := env.storeFile()
		if err != nil {
			return in, err
		}
		in.evidenceRoot = filepath.Join(filepath.Dir(path), "evidence")
	}
	return in, nil
}

func deliveryKeys(f deliverFlags, d gate.Digest) ([]gate.Key, error) {
	var keys []gate.Key
	if f.destID != "" {
		id, err := gate.ProviderID(f.destID)
		if err != nil {
			return nil, err
		}
		keys = append(keys, gate.KeysFor(id, d)...)
	}
	id, err := gate.Title(f.to)
	if err != nil {
		return nil, err
	}
	return append(keys, gate.KeysFor(id, d)...), nil
}

// address is what is typed to open the conversation: the provider id's address when
// known, else the title.
func address(f deliverFlags) string {
	if f.destID != "" {
		if id, err := gate.ProviderID(f.destID); err == nil {
			return id.Value()
		}
	}
	return f.to
}

func newTaskID() string {
	var b [6]byte
	rand.Read(b[:])
	return fmt.Sprintf("deliver-%s-%d-%s", hostname(), os.Getpid(), hex.EncodeToString(b[:]))
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

func toolVersion() string { return "sendonce " + version }

const version = "0.4.0"

package sendonce

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/internal/clock"
	"github.com/sendonce/sendonce/internal/staging"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/registry"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/vision"
)

// Deliverer runs whole deliveries on one desktop: a Client's store, the desktop's
// driver and an OCR engine.
type Deliverer struct {
	Client *Client
	// OpenDesktop opens the desktop of a display; the returned func closes it. Bad input
	// (a display that cannot be reached) should wrap ErrInvalid.
	OpenDesktop func(ctx context.Context, display string) (driver.Driver, func(), error)
	// OCR reads the screen; a Deliverer uses it from one goroutine at a time.
	OCR vision.OCR
	// OCRLanguages are the languages OCR reads (English when nil): a title in another
	// script is read from the app's tree alone, and the result says so.
	OCRLanguages vision.Languages
	// OpenTree, when set, gives the accessibility tree of the display's apps, for the
	// profile steps that read it (driver.OpenAccessibility); the returned func closes it.
	OpenTree func(ctx context.Context, display string) (driver.Tree, func())
	// AfterDurable, when set, is called right after each named moment of a delivery is
	// durable or done: claiming (everything checked, the claim about to be asked for),
	// claim, picker_opened, file_chosen, send_pressed, looking, classified (the evidence
	// judged, before recording), recorded. It is a test hook (the crash tests kill the
	// process there; the fleet test holds two workstations at claiming to race them).
	AfterDurable func(moment string)
}

// DeliveryRequest is one intended delivery.
type DeliveryRequest struct {
	App         string          // the chat app's built-in profile, e.g. "gajim"
	Profile     *driver.Profile // instead of App: a profile already loaded and validated
	Destination Destination     // Title is required: it is checked on screen before anything is sent
	Content     Content         // a path or an open file (not a bare SHA256)
	Task        string          // this task's id; a new one when ""
	Display     string          // the X display, e.g. ":0" (required)
	Staging     string          // where snapshots of files are kept (required)
	Lease       time.Duration   // the claim's lease; DefaultLease when zero
	// DisplayWait is how long to wait for another delivery on this display to finish.
	DisplayWait time.Duration
	// SentItemTimeout is how long to look for the sent item; the profile's when zero.
	SentItemTimeout time.Duration
	// ProviderConfig is the provider account file, to ask the provider right after the
	// send (with a Destination.ProviderID in a known namespace). The provider's
	// environment variables (Options.Getenv) work too.
	ProviderConfig string
	// DryRun claims nothing and crosses nothing: it says what the gate would decide and
	// whether the title matches.
	DryRun bool
	// Request, when set, stores the claim's answer under a request id: a retry with the
	// same id (after a lost response, or a restarted service) is never a second
	// delivery; it is refused with the key's status since that first claim.
	Request RequestRef
	// Progress, when set, is told of this delivery's steps: first the claim (with the
	// key and the dispatch id, so a caller that gives up can ask Status later), then one
	// event a step. It is called from the delivery's goroutine and must return at once.
	Progress func(Event)
}

func (r DeliveryRequest) progress(e Event) {
	if r.Progress != nil {
		r.Progress(e)
	}
}

// Deliver runs one delivery: it checks the input, snapshots the bytes, claims the key,
// takes the display, drives the app through its boundaries (each crossed durably first),
// asks the provider when it can, classifies the evidence, records the outcome and seals
// the bundle.
//
// Once a claim was granted, Deliver returns err == nil and a result whose Outcome is the
// outcome the store recorded (read back after recording). An error means that nothing
// was claimed (bad input, consumed, held, stale, fail-closed, interrupted before the
// claim; the result then says what the gate said, when it said something), or that the
// outcome could not be recorded: then the result says send_status_unknown. An error
// never means not_sent.
//
// Cancelling ctx stops the delivery's waits and input at once, but not the recording of
// the outcome, the sealing of the bundle or the release of the display: those run on a
// context of their own.
func (d *Deliverer) Deliver(ctx context.Context, req DeliveryRequest) (DeliveryResult, error) {
	c := d.Client
	in, err := d.check(req)
	if err != nil {
		return DeliveryResult{}, err
	}
	defer in.closeFile()
	in.staging.Prune(c.clock())
	staged, err := in.staging.Stage(in.file, in.name, in.profile.UploadLimitBytes)
	if err != nil {
		return DeliveryResult{}, err
	}
	placed := false
	defer func() {
		if !placed {
			staged.Discard()
		}
	}()
	keys := in.dest.Keys(staged.Digest)
	task := req.Task
	if task == "" {
		task = newTaskID()
	}
	if err := checkTask(task); err != nil {
		return DeliveryResult{}, err
	}
	lease := req.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	out := DeliveryResult{Key: keys[0].String(), Task: task, IdentityStrength: in.dest.Strength()}
	for _, k := range keys {
		out.Keys = append(out.Keys, k.String())
	}

	// The workstation's sealing key is loaded (made and registered on the first use on
	// this machine) before the claim: without it no bundle could be sealed.
	ws, err := c.ensureWorkstation(ctx)
	if err != nil {
		return DeliveryResult{}, err
	}

	// The desktop is opened before the claim: a display that cannot be reached is bad
	// input, and nothing is claimed for it.
	drv, closeDesktop, err := d.OpenDesktop(ctx, req.Display)
	if err != nil {
		return DeliveryResult{}, err
	}
	defer closeDesktop()
	if err := in.staging.CheckAppReads(ctx, drv, in.profile); err != nil {
		err = fieldError("staging", err)
		return DeliveryResult{}, err
	}
	if req.SentItemTimeout > 0 {
		in.profile.SentItemTimeout.Duration = req.SentItemTimeout
	}
	if err := ctx.Err(); err != nil {
		return DeliveryResult{}, err
	}

	var permit *store.Permit
	if req.DryRun {
		out.DryRun = true
		rs, err := c.store.Status(ctx, keys)
		if err != nil {
			return DeliveryResult{}, err
		}
		out.Gate = string(rs[0].Status)
		proceed := rs[0].Status == gate.StatusFree || rs[0].Status == gate.StatusNotSent
		out.WouldProceed = &proceed
	} else {
		floor, err := c.tokenFloor(ctx)
		if err != nil {
			return DeliveryResult{}, err
		}
		if err := c.checkCrossings(ctx); err != nil {
			return DeliveryResult{}, err
		}
		d.after("claiming")
		res, err := c.store.Claim(ctx, store.ClaimRequest{Keys: keys, Task: task, Lease: lease, Request: req.Request, MinToken: floor,
			Origin: store.Origin{Workstation: ws.ID, FileName: staged.Name, Size: staged.Size}, EvidenceRoot: c.evidenceRoot})
		if err == nil && res.Granted {
			err = c.noteToken(ctx, res.Permit.Token())
		}
		if err == nil && res.Replayed {
			err = d.startedBefore(ctx, keys, res, &out)
		}
		if err != nil {
			var r *gate.Refusal
			if errors.As(err, &r) {
				out.Outcome, out.Gate, out.Stopped = "refused", string(r.Status), r.Reason
				if a := res.Prior; a != nil {
					out.DispatchID, out.Evidence = a.DispatchID, a.Evidence
				}
				return out, err
			}
			return DeliveryResult{}, err
		}
		permit = res.Permit
		out.DispatchID, out.Token, out.Gate = permit.DispatchID(), permit.Token(), "granted"
		req.progress(Event{Level: LevelProgress, Message: "claimed: this call delivers it", Key: out.Key, DispatchID: out.DispatchID})
		d.after("claim")
	}

	// From here on this process holds the key: every way out records an outcome.
	dispatch := out.DispatchID
	if dispatch == "" {
		dispatch = "dry-run-" + strings.ReplaceAll(task, "/", "~") // a service's AGENT/SUBTASK names one folder
	}
	placed = true
	snap, err := staged.Place(dispatch)
	if err != nil {
		return d.abandon(ctx, permit, nil, out, fmt.Errorf("%w: %v", store.ErrUnavailable, err))
	}
	if req.DryRun {
		defer staging.RemoveSnapshot(snap)
	}
	bundleDir := filepath.Join(c.evidenceRoot, dispatch)
	m := evidence.Manifest{Keys: out.Keys, Identity: keys[0].Identity().String(), IdentityStrength: string(out.IdentityStrength), Title: in.dest.Title(),
		App: in.profile.App, Task: task, Token: out.Token, DispatchID: dispatch, ContentSHA256: snap.Digest.String(), Size: snap.Size,
		FileName: snap.Name, ToolVersion: "sendonce " + Version, Host: hostname(), Workstation: ws.ID,
		Profile: &evidence.ProfileUse{Source: in.profile.Source, Text: in.profile.Text}}
	rec, err := evidence.Create(bundleDir, m, clockFunc(c.clock))
	if err != nil {
		staging.RemoveSnapshot(snap)
		return d.abandon(ctx, permit, nil, out, fmt.Errorf("%w: evidence bundle: %v", store.ErrUnavailable, err))
	}
	out.Evidence = bundleDir

	// A display is this workstation's: in a shared store, ":0" on two machines is two
	// displays, so the lease is keyed by the workstation's id (not its host name:
	// cloned machines share host names).
	display, err := d.waitForDisplay(ctx, ws.ID+"/"+req.Display, task, lease, req.DisplayWait)
	if err != nil {
		staging.RemoveSnapshot(snap) // nothing reached the app
		return d.abandon(ctx, permit, rec, out, err)
	}
	defer func() {
		ctx, cancel := detached(ctx)
		defer cancel()
		c.store.ReleaseDisplay(ctx, display)
	}()

	guarded := driver.Guarded{Driver: drv, Guard: c.store.Guard(display)}
	var tree driver.Tree
	if d.OpenTree != nil {
		var closeTree func()
		tree, closeTree = d.OpenTree(ctx, req.Display)
		defer closeTree()
	}
	runner := &driver.Runner{Tree: tree, Languages: d.OCRLanguages,
		Driver: guarded, Reader: &vision.Reader{Screen: guarded, OCR: d.OCR}, Gate: journaledGate{c}, Permit: permit, Rec: rec,
		Profile: in.profile, Killpoint: d.after, Clock: c.clock,
		Vars: driver.Vars{Address: in.dest.Address(), Title: in.dest.Title(), FilePath: snap.Path, FileName: snap.Name, Size: snap.Size},
		Progress: func(format string, args ...any) {
			e := Event{Level: LevelProgress, Message: fmt.Sprintf(format, args...), Key: out.Key, DispatchID: dispatch}
			c.events.Send(e)
			req.progress(e)
		},
	}
	if req.DryRun {
		return d.dryRun(ctx, runner, rec, out)
	}
	var ask *providerAsk
	wanted := d.providerWanted(req, in.dest)
	if wanted {
		// The provider is asked from the moment the look for the sent item begins,
		// beside it: a confirmation spares the look its settle (see driver.Runner.Witness).
		runner.Witness = func() <-chan struct{} {
			ask = d.startAsking(ctx, req, rec, permit, keys[0], snap, in.profile.SentItemWait())
			return ask.confirmed
		}
	}
	// Both leases are renewed while the delivery runs; a refused renewal (fenced,
	// expired) stops it at once, and a paused process renews nothing.
	runCtx, stopRenewing := context.WithCancelCause(ctx)
	renewed := c.store.KeepLeases(runCtx, permit, display, lease, stopRenewing)
	res, err := runner.Deliver(runCtx)
	out.TitleSources, out.AccessibilityTree = res.TitleSources, res.Tree
	stopRenewing(nil)
	if rerr := <-renewed; rerr != nil {
		c.warn("lease renewal refused: stopped", rerr, Event{DispatchID: dispatch})
	}
	if err != nil {
		c.warn("delivery stopped", err, Event{DispatchID: dispatch})
		out.Stopped = err.Error()
	}
	objectID := ""
	if ask != nil || (res.Crossed && wanted) {
		// After a crossing the provider is asked even when the caller gave up: its
		// answer is what can still settle the outcome.
		if ask == nil { // crossed, and stopped before the look began
			ask = d.startAsking(ctx, req, rec, permit, keys[0], snap, in.profile.SentItemWait())
		}
		objectID = ask.result()
	}
	res2, err := d.finish(ctx, permit, rec, out, objectID)
	if o := gate.Outcome(res2.Outcome); err == nil && o != gate.SendStatusUnknown {
		// Settled: the app has nothing left to read. After unknown the app may still be
		// uploading: the snapshot stays until reconcile or the retention.
		if rerr := staging.RemoveSnapshot(snap); rerr != nil {
			c.warn("removing the snapshot", rerr, Event{DispatchID: out.DispatchID})
		}
	}
	return res2, err
}

func (d *Deliverer) after(moment string) {
	if d.AfterDurable != nil {
		d.AfterDurable(moment)
	}
}

// detached is the context for what must happen even after the caller gave up: record
// the outcome, seal the bundle, release the display. It has a deadline of its own.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), detachedTimeout)
}

const detachedTimeout = 30 * time.Second

// deliveryInput is a delivery's input, checked before anything is touched.
type deliveryInput struct {
	profile   *driver.Profile
	file      *os.File
	name      string
	closeFile func()
	staging   staging.Area
	dest      gate.Destination // the request's destination, parsed once
}

func (d *Deliverer) check(req DeliveryRequest) (deliveryInput, error) {
	var in deliveryInput
	in.profile = req.Profile
	if in.profile == nil {
		if req.App == "" {
			return in, fieldError("app", errors.New("is required"))
		}
		p, err := d.Client.profiles.Load(req.App)
		if err != nil {
			return in, fieldError("app", err)
		}
		in.profile = p
	}
	if req.Destination.Title == "" {
		return in, fieldError("to", errors.New("is required: the visible title is checked on screen before anything is sent"))
	}
	var err error
	if in.dest, err = req.Destination.parse(); err != nil {
		return in, err
	}
	if req.Content.SHA256 != "" {
		return in, fieldError("content", errors.New("a delivery needs the bytes: give a path or an open file"))
	}
	f, name, size, closeFile, err := req.Content.open()
	if err != nil {
		return in, err
	}
	if p := in.profile; p.UploadLimitBytes > 0 && size > p.UploadLimitBytes {
		closeFile()
		return in, gate.Invalidf("%s is %d bytes, over %s's upload limit of %d bytes", f.Name(), size, p.App, p.UploadLimitBytes)
	}
	if err := staging.CheckTypedName(name); err != nil {
		closeFile()
		return in, err
	}
	if in.profile.SendPageProof(name) == "" {
		closeFile()
		return in, gate.Invalidf("%s's send page does not show a name like %s whole (names_shown_for, name_shown_chars) and the profile has no item_mark to count its items by: nothing could prove the file is the one item it sends, so it is refused before the claim (rename a copy of it shorter, send it through an app whose profile can prove it, or give the profile an item_mark)", in.profile.App, name)
	}
	if d.providerWanted(req, in.dest) {
		// The account is read now, before anything is claimed: a loose or broken account
		// file found only after the send would leave the delivery to the screen.
		if _, err := registry.Open(in.dest.Provider().Namespace(), req.ProviderConfig, d.Client.getenv); err != nil {
			closeFile()
			return in, fieldError("provider-config", err)
		}
	}
	if req.Display == "" {
		closeFile()
		return in, fieldError("display", errors.New("is required: no X display was given (DISPLAY, --display), and a delivery drives an app on one; the gate, status and evidence work without one"))
	}
	if in.staging, err = openStaging(req.Staging); err != nil {
		closeFile()
		return in, err
	}
	for _, part := range strings.Split(strings.Trim(in.staging.Dir(), "/"), "/") {
		if err := staging.CheckTypedName(part); err != nil {
			closeFile()
			return in, gate.Invalidf("the staging folder %s is typed into the file chooser too: %v", in.staging.Dir(), err)
		}
	}
	in.file, in.name, in.closeFile = f, name, closeFile
	return in, nil
}

// SnapshotRetention is how long a snapshot of an unresolved attempt is kept.
const SnapshotRetention = staging.Retention

// openStaging checks the request's staging folder.
func openStaging(dir string) (staging.Area, error) {
	if dir == "" {
		return staging.Area{}, fieldError("staging", errors.New("is required"))
	}
	return staging.Open(dir)
}

// providerWanted: a provider id in a namespace some provider answers for, and an
// account to ask with.
func (d *Deliverer) providerWanted(req DeliveryRequest, dest gate.Destination) bool {
	ns := dest.Provider().Namespace()
	if ns == "" || !registry.Known(ns) {
		return false
	}
	return registry.Configured(ns, req.ProviderConfig, d.Client.getenv)
}

// providerAsk is a provider lookup that runs beside the look for the sent item.
type providerAsk struct {
	confirmed chan struct{} // closed when the provider confirmed this dispatch
	lookEnded chan struct{} // closed by result: the screen has stopped looking
	objectID  chan string   // the confirming object's id, "" when none; sent once
}

// startAsking starts asking the provider about this dispatch, on a context of its own:
// after a crossing the answer is wanted even when the caller gave up.
func (d *Deliverer) startAsking(ctx context.Context, req DeliveryRequest, rec *evidence.Recorder, permit *store.Permit, key gate.Key, snap staging.Snapshot, look time.Duration) *providerAsk {
	a := &providerAsk{confirmed: make(chan struct{}), lookEnded: make(chan struct{}), objectID: make(chan string, 1)}
	go func() {
		// It may run as long as the look, and then as long as it could before it ran
		// beside the look.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), look+finalReadMargin+detachedTimeout)
		defer cancel()
		a.objectID <- d.askProvider(pctx, req, rec, permit, key, snap, a.lookEnded, a.confirmed)
	}()
	return a
}

// result tells the lookup the screen has stopped looking and waits for its answer.
func (a *providerAsk) result() string {
	close(a.lookEnded)
	return <-a.objectID
}

// finalReadMargin is what a look for the sent item may take beyond its timeout (its
// last read).
const finalReadMargin = 10 * time.Second

// askProvider asks the provider until it picks an object for this dispatch (while the
// server stores it, and the screen looks), closing confirmed if that object confirms
// it. It writes the last answer into the evidence, bound to this dispatch, and returns
// the confirming object's id ("" when none).
func (d *Deliverer) askProvider(ctx context.Context, req DeliveryRequest, rec *evidence.Recorder, permit *store.Permit, key gate.Key, snap staging.Snapshot, lookEnded <-chan struct{}, confirmed chan<- struct{}) string {
	c := d.Client
	ns := key.Identity().Namespace()
	p, err := registry.Open(ns, req.ProviderConfig, c.getenv)
	if err != nil {
		c.warn("provider lookup skipped", err, Event{DispatchID: permit.DispatchID()})
		return ""
	}
	a, err := c.store.AttemptByDispatch(ctx, permit.DispatchID())
	if err != nil || a == nil {
		c.warn("provider lookup skipped: the attempt cannot be read back", err, Event{DispatchID: permit.DispatchID()})
		return ""
	}
	from, until := lookupWindow(*a)
	dispatch := provider.Dispatch{DispatchID: permit.DispatchID(), Destination: key.Identity(),
		FileName: snap.Name, Size: snap.Size, SHA256: snap.Digest.String(), From: from, Until: until}
	v := provider.AskBeside(ctx, p, dispatch, c.store, lookEnded)
	l := &evidence.Lookup{Provider: ns, DispatchID: dispatch.DispatchID, Result: string(v.Answer.Result), Authoritative: v.Answer.Authoritative}
	if o := v.Pick; o != nil {
		l.Result, l.ObjectID, l.SHA256, l.Recipient = "found", o.ID, o.SHA256, o.Recipient
	} else if v.Answer.Result == provider.Found {
		l.Result = "cant_tell" // objects with the name, none bindable to this dispatch
	}
	if _, err := rec.Append(evidence.Record{Kind: evidence.KindLookup, Intent: "ask the provider", Lookup: l}); err != nil {
		c.warn("writing the lookup to the evidence", err, Event{DispatchID: dispatch.DispatchID})
	} else if v.Confirm != nil {
		close(confirmed) // recorded first: the look may end on it
	}
	detail := l.Result + " " + l.ObjectID
	if l.ObjectID == "" {
		detail = l.Result + ": " + v.Answer.Detail // why it could not tell, or why nothing
	}
	c.info("provider lookup", Event{DispatchID: dispatch.DispatchID, Detail: detail})
	if v.Confirm != nil {
		return v.Confirm.ID
	}
	return ""
}

// clockFunc is a func as evidence's Clock.
type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

// startedBefore refuses a replayed grant: the delivery this request id started before
// (in a process that may have died after crossing) is never started again. The
// refusal carries the key's status now: held while that attempt's lease runs, consumed
// once it crossed, stale when it ended unsent (a new request id may deliver then).
func (d *Deliverer) startedBefore(ctx context.Context, keys []gate.Key, res store.ClaimResult, out *DeliveryResult) error {
	rs, err := d.Client.store.Status(ctx, keys)
	if err != nil {
		return err
	}
	st := rs[0].Status
	r := &gate.Refusal{Kind: gate.ErrStale, Status: st,
		Reason: fmt.Sprintf("this request started dispatch %s before; a request is never delivered twice: ask status, or send a new request if it says not_sent or free", res.Permit.DispatchID())}
	switch {
	case st == gate.StatusHeld:
		r.Kind = gate.ErrHeld
	case st == gate.StatusSentVerified, st == gate.StatusSentRejected, st == gate.StatusSendStatusUnknown:
		r.Kind = gate.ErrConsumed
	}
	out.DispatchID, out.Token = res.Permit.DispatchID(), res.Permit.Token()
	return r
}

// finish classifies the attempt from its evidence, records the outcome with the
// permit, seals the bundle and returns the result.
func (d *Deliverer) finish(ctx context.Context, permit *store.Permit, rec *evidence.Recorder, out DeliveryResult, objectID string) (DeliveryResult, error) {
	c := d.Client
	ctx, cancel := detached(ctx) // an interrupt must not stop the outcome being recorded
	defer cancel()
	head := rec.Head()
	rec.Close()
	b, err := evidence.Verify(rec.Dir(), evidence.VerifyOptions{})
	var cl evidence.Classification
	if err != nil {
		cl = evidence.FailClosed(err)
	} else {
		cl = evidence.Classify(evidence.Transcript{Manifest: b.Manifest, Records: b.Records, Complete: true, Profile: b.Profile})
	}
	req := store.RecordRequest{Outcome: cl.Outcome, Evidence: rec.Dir(), ChainHead: head}
	if cl.Outcome == gate.SentVerified {
		req.ObjectID = objectID
	}
	d.after("classified")
	got, rerr := c.store.Record(ctx, permit, req)
	d.after("recorded")
	if got == "" {
		// The store refused the record (a fenced or expired permit: another task took
		// over) or could not be written. Nothing here may read as a right to retry: the
		// result says unknown; the bundle is sealed with what its evidence says.
		cl.Reasons = append(cl.Reasons, fmt.Sprintf("the evidence says %s; recording the outcome failed: %v", cl.Outcome, rerr))
		if err := c.sealBundle(rec.Dir(), string(cl.Outcome), cl.Reasons); err != nil {
			c.warn("sealing the evidence bundle", err, Event{DispatchID: out.DispatchID})
		}
		out.Outcome, out.Reasons, out.Stopped = string(gate.SendStatusUnknown), cl.Reasons, rerr.Error()
		return out, rerr
	}
	if err := c.sealBundle(rec.Dir(), string(got), cl.Reasons); err != nil {
		c.warn("sealing the evidence bundle", err, Event{DispatchID: out.DispatchID})
	}
	out.Outcome, out.Reasons = string(got), cl.Reasons
	if rerr != nil {
		c.warn("the store recorded a stricter outcome than the evidence", rerr, Event{DispatchID: out.DispatchID})
	}
	return out, nil
}

// sealBundle reopens a closed bundle to seal it with this workstation's key.
func (c *Client) sealBundle(dir, outcome string, reasons []string) error {
	if c.ws == nil {
		return fmt.Errorf("no workstation key loaded to seal %s", dir)
	}
	r, err := evidence.Reopen(dir, nil)
	if err != nil {
		return err
	}
	_, err = r.Seal(outcome, reasons, c.ws.Key)
	return err
}

// abandon ends an attempt that never reached the desktop: nothing was crossed, so it is
// not_sent, and the key is free again. The bundle, when there is one, is sealed.
func (d *Deliverer) abandon(ctx context.Context, permit *store.Permit, rec *evidence.Recorder, out DeliveryResult, cause error) (DeliveryResult, error) {
	head := ""
	if rec != nil {
		head = rec.Head()
		rec.Close()
	}
	if permit == nil {
		return out, cause
	}
	ctx, cancel := detached(ctx)
	defer cancel()
	got, err := d.Client.store.Record(ctx, permit, store.RecordRequest{Outcome: gate.NotSent, Evidence: out.Evidence, ChainHead: head})
	if err != nil {
		d.Client.warn("recording not_sent", err, Event{DispatchID: out.DispatchID})
		out.Outcome, out.Stopped = string(gate.SendStatusUnknown), cause.Error()
		return out, err
	}
	out.Outcome, out.Stopped, out.Reasons = string(got), cause.Error(), []string{"stopped before the desktop was touched: " + cause.Error()}
	if rec != nil {
		if err := d.Client.sealBundle(rec.Dir(), string(got), out.Reasons); err != nil {
			d.Client.warn("sealing the evidence bundle", err, Event{DispatchID: out.DispatchID})
		}
	}
	return out, nil
}

func (d *Deliverer) dryRun(ctx context.Context, r *driver.Runner, rec *evidence.Recorder, out DeliveryResult) (DeliveryResult, error) {
	matches, err := r.DryRun(ctx)
	rec.Close()
	out.TitleMatches, out.TitleSources, out.AccessibilityTree = &matches, r.TitleSources(), r.TreeStatus()
	proceed := *out.WouldProceed && matches
	out.WouldProceed = &proceed
	out.Outcome = "dry_run"
	if err != nil {
		out.Stopped = err.Error()
	}
	return out, nil
}

func (d *Deliverer) waitForDisplay(ctx context.Context, display, task string, lease, wait time.Duration) (*store.DisplayLease, error) {
	now := d.Client.clock
	deadline := now().Add(wait)
	for {
		l, err := d.Client.store.AcquireDisplay(ctx, display, task, lease)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, gate.ErrHeld) || now().After(deadline) {
			return nil, err
		}
		if err := clock.Sleep(ctx, 500*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// checkTask refuses a task id that could not name a folder of its own (a dry run's
// evidence and snapshot folders are named after it, a slash as "~") or a line of a
// log. One slash may separate a service's agent from its sub-task (AGENT/SUBTASK).
func checkTask(task string) error {
	agent, sub, two := strings.Cut(task, "/")
	if len(task) > 256 || task == "." || task == ".." || strings.ContainsAny(task, "\\~") || strings.Contains(sub, "/") ||
		(two && (agent == "" || sub == "" || sub == "." || sub == "..")) || strings.IndexFunc(task, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return fieldError("task", fmt.Errorf("%s must be at most 256 characters, with no backslash, tilde, space or control character, and at most one slash (AGENT/SUBTASK)", gate.Quote(task)))
	}
	return nil
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

// journaledGate is the store as a delivery's steps reach it, with each crossing it
// acknowledges journaled on this workstation before the step acts on it.
type journaledGate struct{ c *Client }

func (g journaledGate) Check(ctx context.Context, p *store.Permit, b gate.Boundary) error {
	return g.c.store.Check(ctx, p, b)
}

func (g journaledGate) Cross(ctx context.Context, p *store.Permit, b gate.Boundary, chainHead string) (*store.Pass, error) {
	return g.c.crossJournaled(ctx, p, b, func() (*store.Pass, error) { return g.c.store.Cross(ctx, p, b, chainHead) })
}

package driver

import (
	"context"
	"errors"
	"fmt"
	"image"
	"strings"
	"time"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/internal/clock"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/vision"
)

// Gate is what a delivery needs of the store.
type Gate interface {
	Check(ctx context.Context, p *store.Permit, b gate.Boundary) error
	Cross(ctx context.Context, p *store.Permit, b gate.Boundary, chainHead string) (*store.Pass, error)
}

// Vars are the values a profile's templates and typing steps use.
type Vars struct {
	Address  string // typed to open the conversation: the provider id's address, or the title
	Title    string // the exact visible title expected
	FilePath string // the staged file's path
	FileName string
	Size     int64
}

func (v Vars) expand(s string) string {
	return strings.NewReplacer("{{address}}", v.Address, "{{title}}", v.Title, "{{file_name}}", v.FileName, "{{file_path}}", v.FilePath).Replace(s)
}

// Runner runs one delivery.
type Runner struct {
	Driver   Driver // guarded by the display lease: every input event is checked
	Reader   *vision.Reader
	Gate     Gate
	Permit   *store.Permit
	Rec      *evidence.Recorder
	Profile  *Profile
	Vars     Vars
	Progress func(format string, args ...any) // one line a step; may be nil
	// Killpoint is a test hook called after named moments: picker_opened,
	// file_chosen, send_pressed, looking. May be nil.
	Killpoint func(name string)
	// Clock is the workstation's wall clock (time.Now when nil): step times and waits.
	Clock func() time.Time
	// Witness, when set, is called once, as the look for the sent item begins (a
	// boundary was crossed), so that another witness can start asking: the deliverer
	// asks the provider, which downloads what arrived and matches its SHA-256. The
	// channel it returns is closed if that witness confirms this dispatch. The look then
	// ends with the read it is at, recorded, instead of waiting out the profile's
	// settle for a second read: the settle is there so that the screen alone can
	// confirm, and the outcome no longer rests on the screen. From that call on, other
	// goroutines may append to Rec. May be nil.
	Witness func() <-chan struct{}
	// Tree reads the app's accessibility tree for the title and the steps that address
	// it (wait_node, wait_node_gone). May be nil: such a step then stops, before any
	// boundary, and the title is read by OCR alone.
	Tree Tree
	// Languages are the OCR languages Reader's engine reads (English when nil): a text
	// in another script cannot be cross-checked, and the result says so.
	Languages vision.Languages

	titleSources string // where the title checked came from (titleRead.sources)
	treeOK       bool   // the app's tree answered when the delivery began (probeTree)
	treeNote     string // what the result says of the tree (Result.Tree)

	window  Window
	page    image.Rectangle // the web page's box in the window, where regions are the page's (placePage)
	crossed bool            // a crossing was made: from here on, nothing may be retried
	pressed bool            // the submit step began: what follows runs even after a cancel
	stepSeq int             // the record number of the step being acted on
	phase   string
	// beforeInput is the screen captured before the last input step.
	beforeInput *image.RGBA
}

func (r *Runner) now() time.Time { return clock.Or(r.Clock)() }

// ErrStopped: the delivery stopped before crossing any boundary; nothing was sent.
var ErrStopped = errors.New("stopped before any boundary")

// Result is what a delivery did, for the caller to classify and record.
type Result struct {
	Crossed bool   // a boundary was crossed
	Stopped string // why it stopped early, if it did
	// TitleSources says where the checked title came from: "accessibility_tree+ocr",
	// "accessibility_tree (why OCR could not read it)", or "ocr" (no tree).
	TitleSources string
	// Tree says, for a profile that reads the app's accessibility tree, whether it was
	// read ("read"), or why not and that OCR read in its place.
	Tree string
}

func (r *Runner) progress(format string, args ...any) {
	if r.Progress != nil {
		r.Progress(format, args...)
	}
}

func (r *Runner) kill(name string) {
	if r.Killpoint != nil {
		r.Killpoint(name)
	}
}

// Deliver runs the profile's phases for one file. It returns ErrStopped (wrapped, with
// the reason) when it stopped before any boundary; any other error after a crossing
// leaves the result to the evidence (unknown unless confirmed).
func (r *Runner) Deliver(ctx context.Context) (Result, error) {
	err := r.deliver(ctx)
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		// A step that failed because its ctx ended (the caller cancelled, the lease was
		// lost) names that as its cause, not what the step saw when it stopped waiting.
		err = fmt.Errorf("stopped (%w): %w", context.Cause(ctx), err)
	}
	if err != nil && !r.crossed && r.window.ID != 0 {
		// not_sent needs proof: a last look, after every action, at the chat and the
		// send page. It reads the screen only, so it runs even when ctx was cancelled.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalReadTimeout)
		r.finalReads(fctx)
		cancel()
	}
	res := Result{Crossed: r.crossed, TitleSources: r.titleSources, Tree: r.treeNote}
	if err != nil {
		res.Stopped = err.Error()
		if !r.crossed && !errors.Is(err, ErrStopped) {
			err = fmt.Errorf("%w: %v", ErrStopped, err)
		}
	}
	return res, err
}

func (r *Runner) deliver(ctx context.Context) error {
	if err := r.findWindow(ctx); err != nil {
		return err
	}
	if err := r.probeTree(ctx); err != nil {
		return err
	}
	if err := r.placePage(ctx); err != nil {
		return err
	}
	if err := r.Driver.Activate(ctx, r.window); err != nil {
		return err
	}
	for _, ph := range []struct {
		name  string
		steps []Step
	}{{"clean", r.Profile.Clean}, {"open_conversation", r.Profile.OpenConversation}} {
		if err := r.safePhase(ctx, ph.name, ph.steps); err != nil {
			return err
		}
	}
	if err := r.enterConversation(ctx); err != nil {
		return err
	}
	// The chat is read before the title is judged: even a stop at a wrong title then
	// has a first read to compare the final one with. The title's first read comes
	// before the chat's, which then spans the gap to its second.
	var title titleReads
	if err := r.readTitleAgain(ctx, &title); err != nil {
		title = titleReads{} // the check reads it again, after the chat's read
	}
	before, err := r.observeItems(ctx, "before_send")
	if err != nil {
		return err
	}
	if err := r.checkTitle(ctx, &title); err != nil {
		return err
	}
	r.kill("title_checked")

	if err := r.check(ctx, gate.OpenPicker); err != nil {
		return err
	}
	if err := r.safePhase(ctx, "open_picker", r.Profile.OpenPicker); err != nil {
		r.dismiss(ctx) // the page may have opened: Escape only
		return err
	}
	r.kill("picker_opened")
	proof := r.Profile.SendPageProof(r.Vars.FileName)
	if proof == ProofDifference {
		// The difference's first half: the send page holds no item yet.
		if n, err := r.countMarks(ctx, ""); err != nil || n != 0 {
			r.dismiss(ctx)
			return errors.Join(fmt.Errorf("the send page must hold no item before the file is chosen (it proves the one item by difference); it shows %d: not choosing", n), err)
		}
	}
	if err := r.lookBeforeTheLeap(ctx); err != nil {
		r.dismiss(ctx)
		return err
	}
	if err := r.crossingPhase(ctx, gate.ChooseFile, r.Profile.ChooseFile); err != nil {
		if !r.pressed {
			r.dismiss(ctx)
			return err
		}
		if lerr := r.lookForSentItem(context.WithoutCancel(ctx), before); lerr != nil {
			return errors.Join(err, lerr)
		}
		return err
	}
	r.kill("file_chosen")
	if r.Profile.ChoosingSends() {
		// The file went with its choosing: no send page to check, no send phase; what
		// is read from here on is after the send.
		r.kill("send_pressed")
		r.kill("looking")
		return r.lookForSentItem(context.WithoutCancel(ctx), before)
	}
	if err := r.checkSendPage(ctx, proof); err != nil {
		r.dismiss(ctx)
		return err
	}
	if err := r.crossingPhase(ctx, gate.Send, r.Profile.Send); err != nil {
		if !r.pressed {
			r.dismiss(ctx) // never leave a send page behind; Escape only
			return err
		}
		// Send was pressed and a later step of the phase failed: the look may still
		// confirm the delivery.
		if lerr := r.lookForSentItem(context.WithoutCancel(ctx), before); lerr != nil {
			return errors.Join(err, lerr)
		}
		return err
	}
	r.kill("send_pressed")
	r.kill("looking")
	// Send was pressed: the look for the sent item reads the screen only, and it is
	// what can still confirm the delivery, so it runs to its own timeout even when ctx
	// was cancelled.
	return r.lookForSentItem(context.WithoutCancel(ctx), before)
}

// lookBeforeTheLeap finds, before the file is chosen, every control a step after the
// choosing acts on or waits on (the send button, the control whose going shows the
// send was taken): one that cannot be found or read now stops the delivery before any
// crossing, not_sent, where after the choosing it would use up the key. The look is a
// safe wait for the control's text or node, its states left out (a send button takes
// a click only once a file is chosen, but shows before). A step whose control shows
// only after the choosing says so (AppearsAfterChoosing) and is not looked for.
func (r *Runner) lookBeforeTheLeap(ctx context.Context) error {
	var later []Step
	chosen := false
	for _, s := range r.Profile.ChooseFile {
		if s.Crosses != "" {
			chosen = true // the step that chooses the file: what follows it is looked for
		} else if chosen {
			later = append(later, s)
		}
	}
	for _, s := range append(later, r.Profile.Send...) {
		look, ok := lookFor(s)
		if !ok {
			continue
		}
		if err := r.safeStep(ctx, look); err != nil {
			return fmt.Errorf("%s: %w", look.Name, err)
		}
	}
	return nil
}

// lookFor is the safe wait that finds step s's control before the file is chosen, and
// whether s has one to look for.
func lookFor(s Step) (Step, bool) {
	// Not looked for: a control said to show only after the choosing; a conditional
	// step's (it may never show); one named by the chosen file's name or path; one in a
	// window of its own (which may open only once the file is chosen).
	if s.AppearsAfterChoosing || s.If != nil || s.Window != "" || mentionsFile(s.Text) || (s.Node != nil && mentionsFile(s.Node.Name+s.Node.Text)) {
		return Step{}, false
	}
	look := Step{Name: "look before the leap: " + s.Name, Class: evidence.Safe, Text: s.Text, Region: s.Region,
		Prep: s.Prep, AltPreps: s.AltPreps, Mode: s.Mode, Exact: s.Exact, Confusable: s.Confusable, Timeout: s.Timeout}
	if s.Node != nil {
		n := *s.Node
		n.States = nil
		look.Node = &n
	}
	switch {
	case (s.Do == "click_text" || s.Do == "wait_gone") && s.Text != "":
		look.Do = "wait_text"
	case s.Do == "click_node" || (s.Do == "wait_gone" && s.Node != nil):
		look.Do = "wait_node"
	default:
		return Step{}, false
	}
	return look, true
}

// mentionsFile says whether a step's words name the chosen file.
func mentionsFile(text string) bool {
	return strings.Contains(text, "{{file_name}}") || strings.Contains(text, "{{file_path}}")
}

// finalReadTimeout bounds the last look after a stop.
const finalReadTimeout = 10 * time.Second

// finalReads records the chat and the send page as they are after a stop. A read that
// fails leaves its record out, and the evidence then cannot show not_sent.
func (r *Runner) finalReads(ctx context.Context) {
	if _, err := r.observeItems(ctx, "final"); err != nil {
		r.progress("%-10s %-32s failed: %v", "safe", "read the chat at the end", err)
		return
	}
	if err := r.observeSendPage(ctx, "final"); err != nil {
		r.progress("%-10s %-32s failed: %v", "safe", "read the send page at the end", err)
		return
	}
	if r.Profile.SendPageProof(r.Vars.FileName) == ProofDifference {
		// A file the send page does not name: its items are counted instead.
		if _, err := r.countMarks(ctx, "final"); err != nil {
			r.progress("%-10s %-32s failed: %v", "safe", "count the send page's items at the end", err)
		}
	}
}

// enterConversation, for an app that opens each conversation in a window of its own
// (the profile's conversation_window), waits for exactly one viewable window of the
// app with exactly that title, and makes it the window the rest of the delivery works
// in. The title check that follows still reads the conversation's visible title.
func (r *Runner) enterConversation(ctx context.Context) error {
	if r.Profile.ConversationWindow == "" {
		return nil
	}
	want := r.Vars.expand(r.Profile.ConversationWindow)
	deadline := r.now().Add(r.Profile.Timings.titleDeadline())
	for {
		ws, err := r.Driver.Windows(ctx)
		if err != nil {
			return fmt.Errorf("%w: listing windows: %v", ErrWindow, err)
		}
		var found []Window
		for _, w := range ws {
			if w.Viewable && r.Profile.MatchesProcess(w.Process) && w.Title == want {
				found = append(found, w)
			}
		}
		if len(found) == 1 {
			r.window = found[0]
			r.progress("%-10s %-32s %q", "safe", "the conversation's window", want)
			return r.Driver.Activate(ctx, r.window)
		}
		if r.now().After(deadline) {
			return fmt.Errorf("%w: %d viewable %s windows titled exactly %q after open_conversation; want exactly one", ErrStopped, len(found), r.Profile.App, want)
		}
		if err := clock.Sleep(ctx, 150*time.Millisecond); err != nil {
			return fmt.Errorf("waiting for the conversation's window %q: %w", want, err)
		}
	}
}

func (r *Runner) frame(ctx context.Context) (string, *image.RGBA) {
	img, err := r.Driver.Capture(ctx, r.Driver.Bounds())
	if err != nil {
		return "", nil
	}
	h, err := r.Rec.Frame(img)
	if err != nil {
		return "", img
	}
	return h, img
}

func (r *Runner) appendRecord(rec evidence.Record) (string, error) {
	h, err := r.Rec.Append(rec)
	if err != nil {
		return "", fmt.Errorf("writing evidence: %w", err)
	}
	return h, nil
}

// check asks the gate at a boundary and records the answer.
func (r *Runner) check(ctx context.Context, b gate.Boundary) error {
	err := r.Gate.Check(ctx, r.Permit, b)
	g := &evidence.GateUse{Action: "check", Boundary: string(b), Token: r.Permit.Token(), Decision: "ok"}
	if err != nil {
		g.Decision, g.Reason = "refused", err.Error()
	}
	if _, rerr := r.appendRecord(evidence.Record{Kind: evidence.KindGate, Gate: g}); rerr != nil {
		return rerr
	}
	return err
}

func (r *Runner) safePhase(ctx context.Context, phase string, steps []Step) error {
	r.phase = phase
	for _, s := range steps {
		if err := r.safeStep(ctx, s); err != nil {
			return fmt.Errorf("%s: %s: %w", phase, s.Name, err)
		}
	}
	return nil
}

// safeStep runs a step that cannot submit.
func (r *Runner) safeStep(ctx context.Context, s Step) error {
	if s.Class != evidence.Safe {
		return fmt.Errorf("step %q is %s: it needs a pass", s.Name, s.Class)
	}
	return r.run(ctx, s)
}

// crossingPhase runs a boundary's phase: its safe steps, and for its one crossing step:
// check, write the step to the evidence, cross in the store with the chain head, then
// run the step with the pass the crossing produced.
func (r *Runner) crossingPhase(ctx context.Context, b gate.Boundary, steps []Step) error {
	r.phase = string(b)
	for _, s := range steps {
		if r.pressed {
			// After the submit step, the phase's remaining steps (waits for the app to
			// take it) finish on their own timeouts even when ctx was cancelled: they
			// are what the evidence needs to tell what happened.
			ctx = context.WithoutCancel(ctx)
		}
		if s.Class == evidence.Safe {
			if err := r.safeStep(ctx, s); err != nil {
				return fmt.Errorf("%s: %s: %w", b, s.Name, err)
			}
			continue
		}
		// A crossing key that would go to another window stops here, before the
		// crossing: nothing was sent (the act itself asks again right before its event).
		if err := r.stepFocus(ctx, s); err != nil {
			return fmt.Errorf("%s: %s: %w", b, s.Name, err)
		}
		if err := r.check(ctx, b); err != nil {
			return err
		}
		pass, err := r.cross(ctx, b, s)
		if err != nil {
			return err
		}
		passes := []*store.Pass{pass}
		if s.Crosses == choosingSends {
			// Choosing the file sends it: send is crossed too, durably, before the act.
			if err := r.check(ctx, gate.Send); err != nil {
				return err
			}
			also, err := r.crossAlso(ctx, gate.Send)
			if err != nil {
				return err
			}
			passes = append(passes, also)
		}
		if err := r.crossingStep(ctx, s, passes...); err != nil {
			return fmt.Errorf("%s: %s: %w", b, s.Name, err)
		}
	}
	return nil
}

// cross makes the crossing durable: the step is written to the evidence first, then the
// store records the crossing with the chain head that includes it.
func (r *Runner) cross(ctx context.Context, b gate.Boundary, s Step) (*store.Pass, error) {
	before, _ := r.frame(ctx)
	head, err := r.appendRecord(evidence.Record{Kind: evidence.KindStep, Intent: s.Name, Class: s.Class, Before: before, Inputs: plannedInputs(s, r.Vars)})
	if err != nil {
		return nil, err
	}
	r.stepSeq = r.Rec.Seq()
	return r.gateCross(ctx, b, head)
}

// crossAlso crosses a second boundary for the step just written (a step that crosses
// two), with the chain head as it is now.
func (r *Runner) crossAlso(ctx context.Context, b gate.Boundary) (*store.Pass, error) {
	return r.gateCross(ctx, b, r.Rec.Head())
}

func (r *Runner) gateCross(ctx context.Context, b gate.Boundary, head string) (*store.Pass, error) {
	pass, err := r.Gate.Cross(ctx, r.Permit, b, head)
	g := &evidence.GateUse{Action: "cross", Boundary: string(b), Token: r.Permit.Token(), Decision: "crossed"}
	if err != nil {
		g.Decision, g.Reason = "refused", err.Error()
	} else {
		r.crossed = true
	}
	if _, rerr := r.appendRecord(evidence.Record{Kind: evidence.KindGate, Gate: g}); rerr != nil && err == nil {
		err = rerr
	}
	return pass, err
}

// crossingStep runs a may_submit or submit step. It takes the pass that only a durable
// crossing produces and spends it before sending any input: without one, nothing runs.
func (r *Runner) crossingStep(ctx context.Context, s Step, passes ...*store.Pass) error {
	var crossed []string
	for _, pass := range passes {
		if err := pass.Use(); err != nil {
			return err
		}
		crossed = append(crossed, string(pass.Boundary()))
	}
	if strings.Join(crossed, ",") != s.Crosses {
		return fmt.Errorf("the passes are for %s, the step crosses %s", strings.Join(crossed, ","), s.Crosses)
	}
	if s.Class == evidence.Submit {
		r.pressed = true
	}
	return r.act(ctx, s, r.stepSeq)
}

// run writes a safe step's record, then acts.
func (r *Runner) run(ctx context.Context, s Step) error {
	if s.If != nil {
		if present, err := r.condition(ctx, s); err != nil || !present {
			return err // skipped: the evidence holds the condition as read
		}
	}
	before, img := r.frame(ctx)
	if input, _ := stepKind(s.Do); input {
		r.beforeInput = img // what an after_change wait compares with
	}
	if _, err := r.appendRecord(evidence.Record{Kind: evidence.KindStep, Intent: s.Name, Class: s.Class, Before: before, Inputs: plannedInputs(s, r.Vars)}); err != nil {
		return err
	}
	r.stepSeq = r.Rec.Seq()
	return r.act(ctx, s, r.stepSeq)
}

func (r *Runner) timeout(s Step) time.Duration {
	if s.Timeout.Duration > 0 {
		return s.Timeout.Duration
	}
	return r.Profile.Timings.stepTimeout()
}

func ptr[T any](v T) *T { return &v }

// DryRun opens the conversation and reads its title, crossing no boundary: it reports
// whether the visible title matches.
func (r *Runner) DryRun(ctx context.Context) (bool, error) {
	if err := r.findWindow(ctx); err != nil {
		return false, err
	}
	if err := r.probeTree(ctx); err != nil {
		return false, err
	}
	if err := r.placePage(ctx); err != nil {
		return false, err
	}
	if err := r.Driver.Activate(ctx, r.window); err != nil {
		return false, err
	}
	if err := r.safePhase(ctx, "clean", r.Profile.Clean); err != nil {
		return false, err
	}
	if err := r.safePhase(ctx, "open_conversation", r.Profile.OpenConversation); err != nil {
		return false, err
	}
	if err := r.enterConversation(ctx); err != nil {
		return false, err
	}
	err := r.checkTitle(ctx, &titleReads{})
	return err == nil, err
}

func (r *Runner) dispatchID() string {
	if r.Permit == nil {
		return "dry-run"
	}
	return r.Permit.DispatchID()
}

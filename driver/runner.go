package driver

import (
	"context"
	"errors"
	"fmt"
	"image"
	"regexp"
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
	crossed bool // a crossing was made: from here on, nothing may be retried
	pressed bool // the submit step began: what follows runs even after a cancel
	stepSeq int  // the record number of the step being acted on
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

// findWindow picks the app's main window by process, title and visibility, and refuses
// when that leaves none or more than one.
func (r *Runner) findWindow(ctx context.Context) error {
	w, err := FindWindow(ctx, r.Driver, r.Profile)
	if err == nil {
		r.window = w
	}
	return err
}

// FindWindow finds the profile's one main window on the display: viewable, of the
// profile's process, with its title. None, or more than one, is ErrWindow.
func FindWindow(ctx context.Context, d Driver, p *Profile) (Window, error) {
	ws, err := d.Windows(ctx)
	if err != nil {
		return Window{}, fmt.Errorf("%w: listing windows: %v", ErrWindow, err)
	}
	var found []Window
	for _, w := range ws {
		if w.Viewable && p.MatchesProcess(w.Process) && p.matchesTitle(w.Title) {
			found = append(found, w)
		}
	}
	switch len(found) {
	case 0:
		return Window{}, fmt.Errorf("%w: no viewable %s window titled %q: is %s running on this display?", ErrWindow, p.Process, p.WindowTitle, p.App)
	case 1:
		return found[0], nil
	}
	return Window{}, fmt.Errorf("%w: %d viewable %s windows titled %q; refusing to guess which one", ErrWindow, len(found), p.Process, p.WindowTitle)
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
		sleep(ctx, 150*time.Millisecond)
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

// condition reads a conditional step's text once and records what it saw.
func (r *Runner) condition(ctx context.Context, s Step) (bool, error) {
	c := s.If
	region, err := r.region(ctx, Step{Region: c.Region, Window: c.Window})
	if err != nil {
		return false, err
	}
	look, err := r.Reader.Read(ctx, region, c.Prep, ocrMode(c.Mode))
	if err != nil {
		return false, err
	}
	text := r.Vars.expand(c.Text)
	_, _, present := vision.FindPhrase(look.Words, text)
	h, _ := r.Rec.Frame(look.Frame)
	_, err = r.appendRecord(evidence.Record{Kind: evidence.KindObserve, Intent: "condition of " + s.Name, After: h, OCR: ocrWords(h, region, look.Words),
		Observed: &evidence.Observation{What: "condition", DispatchID: r.dispatchID(), Title: text, Present: &present}})
	if err == nil && !present {
		r.progress("%-10s %-32s skipped: %q does not show", "safe", s.Name, text)
	}
	return present, err
}

// plannedInputs are the input events a step will send, as evidence records them.
func plannedInputs(s Step, v Vars) []evidence.Input {
	switch s.Do {
	case "key":
		return []evidence.Input{evidence.KeyInput(s.Keys)}
	case "type_text":
		return []evidence.Input{evidence.TypedText(v.expand(s.Text))}
	case "type_path":
		return []evidence.Input{evidence.TypedPath(v.FilePath)}
	case "escape_window", "escape_text":
		return []evidence.Input{evidence.KeyInput("Escape")}
	case "read_field":
		return fieldReadInputs()
	}
	return nil // clicks are recorded with their position in the result
}

func (r *Runner) timeout(s Step) time.Duration {
	if s.Timeout.Duration > 0 {
		return s.Timeout.Duration
	}
	return r.Profile.Timings.stepTimeout()
}

// area is where a Read looks: its Region in the main window, or in the window it names.
func (r *Runner) area(ctx context.Context, rd Read) (image.Rectangle, error) {
	return r.region(ctx, Step{Region: &rd.Region, Window: rd.Window})
}

// region is where a step looks: its Region in the app's main window, or in the window
// the step names.
func (r *Runner) region(ctx context.Context, s Step) (image.Rectangle, error) {
	w := r.window
	if s.Window != "" {
		var ok bool
		var err error
		if w, ok, err = r.windowTitled(ctx, s.Window); err != nil || !ok {
			return image.Rectangle{}, fmt.Errorf("no window titled %q to look in (%v)", s.Window, err)
		}
	}
	if s.Region == nil {
		return w.Bounds, nil
	}
	if s.Region.From != nil {
		return r.fromAnchor(ctx, w, *s.Region)
	}
	return s.Region.In(w.Bounds), nil
}

// fromAnchor places a region from its anchor's text, read once where the anchor says:
// not found, or found more than once, is an error (the step then stops).
func (r *Runner) fromAnchor(ctx context.Context, w Window, reg Region) (image.Rectangle, error) {
	f := reg.From
	search := f.Region.In(w.Bounds)
	look, err := r.Reader.Read(ctx, search, f.Prep, vision.Sparse)
	if err != nil {
		return image.Rectangle{}, err
	}
	a := vision.Anchor{Text: r.Vars.expand(f.Text)}
	box, _, ok := vision.FindPhrase(look.Words, a.Text)
	switch n := a.Occurrences(look.Words); {
	case !ok:
		return image.Rectangle{}, fmt.Errorf("%w: the region's anchor %q does not show", vision.ErrNotFound, a.Text)
	case n > 1:
		return image.Rectangle{}, fmt.Errorf("the region's anchor %q shows %d times: refusing to guess where the region is", a.Text, n)
	}
	at := box.Min.Add(image.Pt(reg.X, reg.Y))
	placed := image.Rect(at.X, at.Y, at.X+reg.W, at.Y+reg.H).Intersect(w.Bounds)
	if placed.Empty() {
		return image.Rectangle{}, fmt.Errorf("the region placed from %q falls outside the window", a.Text)
	}
	return placed, nil
}

// matcher compares OCR words with wanted words as the step asks.
func matcher(s Step) func(got, want string) bool {
	switch {
	case s.WholeLine:
		return evidence.PathMatches
	case s.Suffix, s.Confusable:
		return evidence.NameMatches
	}
	return nil
}

// act performs a step and records its result: the after frame, what OCR found, the
// clicks sent and any error.
func (r *Runner) act(ctx context.Context, s Step, stepSeq int) error {
	start := r.now()
	res := evidence.Record{Kind: evidence.KindResult, Step: stepSeq}
	err := r.perform(ctx, s, &res)
	if err != nil {
		res.Error = err.Error()
	}
	res.After, _ = r.frame(ctx)
	if _, rerr := r.appendRecord(res); rerr != nil && err == nil {
		err = rerr
	}
	status := "ok"
	if err != nil {
		status = "failed: " + err.Error()
	}
	r.progress("%-10s %-32s %s (%.1fs)", s.Class, s.Name, status, r.now().Sub(start).Seconds())
	return err
}

func ocrWords(frame string, region image.Rectangle, ws []vision.Word) []evidence.OCRRegion {
	out := evidence.OCRRegion{Frame: frame, Region: box(region)}
	for _, w := range ws {
		out.Words = append(out.Words, evidence.OCRWord{Text: w.Text, Box: box(w.Box), Confidence: w.Confidence})
	}
	return []evidence.OCRRegion{out}
}

func box(r image.Rectangle) evidence.Box {
	return evidence.Box{X: r.Min.X, Y: r.Min.Y, W: r.Dx(), H: r.Dy()}
}

// focusWait is how long a keyboard step waits for the keyboard focus to arrive in its
// window: a window manager focuses a newly mapped dialog a moment after it maps.
const focusWait = 2 * time.Second

// ErrFocus: the keyboard focus was not in the window a keyboard step types into.
var ErrFocus = errors.New("keyboard focus elsewhere")

// stepFocus confirms that the keyboard focus is in the window a keyboard step types
// into: the one it names, else the app's. Other steps need nothing.
func (r *Runner) stepFocus(ctx context.Context, s Step) error {
	switch s.Do {
	case "key", "type_text", "type_path", "escape_text", "read_field":
	default:
		return nil
	}
	if s.Window == "" || s.Do == "escape_text" {
		return r.focusOn(ctx, r.window)
	}
	return r.focusOn(ctx, Window{Title: s.Window})
}

// focusOn waits (focusWait at most) until the keyboard focus is in want: that window
// by ID, or, given only a title, the app's viewable window of that title. Keys sent
// anywhere else could land in another conversation or another app, so it stops
// before the input instead, naming where the focus was.
func (r *Runner) focusOn(ctx context.Context, want Window) error {
	deadline := r.now().Add(focusWait)
	for {
		if ctx.Err() != nil {
			return fmt.Errorf("stopped before the input: %w", context.Cause(ctx))
		}
		target := want
		if target.ID == 0 {
			w, ok, err := r.windowTitled(ctx, want.Title)
			if err != nil {
				return err
			}
			if ok {
				target = w
			}
		}
		got, err := r.Driver.Focused(ctx)
		if err != nil {
			return fmt.Errorf("%w: reading the keyboard focus: %v", ErrFocus, err)
		}
		if target.ID != 0 && got.ID == target.ID {
			return nil
		}
		if r.now().After(deadline) {
			where := "no window"
			if got.ID != 0 {
				where = fmt.Sprintf("%q (window %#x, %s)", got.Title, got.ID, got.Process)
			}
			return fmt.Errorf("%w: the keyboard focus is in %s, not in %q that the step types into: stopped before the input", ErrFocus, where, want.Title)
		}
		sleep(ctx, 20*time.Millisecond)
	}
}

func (r *Runner) perform(ctx context.Context, s Step, res *evidence.Record) error {
	d := r.Driver
	if err := r.stepFocus(ctx, s); err != nil {
		return err
	}
	switch s.Do {
	case "key":
		return d.Key(ctx, s.Keys)
	case "type_text":
		return d.Type(ctx, r.Vars.expand(s.Text))
	case "type_path":
		return d.Type(ctx, r.Vars.FilePath)
	case "click_offset", "hover_offset":
		p := image.Pt(s.Offset.X, s.Offset.Y)
		if p.X < 0 {
			p.X += r.window.Bounds.Dx()
		}
		if p.Y < 0 {
			p.Y += r.window.Bounds.Dy()
		}
		p = p.Add(r.window.Bounds.Min)
		res.Target = &evidence.Target{Method: "window_offset", Window: r.window.Title}
		if s.Do == "hover_offset" {
			res.Inputs = []evidence.Input{evidence.MoveInput(p.X, p.Y)}
			return d.Move(ctx, p)
		}
		res.Inputs = []evidence.Input{evidence.ClickInput(p.X, p.Y)}
		return d.Click(ctx, p)
	case "click_text", "wait_text", "hover_text":
		if s.Node != nil && r.treeOK {
			if s.Do == "click_text" {
				return r.clickNode(ctx, s, res)
			}
			return r.waitNode(ctx, s, res)
		}
		region, err := r.region(ctx, s)
		if err != nil {
			return err
		}
		if searchesForClick(s) && r.Profile.chatShows(r.phase) && r.Profile.Chat.Window == "" && r.Profile.Chat.Region.From == nil &&
			region.Overlaps(r.Profile.Chat.Region.In(r.window.Bounds)) {
			return fmt.Errorf("the step searches the chat region for %q while the conversation shows: a peer's message quoting it could be clicked; refusing (narrow the profile's region to the control)", s.Text)
		}
		anchor := vision.Anchor{Text: r.Vars.expand(s.Text), Exact: s.Exact, Prep: s.Prep, AltPreps: s.AltPreps, Mode: ocrMode(s.Mode), Match: matcher(s), LineSuffix: s.Suffix, WholeLine: s.WholeLine}
		if s.AfterChange {
			if r.beforeInput == nil {
				return fmt.Errorf("the step waits for a change the last input made, and no frame from before an input was captured: refusing to pass it")
			}
			h := vision.PixelHash(vision.Crop(r.beforeInput, region))
			anchor.Baseline = &h
		}
		found, err := r.Reader.WaitStable(ctx, region, anchor, r.timeout(s))
		if found.Look.Frame != nil {
			if h, ferr := r.Rec.Frame(found.Look.Frame); ferr == nil {
				res.OCR = ocrWords(h, region, found.Look.Words)
			}
		}
		if err != nil {
			return err
		}
		res.Target = &evidence.Target{Method: "ocr_anchor", Words: wordTexts(found.Words), Box: ptr(box(found.Box)), Confidence: meanConfidence(found.Words)}
		if s.Do == "wait_text" {
			return nil
		}
		if n := anchor.Occurrences(found.Look.Words); n > 1 {
			return fmt.Errorf("%q shows %d times in the step's region: refusing to guess which one to click (a message could be quoting it; narrow the profile's region to the control)", anchor.Text, n)
		}
		c := image.Pt((found.Box.Min.X+found.Box.Max.X)/2, (found.Box.Min.Y+found.Box.Max.Y)/2)
		if s.Do == "hover_text" {
			res.Inputs = []evidence.Input{evidence.MoveInput(c.X, c.Y)}
			return d.Move(ctx, c)
		}
		res.Inputs = []evidence.Input{evidence.ClickInput(c.X, c.Y)}
		return d.Click(ctx, c)
	case "read_field":
		return r.readField(ctx, s, res)
	case "wait_gone":
		if s.Node != nil && r.treeOK {
			_, err := r.awaitNode(ctx, s, false, res)
			return err
		}
		return r.waitGone(ctx, s, res)
	case "wait_node", "wait_node_gone":
		return r.waitNode(ctx, s, res)
	case "click_node":
		return r.clickNode(ctx, s, res)
	case "wait_window", "wait_window_gone":
		return r.waitWindow(ctx, s.Window, s.Do == "wait_window", r.timeout(s))
	case "escape_window":
		for i := 0; i < max(s.Repeat, 1); i++ {
			w, ok, err := r.windowTitled(ctx, s.Window)
			if err != nil || !ok {
				return err
			}
			if err := d.Activate(ctx, w); err != nil {
				return err
			}
			if err := r.focusOn(ctx, w); err != nil {
				return err
			}
			if err := d.Key(ctx, "Escape"); err != nil {
				return err
			}
			res.Inputs = append(res.Inputs, evidence.KeyInput("Escape"))
			if err := r.waitWindow(ctx, s.Window, false, r.Profile.Timings.windowClose()); err == nil {
				return d.Activate(ctx, r.window)
			}
		}
		return fmt.Errorf("a window titled %q is still open after %d Escape(s)", s.Window, max(s.Repeat, 1))
	case "escape_text":
		region, err := r.region(ctx, s)
		if err != nil {
			return err
		}
		anchor := vision.Anchor{Text: r.Vars.expand(s.Text), Prep: s.Prep, AltPreps: s.AltPreps, Mode: ocrMode(s.Mode)}
		for i := 0; i <= max(s.Repeat, 1); i++ {
			if _, shows, err := r.Reader.Find(ctx, region, anchor); err != nil || !shows {
				return err
			}
			if i == max(s.Repeat, 1) {
				return fmt.Errorf("%q still shows after %d Escape(s)", s.Text, i)
			}
			if i > 0 {
				if err := r.focusOn(ctx, r.window); err != nil {
					return err
				}
			}
			if err := d.Key(ctx, "Escape"); err != nil {
				return err
			}
			res.Inputs = append(res.Inputs, evidence.KeyInput("Escape"))
			sleep(ctx, r.Profile.Timings.escapeSettle())
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

func wordTexts(ws []vision.Word) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.Text
	}
	return out
}

func meanConfidence(ws []vision.Word) float64 {
	if len(ws) == 0 {
		return 0
	}
	var s float64
	for _, w := range ws {
		s += w.Confidence
	}
	return s / float64(len(ws))
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// fieldReadInputs are the keys Driver.FieldText presses: ctrl+a to select the text, End
// to leave the field as it was.
func fieldReadInputs() []evidence.Input {
	return []evidence.Input{evidence.KeyInput("ctrl+a"), evidence.KeyInput("End")}
}

// ErrFieldText: a field read back through the X selection did not hold the text the
// step wants (or could not be read).
var ErrFieldText = errors.New("field text")

// readField selects all of the focused field's text in the step's dialog and reads it
// back through the X selection: the app's own characters, so a key it lost anywhere in
// a typed path stops the delivery here, before the step that would choose the file.
func (r *Runner) readField(ctx context.Context, s Step, res *evidence.Record) error {
	w, ok, err := r.windowTitled(ctx, s.Window)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: no window titled %q to read the field of", ErrFieldText, s.Window)
	}
	within, cancel := context.WithTimeout(ctx, r.timeout(s))
	defer cancel()
	got, err := r.Driver.FieldText(within, w)
	if got != "" || err == nil { // a text read and then refused is evidence too
		res.Target = &evidence.Target{Method: "x_selection", Words: []string{got}, Window: w.Title}
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFieldText, err)
	}
	res.Inputs = fieldReadInputs()
	if want := r.Vars.expand(s.Text); got != want {
		return fmt.Errorf("%w: the field in %q holds %q, not %q: stopped before anything else is pressed", ErrFieldText, w.Title, got, want)
	}
	return nil
}

func (r *Runner) waitGone(ctx context.Context, s Step, res *evidence.Record) error {
	region, err := r.region(ctx, s)
	if err != nil {
		return err
	}
	anchor := vision.Anchor{Text: r.Vars.expand(s.Text), Prep: s.Prep, AltPreps: s.AltPreps, Mode: ocrMode(s.Mode)}
	look, err := r.Reader.WaitGone(ctx, region, anchor, r.timeout(s))
	if look.Frame != nil {
		if h, ferr := r.Rec.Frame(look.Frame); ferr == nil {
			res.OCR = ocrWords(h, region, look.Words)
		}
	}
	return err
}

func (r *Runner) windowTitled(ctx context.Context, prefix string) (Window, bool, error) {
	ws, err := r.Driver.Windows(ctx)
	if err != nil {
		return Window{}, false, err
	}
	for _, w := range ws {
		if w.Viewable && r.Profile.MatchesProcess(w.Process) && strings.HasPrefix(w.Title, prefix) {
			return w, true, nil
		}
	}
	return Window{}, false, nil
}

// waitWindow waits for a window to be there (and to hold still at the same place for
// two looks), or to be gone.
func (r *Runner) waitWindow(ctx context.Context, prefix string, present bool, timeout time.Duration) error {
	deadline := r.now().Add(timeout)
	var last *image.Rectangle
	for {
		w, ok, err := r.windowTitled(ctx, prefix)
		if err != nil {
			return err
		}
		if ok == present {
			if !present {
				return nil
			}
			if last != nil && *last == w.Bounds {
				return nil
			}
			last = &w.Bounds
		} else {
			last = nil
		}
		if r.now().After(deadline) {
			if present {
				return fmt.Errorf("no window titled %q appeared within %v", prefix, timeout)
			}
			return fmt.Errorf("the window titled %q is still open after %v", prefix, timeout)
		}
		sleep(ctx, r.Reader.PollInterval())
	}
}

// observeItems reads the chat for items named like the file, the conversation's title
// and whether the view is at its end, and records what it read.
func (r *Runner) observeItems(ctx context.Context, phase string) ([]evidence.Item, error) {
	o, err := r.readChat(ctx, phase, nil)
	if err != nil {
		return nil, err
	}
	return o.Items, r.recordChat(o)
}

// chatRead is one read of the chat, not yet recorded.
type chatRead struct {
	phase   string
	look    vision.Look
	pix     uint64      // the pixel hash of look.Frame
	reused  bool        // the words are an earlier read's of the same pixels
	end     *image.RGBA // the end-blank region's capture, when the profile has one
	endRect image.Rectangle
	title   string
	Items   []evidence.Item
	atEnd   bool
}

// readChat reads the chat from a capture that held still. A capture whose pixels equal
// those an earlier read (prev, when not nil) read shows the same words and items: OCR
// does not run on them again.
func (r *Runner) readChat(ctx context.Context, phase string, prev *chatRead) (chatRead, error) {
	c := r.Profile.Chat
	region, err := r.area(ctx, c)
	if err != nil {
		return chatRead{}, err
	}
	frame, pix, err := r.Reader.CaptureSettled(ctx, region)
	if err != nil {
		return chatRead{}, err
	}
	out := chatRead{phase: phase, pix: pix}
	if prev != nil && prev.pix == pix && prev.look.Region == region {
		out.look, out.Items, out.reused = vision.Look{Region: region, Frame: frame, Words: prev.look.Words}, prev.Items, true
	} else {
		if out.look, err = r.Reader.ReadFrame(ctx, frame, region, c.Prep, c.OCRMode()); err != nil {
			return chatRead{}, err
		}
		out.Items = r.items(out.look)
	}
	if cf := r.confirm(); cf != nil {
		out.endRect = cf.EndBlank.In(r.window.Bounds)
		if out.end, err = r.Driver.Capture(ctx, out.endRect); err != nil {
			return chatRead{}, err
		}
		out.atEnd = blank(out.end)
	}
	// A title whose two sources disagree, or that the tree cannot give, is no title: the
	// read confirms nothing, and still shows what the chat holds.
	title, err := r.readTitle(ctx)
	switch {
	case errors.Is(err, ErrNoTree) || errors.Is(err, errTitleAmbiguous):
	case err != nil:
		return chatRead{}, err
	case !title.tree || title.check.Verdict != vision.Disagree:
		out.title = title.text
	}
	return out, nil
}

// rereadChat reads a chat capture that did not show the new item again with each of
// the profile's other preparations, and returns the first read that shows it (or o).
// It stops early, returning o, once the other witness (when not nil) has confirmed.
func (r *Runner) rereadChat(ctx context.Context, o chatRead, before []evidence.Item, witnessed <-chan struct{}) (chatRead, error) {
	for _, prep := range r.Profile.Chat.AltPreps {
		if isClosed(witnessed) {
			break
		}
		look, err := r.Reader.ReadFrame(ctx, o.look.Frame, o.look.Region, prep, r.Profile.Chat.OCRMode())
		if err != nil {
			return o, err
		}
		alt := o
		alt.look, alt.Items = look, r.items(look)
		if r.showsNew(alt, before) {
			return alt, nil
		}
	}
	return o, nil
}

func (r *Runner) recordChat(o chatRead) error {
	h, _ := r.Rec.Frame(o.look.Frame)
	ocr := ocrWords(h, o.look.Region, o.look.Words)
	if o.end != nil {
		eh, _ := r.Rec.Frame(o.end)
		ocr = append(ocr, evidence.OCRRegion{Frame: eh, Region: box(o.endRect)}) // no words: blank or not is in the frame
	}
	_, err := r.appendRecord(evidence.Record{Kind: evidence.KindObserve, Intent: "look for sent items", After: h, OCR: ocr,
		Observed: &evidence.Observation{What: "sent_items", Phase: o.phase, DispatchID: r.dispatchID(), Title: o.title, Items: o.Items,
			SizesShown: r.Profile.SizesShown, AtBottom: o.atEnd}})
	return err
}

// observeSendPage records whether the send page is open and which items named like the
// file it holds.
func (r *Runner) observeSendPage(ctx context.Context, phase string) error {
	var items []evidence.Item
	var ocr []evidence.OCRRegion
	after := ""
	open := true
	if m := r.Profile.SendPageMark; m != nil {
		region := m.Region.In(r.window.Bounds)
		found, shows, err := r.Reader.Find(ctx, region, vision.Anchor{Text: m.Text, Prep: m.Prep, AltPreps: m.AltPreps})
		if err != nil {
			return err
		}
		after, _ = r.Rec.Frame(found.Look.Frame)
		ocr = ocrWords(after, region, found.Look.Words)
		open = shows
	}
	if open && r.treeSendPage() {
		page, err := r.readPageTree(ctx)
		if err != nil {
			return err
		}
		items = page.items
	} else if open {
		p := r.Profile.SendPage
		region, err := r.area(ctx, p)
		if err != nil {
			return err
		}
		look, err := r.Reader.Read(ctx, region, p.Prep, p.OCRMode())
		if err != nil {
			return err
		}
		items = r.items(look)
		after, _ = r.Rec.Frame(look.Frame)
		ocr = append(ocr, ocrWords(after, region, look.Words)...)
	}
	_, err := r.appendRecord(evidence.Record{Kind: evidence.KindObserve, Intent: "read the send page", After: after, OCR: ocr,
		Observed: &evidence.Observation{What: "send_page_items", Phase: phase, DispatchID: r.dispatchID(), Items: items}})
	return err
}

// countMarks reads the send page and records how many item marks it shows (the
// profile's item_mark), for a proof by difference.
func (r *Runner) countMarks(ctx context.Context, phase string) (int, error) {
	p := r.Profile.SendPage
	region, err := r.area(ctx, p)
	if err != nil {
		return 0, err
	}
	look, err := r.Reader.Read(ctx, region, p.Prep, p.OCRMode())
	if err != nil {
		return 0, err
	}
	mark := regexp.MustCompile(r.Profile.ItemMark) // validated with the profile
	n := 0
	for _, l := range vision.Lines(look.Words) {
		n += len(mark.FindAllString(l.Text, -1))
	}
	h, _ := r.Rec.Frame(look.Frame)
	_, err = r.appendRecord(evidence.Record{Kind: evidence.KindObserve, Intent: "count the send page's items", After: h, OCR: ocrWords(h, region, look.Words),
		Observed: &evidence.Observation{What: "send_page_marks", Phase: phase, DispatchID: r.dispatchID(), Marks: &n}})
	return n, err
}

// checkSendPage verifies that the send page holds exactly one item, ours: by its name
// (and size), or by difference (no mark before choose_file, exactly one now).
func (r *Runner) checkSendPage(ctx context.Context, proof string) error {
	if proof == ProofDifference {
		n, err := r.countMarks(ctx, "")
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("the send page held no item before the file was chosen and must hold exactly one now; it shows %d: not sending", n)
		}
		r.progress("%-10s %-32s one item, none before: ok", "safe", "check the send page")
		return nil
	}
	if r.treeSendPage() {
		return r.checkPageTree(ctx)
	}
	p := r.Profile.SendPage
	region, err := r.area(ctx, p)
	if err != nil {
		return err
	}
	look, err := r.Reader.Read(ctx, region, p.Prep, p.OCRMode())
	if err != nil {
		return err
	}
	items := r.items(look)
	sizes := sizePattern.FindAllString(lineText(look.Words), -1)
	h, _ := r.Rec.Frame(look.Frame)
	if _, err := r.appendRecord(evidence.Record{Kind: evidence.KindObserve, Intent: "check the send page", After: h, OCR: ocrWords(h, region, look.Words),
		Observed: &evidence.Observation{What: "send_page_items", DispatchID: r.dispatchID(), Items: items}}); err != nil {
		return err
	}
	if len(items) != 1 || len(sizes) > 1 {
		return fmt.Errorf("the send page must hold exactly one item, %s; it shows %d item(s) named so and %d size(s): not sending", r.Vars.FileName, len(items), len(sizes))
	}
	if !evidence.SizeMatches(items[0].Size, r.Vars.Size) {
		return fmt.Errorf("the send page shows %s with size %q, not %d bytes: not sending", r.Vars.FileName, items[0].Size, r.Vars.Size)
	}
	r.progress("%-10s %-32s %s %s ok", "safe", "check the send page", items[0].Name, items[0].Size)
	return nil
}

// dismiss closes the send page without sending, with Escape only.
//
// It runs even when ctx was cancelled (a cancel must not leave a send page holding the
// file behind), on a context of its own with a deadline.
func (r *Runner) dismiss(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dismissTimeout)
	defer cancel()
	for _, s := range r.Profile.Dismiss {
		r.run(ctx, s)
	}
}

// dismissTimeout bounds the Escape-only cleanup after a stop.
const dismissTimeout = 10 * time.Second

// lookForSentItem waits for a new finished item of ours with the file's name (more of
// them than before the send), then reads again after the profile's settle time: the
// classifier confirms only an item held in two reads that far apart. It records those
// reads, or the last one. Not finding one is not an error: the evidence then reads as
// unknown.
func (r *Runner) lookForSentItem(ctx context.Context, before []evidence.Item) error {
	timeout := r.Profile.SentItemWait()
	settle := time.Duration(0)
	if c := r.confirm(); c != nil {
		settle = c.Settle.Duration
	}
	var witnessed <-chan struct{} // nil, never closed, without a witness
	if r.Witness != nil {
		witnessed = r.Witness()
	}
	start := r.now()
	var last, prev *chatRead
	held, elsewhere := false, false
	for !held && !elsewhere {
		o, err := r.readChat(ctx, "after_send", prev)
		if err == nil && !o.reused && !r.showsNew(o, before) {
			o, err = r.rereadChat(ctx, o, before, witnessed)
		}
		if err == nil {
			last, prev = &o, &o
			if r.showsNew(o, before) {
				if err := r.recordChat(o); err != nil {
					return err
				}
				last = nil
				if elsewhere = settleOrWitness(ctx, settle, witnessed); elsewhere {
					break
				}
				if o2, err := r.readChat(ctx, "after_send", &o); err == nil {
					last, held = &o2, r.showsNew(o2, before)
				}
			}
		}
		elsewhere = isClosed(witnessed)
		if held || elsewhere || r.now().Sub(start) > timeout || ctx.Err() != nil {
			break
		}
		sleep(ctx, 100*time.Millisecond)
	}
	var err error
	n := 0
	if last != nil {
		err, n = r.recordChat(*last), len(last.Items)
	}
	by := ""
	if elsewhere && !held {
		by = ", the other witness confirmed it"
	}
	r.progress("%-10s %-32s %d item(s) named %s, %d before, held %v%s (%.1fs)", "safe", "look for the sent item", n, r.Vars.FileName, len(before), held, by, r.now().Sub(start).Seconds())
	return err
}

// settleOrWitness waits the settle time, and reports true if the witness confirmed
// first.
func settleOrWitness(ctx context.Context, settle time.Duration, witnessed <-chan struct{}) bool {
	t := time.NewTimer(settle)
	defer t.Stop()
	select {
	case <-witnessed:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return isClosed(witnessed)
}

// isClosed: c is closed (never, for a nil channel).
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// showsNew is the runner's cue to stop looking: more finished items of ours with the
// file's size than items that could have been ours before, with the view at its end.
// The classifier decides from the records, with its own rules.
func (r *Runner) showsNew(o chatRead, before []evidence.Item) bool {
	n := 0
	for _, it := range o.Items {
		if it.Ours && it.Finished && evidence.SizeMatches(it.Size, r.Vars.Size) && (it.Size != "" || !r.Profile.SizesShown) {
			n++
		}
	}
	return o.atEnd && o.title == r.Vars.Title && n > countSized(before, r.Vars.Size, false)
}

func countSized(items []evidence.Item, size int64, needSize bool) int {
	n := 0
	for _, it := range items {
		if evidence.SizeMatches(it.Size, size) && (it.Size != "" || !needSize) {
			n++
		}
	}
	return n
}

// DryRun opens the conversation and reads its title, crossing no boundary: it reports
// whether the visible title matches.
func (r *Runner) DryRun(ctx context.Context) (bool, error) {
	if err := r.findWindow(ctx); err != nil {
		return false, err
	}
	if err := r.probeTree(ctx); err != nil {
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

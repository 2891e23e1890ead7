package driver

import (
	"context"
	"fmt"
	"image"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/internal/clock"
	"github.com/sendonce/sendonce/vision"
)

// The steps that read text by OCR (or, where they name a node, from the app's tree):
// where they look, what they match, and what the evidence keeps of the read.

// textStep finds the step's text (click_text, wait_text, hover_text): from the app's
// tree where the step names a node and the tree answered, else by OCR in the step's
// region, holding still; then clicks its middle or puts the pointer there. A text that
// shows twice is never clicked.
func (r *Runner) textStep(ctx context.Context, s Step, res *evidence.Record) error {
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
		region.Overlaps(r.Profile.Chat.Region.In(r.placed())) {
		return fmt.Errorf("the step searches the chat region for %q while the conversation shows: a peer's message quoting it could be clicked; refusing (narrow the profile's region to the control)", s.Text)
	}
	anchor := vision.Anchor{Text: r.Vars.expand(s.Text), Exact: s.Exact, Prep: s.Prep, AltPreps: s.AltPreps, Mode: ocrMode(s.Mode), Match: matcher(s), LineSuffix: s.Suffix, WholeLine: s.WholeLine,
		Acted: s.Do != "wait_text"} // a click lands by a frame no older than the wait
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
		return r.Driver.Move(ctx, c)
	}
	res.Inputs = []evidence.Input{evidence.ClickInput(c.X, c.Y)}
	return r.Driver.Click(ctx, c)
}

// waitGone waits until the step's text no longer shows: the node it names gone from the
// app's tree where there is one, else the text gone from OCR of its region.
func (r *Runner) waitGone(ctx context.Context, s Step, res *evidence.Record) error {
	if s.Node != nil && r.treeOK {
		_, err := r.awaitNode(ctx, s, false, res)
		return err
	}
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

// escapeText presses Escape while the step's text shows in its region (Repeat times
// at most).
func (r *Runner) escapeText(ctx context.Context, s Step, res *evidence.Record) error {
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
		if err := r.Driver.Key(ctx, "Escape"); err != nil {
			return err
		}
		res.Inputs = append(res.Inputs, evidence.KeyInput("Escape"))
		clock.Sleep(ctx, r.Profile.Timings.escapeSettle())
	}
	return nil
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

// area is where a Read looks: its Region in the main window, or in the window it names.
func (r *Runner) area(ctx context.Context, rd Read) (image.Rectangle, error) {
	return r.region(ctx, Step{Region: &rd.Region, Window: rd.Window})
}

// region is where a step looks: its Region in the app's main window, or in the window
// the step names.
func (r *Runner) region(ctx context.Context, s Step) (image.Rectangle, error) {
	w := r.window
	w.Bounds = r.placed()
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

package driver

import (
	"context"
	"fmt"
	"image"

	"github.com/sendonce/sendonce/evidence"
)

// A profile step's kind ("do") is a value: whether it sends input, whether it types
// into a window (and so waits for the keyboard focus there first), the inputs the
// evidence records before it runs, and what it does. One kind is found in one place:
// stepKinds, and the function it names.

// stepKindOf is one kind of step.
type stepKindOf struct {
	input bool // it sends input: keys, text, clicks or pointer moves
	typed bool // it sends keys: the keyboard focus must be in its window first
	// planned are the inputs the step's record holds before it runs; nil for a step
	// whose inputs (clicks at a place found at run time) its result records.
	planned func(s Step, v Vars) []evidence.Input
	// act performs the step and records in res what it read and sent.
	act func(r *Runner, ctx context.Context, s Step, res *evidence.Record) error
}

// stepKinds are the kinds of step a profile can name, each with its fields:
//
//	key               press Keys
//	type_text         type Text (recorded as its length only)
//	type_path         type the staged file's path (recorded in full)
//	click_text        click the centre of Text found by OCR in Region
//	click_offset      click at Offset in the window
//	hover_text        put the pointer on Text found by OCR in Region, without a click
//	hover_offset      put the pointer at Offset in the window, without a click (a
//	                  control without a label shows its tooltip: wait_text it, then click)
//	wait_text         wait until Text shows in Region and holds still
//	wait_gone         wait until Text no longer shows in Region
//	wait_color        wait until Region shows Color (nine pixels in ten, within
//	                  ColorTolerance): a state shown only as colour, such as a modal
//	                  popup dimming the window
//	wait_window       wait until a window titled Window is viewable
//	wait_window_gone  wait until no window titled Window is viewable
//	escape_window     while a window titled Window is viewable, activate it and press Escape
//	escape_text       while Text shows in Region, press Escape
//	read_field        select all of the focused field's text in the dialog Window (ctrl+a)
//	                  and read it back through the X selection: it must be Text exactly
//	                  (the app's own characters, not a reading of pixels)
//	wait_node         wait until exactly one node of the app's accessibility tree that
//	                  shows matches Node (role, name or pattern, text, states, under)
//	wait_node_gone    wait until no node that shows matches Node
//	click_node        wait as wait_node does, then click the middle of the node's extents
//	                  (a control named by its role: a peer's message quoting its label is
//	                  a label, never the push button)
var stepKinds = map[string]stepKindOf{
	"key": {input: true, typed: true,
		planned: func(s Step, _ Vars) []evidence.Input { return []evidence.Input{evidence.KeyInput(s.Keys)} },
		act: func(r *Runner, ctx context.Context, s Step, _ *evidence.Record) error {
			return r.Driver.Key(ctx, s.Keys)
		}},
	"type_text": {input: true, typed: true,
		planned: func(s Step, v Vars) []evidence.Input { return []evidence.Input{evidence.TypedText(v.expand(s.Text))} },
		act: func(r *Runner, ctx context.Context, s Step, _ *evidence.Record) error {
			return r.Driver.Type(ctx, r.Vars.expand(s.Text))
		}},
	"type_path": {input: true, typed: true,
		planned: func(_ Step, v Vars) []evidence.Input { return []evidence.Input{evidence.TypedPath(v.FilePath)} },
		act: func(r *Runner, ctx context.Context, _ Step, _ *evidence.Record) error {
			return r.Driver.Type(ctx, r.Vars.FilePath)
		}},
	"read_field": {input: true, typed: true,
		planned: func(Step, Vars) []evidence.Input { return fieldReadInputs() },
		act:     (*Runner).readField},
	"click_offset":  {input: true, act: (*Runner).atOffset},
	"hover_offset":  {input: true, act: (*Runner).atOffset},
	"click_text":    {input: true, act: (*Runner).textStep},
	"hover_text":    {input: true, act: (*Runner).textStep},
	"wait_text":     {act: (*Runner).textStep},
	"wait_gone":     {act: (*Runner).waitGone},
	"wait_color":    {act: (*Runner).waitColor},
	"escape_text":   {input: true, typed: true, planned: escapePlanned, act: (*Runner).escapeText},
	"escape_window": {input: true, planned: escapePlanned, act: (*Runner).escapeWindow},
	"wait_window": {act: func(r *Runner, ctx context.Context, s Step, _ *evidence.Record) error {
		return r.waitWindow(ctx, s.Window, true, r.timeout(s))
	}},
	"wait_window_gone": {act: func(r *Runner, ctx context.Context, s Step, _ *evidence.Record) error {
		return r.waitWindow(ctx, s.Window, false, r.timeout(s))
	}},
	"wait_node":      {act: (*Runner).waitNode},
	"wait_node_gone": {act: (*Runner).waitNode},
	"click_node":     {input: true, act: (*Runner).clickNode},
}

func escapePlanned(Step, Vars) []evidence.Input { return []evidence.Input{evidence.KeyInput("Escape")} }

// stepKind says whether a step kind exists and whether it sends input.
func stepKind(do string) (input, ok bool) {
	k, ok := stepKinds[do]
	return k.input, ok
}

// plannedInputs are the input events a step will send, as evidence records them.
func plannedInputs(s Step, v Vars) []evidence.Input {
	if k := stepKinds[s.Do]; k.planned != nil {
		return k.planned(s, v)
	}
	return nil // clicks are recorded with their position in the result
}

// perform runs a step of a kind the profile was validated with: the keyboard focus
// first, for a step that types.
func (r *Runner) perform(ctx context.Context, s Step, res *evidence.Record) error {
	k, ok := stepKinds[s.Do]
	if !ok {
		return fmt.Errorf("unknown step kind %q", s.Do) // the profile's validation refuses it first
	}
	if err := r.stepFocus(ctx, s); err != nil {
		return err
	}
	return k.act(r, ctx, s, res)
}

// stepFocus waits for the keyboard focus to be in the window a typing step types into:
// the one it names, else the app's. Other steps need nothing.
func (r *Runner) stepFocus(ctx context.Context, s Step) error {
	if !stepKinds[s.Do].typed {
		return nil
	}
	if s.Window == "" || s.Do == "escape_text" {
		return r.focusOn(ctx, r.window)
	}
	return r.focusOn(ctx, Window{Title: s.Window})
}

// act performs a step and records its result: the after frame, what OCR found, the
// clicks sent and any error.
func (r *Runner) act(ctx context.Context, s Step, stepSeq int) error {
	start := r.now()
	res := evidence.Record{Kind: evidence.KindResult, Step: stepSeq}
	err := r.perform(ctx, s, &res)
	if err != nil && s.waits() {
		if d := r.openDialogs(ctx); d != "" {
			err = fmt.Errorf("%w; %s", err, d)
		}
	}
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

// atOffset clicks (click_offset) or puts the pointer (hover_offset) at the step's
// offset in the app's window; a negative offset counts from the right or bottom edge.
// A step that names a node (a control without a label, named in the app's tree) acts
// on the node's middle instead, where the tree answered.
func (r *Runner) atOffset(ctx context.Context, s Step, res *evidence.Record) error {
	if s.Node != nil && r.treeOK {
		return r.pointAtNode(ctx, s, res, s.Do == "click_offset")
	}
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
		return r.Driver.Move(ctx, p)
	}
	res.Inputs = []evidence.Input{evidence.ClickInput(p.X, p.Y)}
	return r.Driver.Click(ctx, p)
}

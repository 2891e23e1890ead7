// Package replay records a live delivery's desktop into a fixture, and replays it:
// a Driver that serves the recorded frames in order and answers each input event by
// moving to the frame recorded after it. The whole pipeline, OCR included, then runs in
// tests with no X server.
//
// A fixture is a folder:
//
//	fixture.json        the delivery (app, title, file), its expected outcome, and the
//	                    recording: after each input event, the last frame and windows seen
//	frames/<sha256>.png full-screen frames, stored once
//	trees/<sha256>.json the app's accessibility tree as read, stored once (Recorder.Tree)
//	file/<name>         the delivered file's bytes
//
// A replayed run types other text than the recorded one where the text embeds where the
// file was staged (the path carries the attempt's dispatch id). The frames show the
// recorded path; an OCR engine wrapped by Driver.OCR reads it as the path this run typed,
// so that a check of the whole path can be replayed (see Driver.OCR and Driver.Shows).
package replay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"os"
	"path/filepath"
	"sync"

	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/vision"
)

// Fixture is fixture.json.
type Fixture struct {
	Name     string `json:"name"`
	App      string `json:"app"`
	To       string `json:"to"`
	DestID   string `json:"dest_id,omitempty"`
	FileName string `json:"file_name"`
	// Expected is the outcome the live run recorded.
	Expected string          `json:"expected_outcome"`
	Bounds   image.Rectangle `json:"bounds"`
	// States[k] is what the desktop showed after k input events.
	States []State `json:"states"`
	Inputs []Input `json:"inputs"`
}

// State is the desktop between two input events: the last frame and windows seen.
type State struct {
	Frame   string          `json:"frame"`
	Windows []driver.Window `json:"windows,omitempty"`
	// Focus is the window that had the keyboard focus when last asked (recordings
	// made before it was recorded have none: see Driver.Focused).
	Focus uint32 `json:"focus,omitempty"`
	// Trees are the app's accessibility tree as last read, by what was read (see
	// Recorder.Tree); recordings made without a tree have none.
	Trees map[string]string `json:"trees,omitempty"`
}

// Input is one input event sent.
type Input struct {
	Kind  string      `json:"kind"` // "activate", "click", "key", "type", "read_field" (ctrl+a and a read of the selection)
	Keys  string      `json:"keys,omitempty"`
	Text  string      `json:"text,omitempty"`
	Point image.Point `json:"point,omitempty"`
}

// Recorder wraps a live Driver and records what it showed after each input.
type Recorder struct {
	driver.Driver
	mu     sync.Mutex
	dir    string
	fx     Fixture
	frames map[string]bool
	trees  map[string]bool
}

// Credentials says whose rights a window's process reads files with, where the
// recorded desktop can say (a live one): a recording delivers for real.
func (r *Recorder) Credentials(pid int) (driver.Credentials, error) {
	if o, ok := r.Driver.(driver.ProcessOwner); ok {
		return o.Credentials(pid)
	}
	return driver.Credentials{}, errors.New("the recorded desktop cannot say whose process a window is")
}

// NewRecorder records into dir (created).
func NewRecorder(d driver.Driver, dir string) (*Recorder, error) {
	if err := os.MkdirAll(filepath.Join(dir, "frames"), 0o755); err != nil {
		return nil, err
	}
	return &Recorder{Driver: d, dir: dir, fx: Fixture{Bounds: d.Bounds(), States: []State{{}}}, frames: map[string]bool{}, trees: map[string]bool{}}, nil
}

func (r *Recorder) state() *State { return &r.fx.States[len(r.fx.States)-1] }

func (r *Recorder) input(in Input) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fx.Inputs = append(r.fx.Inputs, in)
	prev := *r.state()
	r.fx.States = append(r.fx.States, State{Frame: prev.Frame, Windows: prev.Windows})
}

// Capture records the full screen and returns the region asked for.
func (r *Recorder) Capture(ctx context.Context, rect image.Rectangle) (*image.RGBA, error) {
	full, err := r.Driver.Capture(ctx, r.Driver.Bounds())
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, full); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	h, err := r.keep("frames", ".png", buf.Bytes(), r.frames)
	if err != nil {
		return nil, err
	}
	r.state().Frame = h
	return crop(full, rect), nil
}

// keep writes b into the fixture's folder dir as its SHA-256 and ext, once (seen holds
// what was written), and returns the hash. The caller holds r.mu.
func (r *Recorder) keep(dir, ext string, b []byte, seen map[string]bool) (string, error) {
	sum := sha256.Sum256(b)
	h := hex.EncodeToString(sum[:])
	if seen[h] {
		return h, nil
	}
	if err := os.MkdirAll(filepath.Join(r.dir, dir), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(r.dir, dir, h+ext), b, 0o644); err != nil {
		return "", err
	}
	seen[h] = true
	return h, nil
}

func (r *Recorder) Windows(ctx context.Context) ([]driver.Window, error) {
	ws, err := r.Driver.Windows(ctx)
	if err == nil {
		r.mu.Lock()
		r.state().Windows = ws
		r.mu.Unlock()
	}
	return ws, err
}

func (r *Recorder) Focused(ctx context.Context) (driver.Window, error) {
	w, err := r.Driver.Focused(ctx)
	if err == nil {
		r.mu.Lock()
		r.state().Focus = w.ID
		r.mu.Unlock()
	}
	return w, err
}

func (r *Recorder) Activate(ctx context.Context, w driver.Window) error {
	r.input(Input{Kind: "activate", Text: w.Title})
	return r.Driver.Activate(ctx, w)
}

func (r *Recorder) Click(ctx context.Context, p image.Point) error {
	r.input(Input{Kind: "click", Point: p})
	return r.Driver.Click(ctx, p)
}

func (r *Recorder) Move(ctx context.Context, p image.Point) error {
	r.input(Input{Kind: "move", Point: p})
	return r.Driver.Move(ctx, p)
}

func (r *Recorder) Key(ctx context.Context, chord string) error {
	r.input(Input{Kind: "key", Keys: chord})
	return r.Driver.Key(ctx, chord)
}

func (r *Recorder) Type(ctx context.Context, text string) error {
	r.input(Input{Kind: "type", Text: text})
	return r.Driver.Type(ctx, text)
}

// FieldText records the ctrl+a it presses as an input of its own ("read_field"): the
// frames after it show the field's text selected.
func (r *Recorder) FieldText(ctx context.Context, w driver.Window) (string, error) {
	r.input(Input{Kind: "read_field", Text: w.Title})
	return r.Driver.FieldText(ctx, w)
}

// Save writes fixture.json with the delivery's facts and the file's bytes.
func (r *Recorder) Save(fx Fixture, file []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	fx.Bounds, fx.States, fx.Inputs = r.fx.Bounds, r.fx.States, r.fx.Inputs
	if err := os.MkdirAll(filepath.Join(r.dir, "file"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.dir, "file", fx.FileName), file, 0o644); err != nil {
		return err
	}
	b, err := json.MarshalIndent(fx, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.dir, "fixture.json"), append(b, '\n'), 0o644)
}

// Load reads a fixture.
func Load(dir string) (*Fixture, error) {
	b, err := os.ReadFile(filepath.Join(dir, "fixture.json"))
	if err != nil {
		return nil, err
	}
	var fx Fixture
	if err := json.Unmarshal(b, &fx); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return &fx, nil
}

// Driver replays a fixture. Each input event must be the one recorded at that point
// (the same kind, keys or click within a few pixels); typed text is not compared,
// since a path embeds where the file was staged.
type Driver struct {
	mu     sync.Mutex
	dir    string
	fx     *Fixture
	k      int // input events so far
	frames map[string]*image.RGBA
	// activated is the window last activated, and before what was listed then: the
	// focus, as a window manager keeps it, for recordings without one (see Focused).
	activated driver.Window
	before    map[uint32]bool
	typed     []typing
	lastTyped string // the text this run typed last, as FieldText reads it back

	// Shows is what the app shows of text this run typed where the recording showed
	// its own: the text itself when nil. A test sets it to play an app that lost a key
	// (see OCR).
	Shows func(typed string) string
	// Repaint, if set, is what the app showed after so many input events, given the
	// frame the recording holds there (which it must not change): a test sets it to
	// play an app that drew something else at that point, a control still insensitive
	// say.
	Repaint func(inputs int, recorded *image.RGBA) *image.RGBA
}

// typing is text typed at an input where the recording typed other text.
type typing struct{ recorded, sent string }

// New replays the fixture in dir.
func New(dir string) (*Driver, error) {
	fx, err := Load(dir)
	if err != nil {
		return nil, err
	}
	return &Driver{dir: dir, fx: fx, frames: map[string]*image.RGBA{}}, nil
}

// Fixture is the fixture being replayed.
func (d *Driver) Fixture() *Fixture { return d.fx }

// Inputs is how many input events were replayed.
func (d *Driver) Inputs() int { d.mu.Lock(); defer d.mu.Unlock(); return d.k }

func (d *Driver) state() State {
	k := min(d.k, len(d.fx.States)-1)
	for ; k > 0 && d.fx.States[k].Frame == ""; k-- {
	}
	return d.fx.States[k]
}

func (d *Driver) frame(h string) (*image.RGBA, error) {
	if img, ok := d.frames[h]; ok {
		return img, nil
	}
	f, err := os.Open(filepath.Join(d.dir, "frames", h+".png"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	src, err := png.Decode(f)
	if err != nil {
		return nil, err
	}
	img := image.NewRGBA(src.Bounds())
	draw.Draw(img, img.Bounds(), src, src.Bounds().Min, draw.Src)
	d.frames[h] = img
	return img, nil
}

func (d *Driver) Capture(ctx context.Context, r image.Rectangle) (*image.RGBA, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.state()
	if st.Frame == "" {
		return nil, fmt.Errorf("replay: no frame was recorded after %d inputs", d.k)
	}
	img, err := d.frame(st.Frame)
	if err != nil {
		return nil, err
	}
	if d.Repaint != nil {
		img = d.Repaint(d.k, img)
	}
	return crop(img, r), nil
}

func (d *Driver) Windows(ctx context.Context) ([]driver.Window, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := min(d.k, len(d.fx.States)-1)
	for ; k > 0 && d.fx.States[k].Windows == nil; k-- {
	}
	return d.fx.States[k].Windows, nil
}

func (d *Driver) Bounds() image.Rectangle { return d.fx.Bounds }

// Focused is the window the recording saw focused after as many inputs. A recording
// made before focus was recorded answers as a window manager keeps the focus: the
// newest viewable window that opened since the last activation (a dialog takes the
// focus as it maps), else the window last activated, else the newest viewable one.
func (d *Driver) Focused(ctx context.Context) (driver.Window, error) {
	ws, err := d.Windows(ctx)
	if err != nil {
		return driver.Window{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	k := min(d.k, len(d.fx.States)-1)
	if focus := d.fx.States[k].Focus; focus != 0 {
		for _, w := range ws {
			if w.ID == focus {
				return w, nil
			}
		}
		return driver.Window{}, nil
	}
	var opened, activated, newest *driver.Window
	for i := range ws {
		w := &ws[i]
		if !w.Viewable {
			continue
		}
		newest = w
		if d.before != nil && !d.before[w.ID] {
			opened = w
		}
		if w.ID == d.activated.ID {
			activated = w
		}
	}
	for _, w := range []*driver.Window{opened, activated, newest} {
		if w != nil {
			return *w, nil
		}
	}
	return driver.Window{}, nil
}

// next checks an input against the recording and moves to the next state.
func (d *Driver) next(in Input) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.k >= len(d.fx.Inputs) {
		return fmt.Errorf("replay diverged: input %d (%s %s) was never recorded", d.k+1, in.Kind, in.Keys)
	}
	want := d.fx.Inputs[d.k]
	ok := want.Kind == in.Kind
	switch in.Kind {
	case "key":
		ok = ok && want.Keys == in.Keys
	case "click", "move":
		dx, dy := want.Point.X-in.Point.X, want.Point.Y-in.Point.Y
		ok = ok && dx*dx+dy*dy <= 8*8
	}
	if !ok {
		return fmt.Errorf("replay diverged at input %d: got %s %q %v, recorded %s %q %v", d.k+1, in.Kind, in.Keys, in.Point, want.Kind, want.Keys, want.Point)
	}
	d.k++
	return nil
}

func (d *Driver) Activate(ctx context.Context, w driver.Window) error {
	ws, _ := d.Windows(ctx)
	if err := d.next(Input{Kind: "activate", Text: w.Title}); err != nil {
		return err
	}
	d.mu.Lock()
	d.activated, d.before = w, map[uint32]bool{}
	for _, x := range ws {
		d.before[x.ID] = true
	}
	d.mu.Unlock()
	return nil
}
func (d *Driver) Click(ctx context.Context, p image.Point) error {
	return d.next(Input{Kind: "click", Point: p})
}

// Move is checked against the recording like a click (its point within 8 pixels of
// the recorded one), but a move the recording does not have at this point (a pointer
// rest a profile gained after the fixture was recorded) is answered by the state as it
// is: it moves to no recorded frame.
func (d *Driver) Move(ctx context.Context, p image.Point) error {
	d.mu.Lock()
	recorded := d.k < len(d.fx.Inputs) && d.fx.Inputs[d.k].Kind == "move"
	d.mu.Unlock()
	if !recorded {
		return nil
	}
	return d.next(Input{Kind: "move", Point: p})
}
func (d *Driver) Key(ctx context.Context, chord string) error {
	return d.next(Input{Kind: "key", Keys: chord})
}
func (d *Driver) Type(ctx context.Context, text string) error {
	d.mu.Lock()
	var recorded string
	if d.k < len(d.fx.Inputs) {
		recorded = d.fx.Inputs[d.k].Text
	}
	d.mu.Unlock()
	if err := d.next(Input{Kind: "type", Text: text}); err != nil {
		return err
	}
	d.mu.Lock()
	d.lastTyped = text
	d.mu.Unlock()
	if recorded != "" && recorded != text {
		d.mu.Lock()
		d.typed = append(d.typed, typing{recorded: recorded, sent: text})
		d.mu.Unlock()
	}
	return nil
}

// FieldText is what the field holds that this run typed into last: the text it typed
// (or, with Shows, what Shows makes of it, as the pixels show it too); a recording
// holds no selection's text. Where the recording has the read as an input of its own
// (the Recorder's read_field), it moves on past it; recordings made before there was
// one do not have it, and the replay then stays where it is.
func (d *Driver) FieldText(ctx context.Context, w driver.Window) (string, error) {
	d.mu.Lock()
	recorded := d.k < len(d.fx.Inputs) && d.fx.Inputs[d.k].Kind == "read_field"
	d.mu.Unlock()
	if recorded {
		if err := d.next(Input{Kind: "read_field", Text: w.Title}); err != nil {
			return "", err
		}
	}
	d.mu.Lock()
	typed, shows := d.lastTyped, d.Shows
	d.mu.Unlock()
	if typed == "" {
		return "", fmt.Errorf("replay: nothing was typed into a field of %q to read back", w.Title)
	}
	if shows != nil {
		return shows(typed), nil
	}
	return typed, nil
}

// OCR wraps an OCR engine for this replay: where it reads, on one line, the text the
// recorded run typed (character by character, as evidence.PathMatches compares a path
// read back: a misread the live check rejects is not replaced; OCR may split
// it into words anywhere, and a text cursor may follow it), it reads the text this run
// typed at that input instead (or, with Shows, what Shows makes of it), as one word over
// the same box. Any other reading is left as OCR made it: a frame OCR misreads still
// fails the check it would fail live.
func (d *Driver) OCR(ocr vision.OCR) vision.OCR { return typedOCR{ocr, d} }

type typedOCR struct {
	vision.OCR
	d *Driver
}

func (o typedOCR) Recognize(ctx context.Context, img image.Image, mode vision.Mode) ([]vision.Word, error) {
	return o.RecognizeCharset(ctx, img, mode, "")
}

// RecognizeCharset reads with charset and the characters of the recorded typed text
// besides: the frame shows the recording's text, which this run's characters may not
// all spell.
func (o typedOCR) RecognizeCharset(ctx context.Context, img image.Image, mode vision.Mode, charset string) ([]vision.Word, error) {
	o.d.mu.Lock()
	typed, shows := append([]typing(nil), o.d.typed...), o.d.Shows
	o.d.mu.Unlock()
	if charset != "" {
		for _, t := range typed {
			charset += t.recorded
		}
	}
	words, err := vision.RecognizeCharset(ctx, o.OCR, img, mode, charset)
	if err != nil {
		return words, err
	}
	for _, t := range typed {
		shown := t.sent
		if shows != nil {
			shown = shows(t.sent)
		}
		words = replaceTyped(words, t.recorded, shown)
	}
	return words, nil
}

// replaceTyped replaces, in each line of words, the first run of consecutive words
// that reads as recorded (and at most one character more: a text cursor) by one word
// reading shown (and that character).
func replaceTyped(words []vision.Word, recorded, shown string) []vision.Word {
	var out []vision.Word
	for _, l := range vision.Lines(words) {
		ws := l.Words
		for i := 0; i < len(ws); i++ {
			joined := ""
			for j := i; j < len(ws) && len(joined) <= len(recorded); j++ {
				joined += ws[j].Text
				rest := ""
				if len(joined) == len(recorded)+1 {
					joined, rest = joined[:len(recorded)], joined[len(recorded):]
				}
				if !evidence.PathMatches(joined, recorded) {
					joined += rest
					continue
				}
				w := vision.Word{Text: shown + rest, Box: ws[i].Box, Confidence: ws[i].Confidence, Line: ws[i].Line}
				for _, x := range ws[i+1 : j+1] {
					w.Box, w.Confidence = w.Box.Union(x.Box), min(w.Confidence, x.Confidence)
				}
				ws = append(append(append([]vision.Word(nil), ws[:i]...), w), ws[j+1:]...)
				i = len(ws) // one replacement a line
				break
			}
		}
		out = append(out, ws...)
	}
	return out
}

// crop copies the part of img inside r, keeping screen coordinates.
func crop(img *image.RGBA, r image.Rectangle) *image.RGBA {
	r = r.Intersect(img.Bounds())
	out := image.NewRGBA(r)
	draw.Draw(out, r, img, r.Min, draw.Src)
	return out
}

package driver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"image"
	"image/color"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/store/sqlite"
	"github.com/sendonce/sendonce/vision"
)

// sendsOnChoose is an app whose one key press both chooses the file and sends it. It
// asks the store, at that press, which boundaries the attempt has crossed.
type sendsOnChoose struct {
	windowsOnly
	atPress func() []gate.Boundary
	pressed []gate.Boundary
	keys    int
}

func (d *sendsOnChoose) Key(context.Context, string) error {
	d.keys++
	d.pressed = d.atPress()
	return nil
}
func (d *sendsOnChoose) Capture(_ context.Context, r image.Rectangle) (*image.RGBA, error) {
	return image.NewRGBA(r), nil
}

// readsBob reads "Bob" everywhere: the title matches, the chat shows no file.
type readsBob struct{}

func (readsBob) Recognize(context.Context, image.Image, vision.Mode) ([]vision.Word, error) {
	return []vision.Word{{Text: "Bob", Box: image.Rect(5, 5, 40, 20), Confidence: 95}}, nil
}

// TestChoosingSendsCrossesBothFirst: for a profile whose choosing of the file sends it,
// the runner crosses choose_file and send, both durably in the store, before the one
// key press, and then checks no send page and runs no send phase.
func TestChoosingSendsCrossesBothFirst(t *testing.T) {
	desk := &sendsOnChoose{windowsOnly: windowsOnly{ws: []Window{{ID: 1, Process: "x", Title: "X", Viewable: true, Bounds: image.Rect(0, 0, 800, 600)}}}}
	r, crossed := chooseAndSend(t, desk)
	if _, err := r.Deliver(context.Background()); err != nil {
		t.Fatalf("deliver: %v", err)
	}
	if desk.keys != 1 {
		t.Fatalf("%d key presses; want the one that chooses and sends", desk.keys)
	}
	if len(desk.pressed) != 2 || desk.pressed[0] != gate.ChooseFile || desk.pressed[1] != gate.Send {
		t.Fatalf("at the press the store held crossings %v; want choose_file and send, both before the act", desk.pressed)
	}
	if c := crossed(); len(c) != 2 {
		t.Fatalf("crossings %v after the delivery; want choose_file and send", c)
	}
}

// TestKeysGoOnlyToTheFocusedWindow: when the keyboard focus is in another window (an
// app that took it, a dialog of someone else's), the crossing key is never pressed and
// nothing is crossed: the delivery stops before the boundary, naming where the focus is.
func TestKeysGoOnlyToTheFocusedWindow(t *testing.T) {
	desk := focusElsewhere()
	r, crossed := chooseAndSend(t, desk)
	_, err := r.Deliver(context.Background())
	if !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), `the keyboard focus is in "Another app"`) {
		t.Fatalf("deliver with the focus in another app: %v; want it stopped before any boundary, naming where the focus is", err)
	}
	if desk.keys != 0 {
		t.Fatalf("%d key presses; want none while the focus is elsewhere", desk.keys)
	}
	if c := crossed(); len(c) != 0 {
		t.Fatalf("crossings %v; want none: the stop comes before the boundary", c)
	}
}

// TestCancelIsTheRecordedCause: a delivery cancelled while a step waits for the keyboard
// focus stops naming the cancellation, not the focus it was waiting for.
func TestCancelIsTheRecordedCause(t *testing.T) {
	desk := focusElsewhere()
	r, crossed := chooseAndSend(t, desk)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel) // within the 2 s wait for the focus
	res, err := r.Deliver(ctx)
	if !errors.Is(err, ErrStopped) || strings.Contains(err.Error(), "keyboard focus") || !strings.Contains(res.Stopped, "context canceled") {
		t.Fatalf("a delivery cancelled during the wait for the focus: %v (stopped: %q); want the cancellation as its cause", err, res.Stopped)
	}
	if desk.keys != 0 || len(crossed()) != 0 {
		t.Fatalf("%d key presses, crossings %v; want none", desk.keys, crossed())
	}
}

// focusElsewhere is the app's window X and another app's window, which has the keyboard
// focus.
func focusElsewhere() *sendsOnChoose {
	return &sendsOnChoose{windowsOnly: windowsOnly{focus: 2, ws: []Window{
		{ID: 1, Process: "x", Title: "X", Viewable: true, Bounds: image.Rect(0, 0, 800, 600)},
		{ID: 2, Process: "other", Title: "Another app", Viewable: true, Bounds: image.Rect(100, 100, 500, 400)},
	}}}
}

// chooseAndSend is a runner for a one-step profile whose key chooses the file and sends
// it, on desk, with a claim in a new store; crossed reads the attempt's crossings.
func chooseAndSend(t *testing.T, desk *sendsOnChoose) (r *Runner, crossed func() []gate.Boundary) {
	t.Helper()
	return runnerOn(t, desk, desk, readsBob{}, `{"app":"x","process":"x","window_title":"X",
	 "title":{"region":{"x":0,"y":0,"w":100,"h":30}},"chat":{"region":{"x":0,"y":30,"w":0,"h":0}},
	 "send_page":{"region":{"x":0,"y":30,"w":0,"h":0}},"sent_item_timeout":"300ms",
	 "choose_file":[{"name":"choose and send","do":"key","keys":"Return","class":"submit","crosses":"choose_file,send"}]}`)
}

// runnerOn is a runner for the profile on desk (whose key presses ask the store which
// boundaries were crossed), reading with ocr, with a claim in a new store; crossed reads
// the attempt's crossings.
func runnerOn(t *testing.T, desk Driver, presses *sendsOnChoose, ocr vision.OCR, profile string) (r *Runner, crossed func() []gate.Boundary) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := sqlite.Create(ctx, filepath.Join(dir, "s.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := store.New(b)
	t.Cleanup(func() { s.Close() })
	id, _ := gate.Title("Bob")
	content := []byte("a file")
	key := gate.NewKey(id, gate.DigestOf(content))
	res, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{key}, Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseProfile([]byte(profile))
	if err != nil {
		t.Fatal(err)
	}
	crossed = func() []gate.Boundary {
		a, err := s.AttemptByDispatch(ctx, res.Permit.DispatchID())
		if err != nil {
			t.Error(err)
			return nil
		}
		return a.Crossed
	}
	presses.atPress = crossed
	h := sha256.Sum256(content)
	rec, err := evidence.Create(filepath.Join(dir, "bundle"), evidence.Manifest{Keys: []string{key.String()}, Identity: id.String(), IdentityStrength: "weak", Title: "Bob",
		App: "x", Task: "t", Token: res.Permit.Token(), DispatchID: res.Permit.DispatchID(), ContentSHA256: hex.EncodeToString(h[:]), Size: int64(len(content)),
		FileName: "f.txt", ToolVersion: "test", Host: "test"}, evidence.SystemClock())
	if err != nil {
		t.Fatal(err)
	}
	return &Runner{Driver: desk, Reader: &vision.Reader{Screen: desk, OCR: ocr, Poll: 5 * time.Millisecond}, Gate: s, Permit: res.Permit, Rec: rec, Profile: p,
		Vars: Vars{Title: "Bob", FileName: "f.txt", Size: int64(len(content))}}, crossed
}

// twoLabels reads "Send" on two lines: the app's button, and a peer's message
// quoting it.
type twoLabels struct{}

func (twoLabels) Recognize(context.Context, image.Image, vision.Mode) ([]vision.Word, error) {
	return []vision.Word{
		{Text: "please", Box: image.Rect(10, 100, 60, 115), Confidence: 95, Line: 1}, {Text: "Send", Box: image.Rect(65, 100, 100, 115), Confidence: 95, Line: 1},
		{Text: "Send", Box: image.Rect(700, 500, 740, 515), Confidence: 95, Line: 2},
	}, nil
}

// TestAnchorMustBeUnique: a click on a label that shows twice in the step's region is
// refused: no input is sent, whichever one is the control.
func TestAnchorMustBeUnique(t *testing.T) {
	desk := &sendsOnChoose{windowsOnly: windowsOnly{ws: []Window{{ID: 1, Process: "x", Title: "X", Viewable: true, Bounds: image.Rect(0, 0, 800, 600)}}}}
	clicks := 0
	desk.atPress = func() []gate.Boundary { return nil }
	rec, err := evidence.Create(filepath.Join(t.TempDir(), "bundle"), evidence.Manifest{Keys: []string{"v2:title:Bob:" + strings.Repeat("a", 64)}, Identity: "title:Bob", IdentityStrength: "weak",
		Title: "Bob", App: "x", Task: "t", Token: 1, DispatchID: strings.Repeat("b", 32), ContentSHA256: strings.Repeat("a", 64), Size: 1, FileName: "f", ToolVersion: "test", Host: "test"}, evidence.SystemClock())
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Driver: clickCounter{sendsOnChoose: desk, clicks: &clicks}, Reader: &vision.Reader{Screen: desk, OCR: twoLabels{}}, Rec: rec,
		// The chat is elsewhere (below the window): the rule under test is uniqueness.
		Profile: &Profile{App: "x", Process: "x", Chat: Read{Region: Region{X: 0, Y: 700, W: 10, H: 10}}}}
	r.window = desk.ws[0]
	err = r.act(context.Background(), Step{Name: "press send", Do: "click_text", Text: "Send", Class: evidence.Safe, Timeout: Duration{2 * time.Second}}, 1)
	if err == nil || !strings.Contains(err.Error(), "2 times") || clicks != 0 {
		t.Fatalf("%v, %d click(s); want the click refused, none sent", err, clicks)
	}
}

type clickCounter struct {
	*sendsOnChoose
	clicks *int
}

func (c clickCounter) Click(context.Context, image.Point) error { *c.clicks++; return nil }

// pointer counts the pointer's moves and clicks.
type pointer struct {
	windowsOnly
	moves, clicks []image.Point
}

func (p *pointer) Move(_ context.Context, at image.Point) error {
	p.moves = append(p.moves, at)
	return nil
}
func (p *pointer) Click(_ context.Context, at image.Point) error {
	p.clicks = append(p.clicks, at)
	return nil
}
func (p *pointer) Capture(_ context.Context, r image.Rectangle) (*image.RGBA, error) {
	return image.NewRGBA(r), nil
}

// TestHoverMovesWithoutClicking: a hover step puts the pointer on its text and clicks
// nothing; the evidence records the move as an input.
func TestHoverMovesWithoutClicking(t *testing.T) {
	desk := &pointer{windowsOnly: windowsOnly{ws: []Window{{ID: 1, Process: "x", Title: "X", Viewable: true, Bounds: image.Rect(0, 0, 800, 600)}}}}
	dir := filepath.Join(t.TempDir(), "bundle")
	rec, err := evidence.Create(dir, evidence.Manifest{Keys: []string{"v2:title:Bob:" + strings.Repeat("a", 64)}, Identity: "title:Bob", IdentityStrength: "weak",
		Title: "Bob", App: "x", Task: "t", Token: 1, DispatchID: strings.Repeat("b", 32), ContentSHA256: strings.Repeat("a", 64), Size: 1, FileName: "f", ToolVersion: "test", Host: "test"}, evidence.SystemClock())
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Driver: desk, Reader: &vision.Reader{Screen: desk, OCR: readsBob{}}, Rec: rec, Profile: &Profile{App: "x", Process: "x", Chat: Read{Region: Region{X: 700, Y: 500, W: 10, H: 10}}}}
	r.window = desk.ws[0]
	if err := r.run(context.Background(), Step{Name: "show the menu", Do: "hover_text", Text: "Bob", Region: &Region{X: 0, Y: 0, W: 400, H: 300}, Class: evidence.Safe, Timeout: Duration{2 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	if len(desk.clicks) != 0 || len(desk.moves) != 1 || desk.moves[0] != image.Pt(22, 12) {
		t.Fatalf("moves %v, clicks %v; want one move to the text's centre (22,12) and no click", desk.moves, desk.clicks)
	}
	rec.Close()
	b, err := evidence.Verify(dir, evidence.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	last := b.Records[len(b.Records)-1]
	if len(last.Inputs) != 1 || last.Inputs[0].Kind != "move" {
		t.Fatalf("the step's result records %+v; want the move", last.Inputs)
	}
}

// typingDesk is sendsOnChoose whose typing may change nothing on the screen (keys lost,
// or a field that already showed the name).
type typingDesk struct {
	*sendsOnChoose
	typingShows bool
	typed       bool
}

func (d *typingDesk) Type(context.Context, string) error {
	d.typed = true
	return nil
}
func (d *typingDesk) Capture(_ context.Context, r image.Rectangle) (*image.RGBA, error) {
	img := image.NewRGBA(r)
	if d.typed && d.typingShows && image.Pt(50, 50).In(r) {
		img.Set(50, 50, color.Black) // the path drawn in the field
	}
	return img, nil
}

// fieldShowsName reads the title as "Bob" and the location field (400 wide) as ending
// with the file's name, whatever it shows: the name the chooser filled in.
type fieldShowsName struct{}

func (fieldShowsName) Recognize(_ context.Context, img image.Image, _ vision.Mode) ([]vision.Word, error) {
	if img.Bounds().Dx() == 400 {
		return []vision.Word{{Text: "f.txt", Box: image.Rect(5, 5, 45, 20), Confidence: 95}}, nil
	}
	return []vision.Word{{Text: "Bob", Box: image.Rect(5, 5, 40, 20), Confidence: 95}}, nil
}

// typedPathProfile is an app whose choosing of the file sends it: type the path, check
// it (how: match, the check's text and matching fields), press Return.
func typedPathProfile(match string) string {
	return `{"app":"x","process":"x","window_title":"X",
	 "title":{"region":{"x":0,"y":0,"w":100,"h":30}},"chat":{"region":{"x":0,"y":100,"w":0,"h":0}},
	 "send_page":{"region":{"x":0,"y":100,"w":0,"h":0}},"sent_item_timeout":"300ms",
	 "choose_file":[
	  {"name":"type the path","do":"type_path","class":"safe"},
	  {"name":"check the typed path","do":"wait_text","class":"safe",` + match + `,"after_change":true,"region":{"x":0,"y":40,"w":400,"h":30},"timeout":"300ms"},
	  {"name":"choose and send","do":"key","keys":"Return","class":"submit","crosses":"choose_file,send"}]}`
}

// TestTypedPathMustChangeTheField: the check of the typed path (after_change) passes
// only on a field the typing changed. When typing changes nothing there (the chooser
// had filled in the file's name, from an earlier attempt, and the keys were lost), the
// delivery stops before choose_file: Return is never pressed, nothing is crossed. The
// control: the same profile where typing draws in the field delivers.
func TestTypedPathMustChangeTheField(t *testing.T) {
	profile := typedPathProfile(`"text":"{{file_name}}","suffix":true`)
	for _, shows := range []bool{false, true} {
		presses := &sendsOnChoose{windowsOnly: windowsOnly{ws: []Window{{ID: 1, Process: "x", Title: "X", Viewable: true, Bounds: image.Rect(0, 0, 800, 600)}}}}
		desk := &typingDesk{sendsOnChoose: presses, typingShows: shows}
		r, crossed := runnerOn(t, desk, presses, fieldShowsName{}, profile)
		_, err := r.Deliver(context.Background())
		if shows {
			if err != nil || presses.keys != 1 || len(crossed()) != 2 {
				t.Errorf("typing that shows in the field: %v, %d key(s), crossings %v; want the delivery through", err, presses.keys, crossed())
			}
			continue
		}
		if !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), "changed nothing") {
			t.Fatalf("typing that changed nothing: %v; want a stop naming it", err)
		}
		if presses.keys != 0 || len(crossed()) != 0 {
			t.Fatalf("typing that changed nothing: %d key press(es), crossings %v; want none", presses.keys, crossed())
		}
	}
}

// fieldShows reads the title as "Bob" and the location field (400 wide) as text.
type fieldShows struct{ text string }

func (f fieldShows) Recognize(_ context.Context, img image.Image, _ vision.Mode) ([]vision.Word, error) {
	if img.Bounds().Dx() == 400 {
		return []vision.Word{{Text: f.text, Box: image.Rect(5, 5, 395, 20), Confidence: 95}}, nil
	}
	return []vision.Word{{Text: "Bob", Box: image.Rect(5, 5, 40, 20), Confidence: 95}}, nil
}

// TestTypedPathReadBackInFull: the check of the typed path (whole_line) reads the whole
// location field back. A field that shows the path with one character of a directory
// lost (the app dropped a key) stops the delivery before choose_file, though it still
// ends with the file's name; the control, the exact path (OCR's 0/O read for one
// character), delivers.
func TestTypedPathReadBackInFull(t *testing.T) {
	const path = "/var/lib/sendonce/staging/0a1b2c3d/f.txt"
	profile := typedPathProfile(`"text":"{{file_path}}","whole_line":true`)
	for _, tc := range []struct {
		shows     string
		delivered bool
	}{
		{"/var/lib/sendonce/staging/Oa1b2c3d/f.txt|", true},
		{"/var/lib/sendonce/stagng/0a1b2c3d/f.txt", false},
		{"/var/lib/sendonce/staging/0a1b2c3/f.txt", false},
		{"ar/lib/sendonce/staging/0a1b2c3d/f.txt", false},
	} {
		if _, ok := vision.FindLineSuffix([]vision.Word{{Text: tc.shows}}, "f.txt", evidence.NameMatches); !ok {
			t.Fatalf("%s does not end with the file's name: the case tests nothing the name check would not", tc.shows)
		}
		presses := &sendsOnChoose{windowsOnly: windowsOnly{ws: []Window{{ID: 1, Process: "x", Title: "X", Viewable: true, Bounds: image.Rect(0, 0, 800, 600)}}}}
		desk := &typingDesk{sendsOnChoose: presses, typingShows: true}
		r, crossed := runnerOn(t, desk, presses, fieldShows{tc.shows}, profile)
		r.Vars.FilePath = path
		_, err := r.Deliver(context.Background())
		if tc.delivered {
			if err != nil || presses.keys != 1 || len(crossed()) != 2 {
				t.Errorf("the field shows %s: %v, %d key(s), crossings %v; want the delivery through", tc.shows, err, presses.keys, crossed())
			}
			continue
		}
		if !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), path) {
			t.Errorf("the field shows %s: %v; want a stop naming the path", tc.shows, err)
		}
		if presses.keys != 0 || len(crossed()) != 0 {
			t.Errorf("the field shows %s: %d key press(es), crossings %v; want none", tc.shows, presses.keys, crossed())
		}
	}
}

package driver

import (
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/vision"
)

func word(text string, x, y, line int) vision.Word {
	return vision.Word{Text: text, Box: image.Rect(x, y, x+8*len(text), y+14), Confidence: 90, Line: line}
}

func TestItemsReadsFileCards(t *testing.T) {
	r := &Runner{Vars: Vars{FileName: "report.txt"}}
	ws := []vision.Word{
		word("alice", 480, 207, 1), word("11:33", 520, 208, 1),
		word("report.txt", 565, 267, 2), word("17", 565, 282, 3), word("bytes", 585, 281, 3),
		word("alice", 480, 325, 4),
		word("ql.txt", 565, 385, 5), // another file
		word("rep0rt.txt", 565, 445, 6), word("26", 565, 460, 7), word("bytes", 585, 459, 7),
		word("report.txt", 900, 500, 8), word("4.2", 1200, 515, 9), word("kB", 1230, 515, 9), // a size far to the side is not its size
	}
	got := r.items(vision.Look{Words: ws})
	want := []string{"report.txt|17 bytes", "rep0rt.txt|26 bytes", "report.txt|"}
	if len(got) != len(want) {
		t.Fatalf("items %+v; want %v", got, want)
	}
	for i, it := range got {
		if it.Name+"|"+it.Size != want[i] {
			t.Errorf("item %d = %s|%s; want %s", i, it.Name, it.Size, want[i])
		}
		if it.Ours || it.Finished {
			t.Errorf("item %d is ours or finished without confirm rules: %+v", i, it)
		}
	}
}

// chatLine is a line of a chat drawn by chatFrame: its text, its ink, where it starts.
type chatLine struct {
	text string
	ink  color.RGBA
	x, y int
}

// chatFrame draws lines of text, each in its colour, and returns the frame with the
// words as OCR would report them.
func chatFrame(lines []chatLine) (*image.RGBA, []vision.Word) {
	img := image.NewRGBA(image.Rect(0, 0, 700, 500))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.RGBA{255, 255, 255, 255}}, image.Point{}, draw.Src)
	var ws []vision.Word
	for i, l := range lines {
		d := &font.Drawer{Dst: img, Src: image.NewUniform(l.ink), Face: basicfont.Face7x13}
		x := l.x
		for _, w := range splitWords(l.text) {
			d.Dot = fixed.P(x, l.y)
			d.DrawString(w)
			ws = append(ws, vision.Word{Text: w, Box: image.Rect(x, l.y-11, x+7*len(w), l.y+2), Confidence: 90, Line: i})
			x += 7 * (len(w) + 1)
		}
	}
	return img, ws
}

func splitWords(s string) []string {
	var out []string
	w := ""
	for _, r := range s {
		if r == ' ' {
			if w != "" {
				out = append(out, w)
			}
			w = ""
			continue
		}
		w += string(r)
	}
	if w != "" {
		out = append(out, w)
	}
	return out
}

// TestItemsTellOursAndFinished: with the Gajim profile's confirm rules, an item under
// our author (drawn in the outgoing colour) is ours and finished; under the peer's
// author (another colour, even with our name) it is not ours; under a transfer row (a
// time without an author, progress shown) it is not finished.
func TestItemsTellOursAndFinished(t *testing.T) {
	p, err := LoadProfile("gajim")
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Profile: p, Vars: Vars{FileName: "report.txt", Size: 17}}
	ours, peer, text := color.RGBA{50, 90, 140, 255}, color.RGBA{200, 40, 40, 255}, color.RGBA{30, 30, 30, 255}
	frame, ws := chatFrame([]chatLine{
		{"alice 11:33", ours, 10, 20}, {"report.txt", text, 80, 50}, {"17 bytes", text, 80, 65},
		{"alice 11:35", peer, 10, 120}, {"report.txt", text, 80, 150}, {"17 bytes", text, 80, 165}, // a peer named alice
		{"alice 11:36", text, 10, 220}, {"report.txt", text, 80, 250}, {"17 bytes", text, 80, 265}, // a message text reading like a header
		{"11:40", text, 10, 320}, {"report.txt", text, 80, 350}, {"17 bytes", text, 80, 365}, {"42 % (1 s remaining)", text, 80, 380},
		{"alice 11:41", ours, 10, 420}, {"report.txt", text, 80, 450}, {"17 bytes", text, 80, 465},
	})
	got := r.items(vision.Look{Frame: frame, Words: ws})
	want := []struct{ ours, finished bool }{{true, true}, {false, true}, {false, true}, {false, false}, {true, true}}
	if len(got) != len(want) {
		t.Fatalf("items %+v", got)
	}
	for i, it := range got {
		if it.Ours != want[i].ours || it.Finished != want[i].finished || it.Size != "17 bytes" || it.Y == 0 {
			t.Errorf("item %d: %+v; want ours %v finished %v", i, it, want[i].ours, want[i].finished)
		}
	}
}

func TestBlank(t *testing.T) {
	img := image.NewRGBA(image.Rect(10, 10, 60, 60))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.RGBA{250, 250, 250, 255}}, image.Point{}, draw.Src)
	if !blank(img) {
		t.Fatal("a uniform region is not blank")
	}
	img.Set(40, 40, color.RGBA{120, 120, 120, 255}) // a button's edge
	if blank(img) {
		t.Fatal("a region with a drawn pixel is blank")
	}
}

// chatDesk shows one still screen: a frame with a conversation drawn in the Gajim
// profile's chat region (its end-blank region white).
type chatDesk struct {
	windowsOnly
	frame *image.RGBA
}

func (d chatDesk) Capture(_ context.Context, r image.Rectangle) (*image.RGBA, error) {
	return vision.Crop(d.frame, r), nil
}

// splitNameOCR reads the title as "Bob" and the chat as OCR of a real frame once did:
// at twice the size it splits the file's name across two lines ("report" / ".txt"),
// at its own size it reads it whole. It counts its reads of the chat by scale.
type splitNameOCR struct {
	chat  []vision.Word // the words as read at the chat's own size
	reads map[int]int   // chat reads by scale
}

func (o *splitNameOCR) Recognize(_ context.Context, img image.Image, _ vision.Mode) ([]vision.Word, error) {
	switch w := img.Bounds().Dx(); w {
	case 780: // the title region
		return []vision.Word{{Text: "Bob", Box: image.Rect(300, 10, 340, 30), Confidence: 95}}, nil
	case 520, 1040:
		scale := w / 520
		o.reads[scale]++
		var out []vision.Word
		for _, wd := range o.chat {
			wd.Box = image.Rectangle{Min: wd.Box.Min.Mul(scale), Max: wd.Box.Max.Mul(scale)}
			if scale == 2 && wd.Text == "report.txt" {
				head, tail := wd, wd
				head.Text, tail.Text, tail.Line = "report", ".txt", 99
				tail.Box.Min.Y += 40
				out = append(out, head, tail)
				continue
			}
			out = append(out, wd)
		}
		return out, nil
	}
	return nil, fmt.Errorf("an image %v that no region of the test has", img.Bounds())
}

// TestSentItemReadAgainWithOtherPreps: a read after send whose OCR splits the file's
// name is read again, on the same capture, with the profile's other preparations, and
// the item counts; the second look, the profile's settle later, sees the same pixels and
// is not read by OCR again, and both looks are recorded a settle apart.
// sentItemRunner is a runner at the look for the sent item: Gajim's profile, a chat
// showing report.txt (17 bytes) as ours and finished, read by splitNameOCR, recorded in
// a bundle in dir.
func sentItemRunner(t *testing.T) (*Runner, *splitNameOCR, string) {
	t.Helper()
	p, err := LoadProfile("gajim")
	if err != nil {
		t.Fatal(err)
	}
	ours, text := color.RGBA{50, 90, 140, 255}, color.RGBA{30, 30, 30, 255}
	chat, ws := chatFrame([]chatLine{{"alice 11:33", ours, 10, 20}, {"report.txt", text, 80, 50}, {"17 bytes", text, 80, 65}})
	win := Window{ID: 1, Process: "gajim", Title: "Gajim", Viewable: true, Bounds: image.Rect(0, 0, 1280, 800)}
	frame := image.NewRGBA(win.Bounds)
	draw.Draw(frame, frame.Bounds(), &image.Uniform{color.RGBA{255, 255, 255, 255}}, image.Point{}, draw.Src)
	chatRect := p.Chat.Region.In(win.Bounds)
	draw.Draw(frame, chatRect, chat, image.Point{}, draw.Src)
	desk := chatDesk{windowsOnly: windowsOnly{ws: []Window{win}}, frame: frame}
	ocr := &splitNameOCR{chat: ws, reads: map[int]int{}}
	dir := filepath.Join(t.TempDir(), "bundle")
	rec, err := evidence.Create(dir, evidence.Manifest{Keys: []string{"v2:title:Bob:" + strings.Repeat("a", 64)}, Identity: "title:Bob", IdentityStrength: "weak",
		Title: "Bob", App: "gajim", Task: "t", Token: 1, DispatchID: strings.Repeat("b", 32), ContentSHA256: strings.Repeat("a", 64), Size: 17, FileName: "report.txt", ToolVersion: "test", Host: "test"}, evidence.SystemClock())
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Driver: desk, Reader: &vision.Reader{Screen: desk, OCR: ocr, Poll: time.Millisecond}, Rec: rec, Profile: p,
		Vars: Vars{Title: "Bob", FileName: "report.txt", Size: 17}}
	r.window = win
	return r, ocr, dir
}

// looksAfterSend verifies the bundle in dir and returns its reads of the chat after send.
func looksAfterSend(t *testing.T, dir string) []evidence.Record {
	t.Helper()
	b, err := evidence.Verify(dir, evidence.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var looks []evidence.Record
	for _, rc := range b.Records {
		if o := rc.Observed; o != nil && o.What == "sent_items" && o.Phase == "after_send" {
			looks = append(looks, rc)
		}
	}
	return looks
}

// TestWitnessEndsTheLook: when the other witness (the provider, in a delivery)
// confirms, the look for the sent item ends with the read it is at, recorded, instead
// of reading it again with the chat's other preparations or waiting the settle for a
// second read; a witness that never confirms changes nothing. Either way it is asked
// once, as the look begins. (The 2x read splits the file's name; the 1x read shows it.)
func TestWitnessEndsTheLook(t *testing.T) {
	for _, tc := range []struct {
		name    string
		confirm bool
		looks   int
		reads   map[int]int // chat reads by scale
		items   int         // in the first look recorded
	}{{"confirms", true, 1, map[int]int{2: 1}, 0}, {"never confirms", false, 2, map[int]int{2: 1, 1: 1}, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			r, ocr, dir := sentItemRunner(t)
			asked := 0
			r.Witness = func() <-chan struct{} {
				asked++
				c := make(chan struct{})
				if tc.confirm {
					close(c)
				}
				return c
			}
			if err := r.lookForSentItem(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			r.Rec.Close()
			if asked != 1 {
				t.Errorf("the witness was asked %d times; want once", asked)
			}
			if !maps.Equal(ocr.reads, tc.reads) {
				t.Errorf("chat reads by scale %v; want %v", ocr.reads, tc.reads)
			}
			looks := looksAfterSend(t, dir)
			if len(looks) != tc.looks {
				t.Fatalf("%d looks after send recorded; want %d", len(looks), tc.looks)
			}
			if its := looks[0].Observed.Items; len(its) != tc.items || (tc.items == 1 && its[0].Name != "report.txt") {
				t.Errorf("the first look recorded %+v; want %d item(s) named report.txt", its, tc.items)
			}
		})
	}
}

func TestSentItemReadAgainWithOtherPreps(t *testing.T) {
	r, ocr, dir := sentItemRunner(t)
	p := r.Profile
	if err := r.lookForSentItem(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if ocr.reads[2] != 1 || ocr.reads[1] != 1 {
		t.Errorf("chat reads by scale %v; want one at 2x (split the name), one at 1x (read it), none for the look a settle later", ocr.reads)
	}
	r.Rec.Close()
	looks := looksAfterSend(t, dir)
	if len(looks) != 2 {
		t.Fatalf("%d looks after send recorded; want 2", len(looks))
	}
	for i, l := range looks {
		if its := l.Observed.Items; len(its) != 1 || its[0].Name != "report.txt" || !its[0].Ours || !its[0].Finished {
			t.Errorf("look %d: items %+v; want report.txt, ours and finished", i, its)
		}
	}
	if gap := looks[1].Mono - looks[0].Mono; gap < p.Confirm.Settle.Duration.Nanoseconds() {
		t.Errorf("the looks were recorded %v apart; want at least the profile's settle %v", time.Duration(gap), p.Confirm.Settle.Duration)
	}
}

// titleScript reads the title region as the next of its titles (the last one for ever
// after), noting when each read came; any other region as splitNameOCR does.
type titleScript struct {
	*splitNameOCR
	titles []string
	at     []time.Time
}

func (o *titleScript) Recognize(ctx context.Context, img image.Image, m vision.Mode) ([]vision.Word, error) {
	if img.Bounds().Dx() != 780 {
		return o.splitNameOCR.Recognize(ctx, img, m)
	}
	t := o.titles[min(len(o.at), len(o.titles)-1)]
	o.at = append(o.at, time.Now())
	return []vision.Word{{Text: t, Box: image.Rect(300, 10, 340, 30), Confidence: 95}}, nil
}

// repaintingTitle is a desk whose title region repaints at every capture (one pixel
// differs each time), as a header that changes does: each read of it is OCR's. at is
// when each capture of the title region was made: a read begins with it.
type repaintingTitle struct {
	chatDesk
	n  int
	at []time.Time
}

func (d *repaintingTitle) Capture(ctx context.Context, r image.Rectangle) (*image.RGBA, error) {
	img, err := d.chatDesk.Capture(ctx, r)
	if err != nil || r.Dx() != 780 {
		return img, err
	}
	d.at = append(d.at, time.Now())
	cp := image.NewRGBA(img.Rect)
	draw.Draw(cp, cp.Rect, img, img.Rect.Min, draw.Src)
	d.n++
	cp.Pix[0] = uint8(d.n)
	return cp, nil
}

// TestTitleMustHoldForTwoReads: the title check passes only once two reads in a row
// show the expected title, the second at least titleGap after the first (a read made
// before, the first of a delivery's, counts when it agrees); a header that lags the
// switch is read until it agrees, and one that never does stops the delivery.
func TestTitleMustHoldForTwoReads(t *testing.T) {
	for _, tc := range []struct {
		name    string
		titles  []string
		first   bool // one read before the check, as a delivery makes before the chat's read
		reads   int
		stopped bool
	}{
		{"the title at once", []string{"Bob"}, false, 2, false},
		{"a read made before counts", []string{"Bob"}, true, 2, false},
		{"a header that lags", []string{"Alice", "", "Bob"}, true, 4, false},
		{"agreeing reads broken by another title", []string{"Bob", "Alice", "Bob"}, false, 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ocr, _ := sentItemRunner(t)
			script := &titleScript{splitNameOCR: ocr, titles: tc.titles}
			desk := &repaintingTitle{chatDesk: r.Driver.(chatDesk)}
			r.Driver, r.Reader.Screen, r.Reader.OCR = desk, desk, script
			var reads titleReads
			if tc.first {
				if err := r.readTitleAgain(context.Background(), &reads); err != nil {
					t.Fatal(err)
				}
			}
			err := r.checkTitle(context.Background(), &reads)
			if (err != nil) != tc.stopped {
				t.Fatalf("checkTitle: %v; want stopped %v", err, tc.stopped)
			}
			if len(script.at) != tc.reads {
				t.Errorf("%d reads of the title; want %d", len(script.at), tc.reads)
			}
			// The reads' captures, not their OCR: the time between a capture and its
			// OCR varies with the machine's load, and the rule is about what was seen.
			if n := len(desk.at); n < 2 || desk.at[n-1].Sub(desk.at[n-2]) < titleGap {
				t.Errorf("the captures of the two agreeing reads came %v apart; want at least %v", desk.at, titleGap)
			}
		})
	}
	t.Run("never the title", func(t *testing.T) {
		r, ocr, _ := sentItemRunner(t)
		r.Profile.Timings.TitleDeadline = Duration{Duration: 400 * time.Millisecond}
		desk := &repaintingTitle{chatDesk: r.Driver.(chatDesk)}
		r.Driver, r.Reader.Screen = desk, desk
		r.Reader.OCR = &titleScript{splitNameOCR: ocr, titles: []string{"Bob", "Bobby"}}
		err := r.checkTitle(context.Background(), &titleReads{})
		if !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), `"Bobby"`) {
			t.Fatalf("checkTitle: %v; want a stop naming the title read", err)
		}
	})
}

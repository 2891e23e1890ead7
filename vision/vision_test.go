package vision

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	xdraw "golang.org/x/image/draw"
)

func w(text string, x, y, line int) Word {
	return Word{Text: text, Box: image.Rect(x, y, x+7*len(text), y+13), Confidence: 90, Line: line}
}

func TestLinesAndFind(t *testing.T) {
	ws := []Word{w("Files…", 80, 10, 1), w("Add", 40, 10, 1), w("Cancel", 10, 50, 2), w("Send", 200, 50, 2), w("Files", 240, 50, 2)}
	ls := Lines(ws)
	if len(ls) != 2 || ls[0].Text != "Add Files…" || ls[1].Text != "Cancel Send Files" {
		t.Fatalf("lines %+v", ls)
	}
	if _, ok := FindLine(ws, "Add Files…"); !ok {
		t.Error("exact line not found")
	}
	if _, ok := FindLine(ws, "Add Files"); ok {
		t.Error("FindLine must be exact")
	}
	box, got, ok := FindPhrase(ws, "Send Files")
	if !ok || len(got) != 2 || box != image.Rect(200, 50, 275, 63) {
		t.Errorf("phrase: %v %v %v", box, got, ok)
	}
	if _, _, ok := FindPhrase(ws, "Add Files"); !ok {
		t.Error("a trailing ellipsis should not stop a phrase match")
	}
	if _, _, ok := FindPhrase(ws, "Files Send"); ok {
		t.Error("words out of order matched")
	}
}

func TestFindLineSuffix(t *testing.T) {
	for _, tc := range []struct {
		words []string
		want  bool
	}{
		{[]string{"/tmp/x/ab12/chart.pn", "gl"}, true}, // the cursor after "g" read as "l"
		{[]string{"/tmp/x/ab12/repo", "rt.txt]"}, true},
		{[]string{"/tmp/x/ab12/report.txt"}, true},
		{[]string{"/tmp/x/ab12/report.txt|", "|"}, true}, // the cursor read twice
		{[]string{"/tmp/x/ab12/report.txt|", "|", "|"}, false},
		{[]string{"/tmp/x/ab12/report.txtl", "|"}, false},
		{[]string{"/tmp/x/ab12/report.tx"}, false},
		{[]string{"/tmp/x/ab12/other.txt"}, false},
	} {
		var ws []Word
		for i, s := range tc.words {
			ws = append(ws, w(s, 10+i*300, 10, 1))
		}
		want := "report.txt"
		if tc.words[0] == "/tmp/x/ab12/chart.pn" {
			want = "chart.png"
		}
		if _, ok := FindLineSuffix(ws, want, nil); ok != tc.want {
			t.Errorf("%v ends with %s: %v, want %v", tc.words, want, ok, tc.want)
		}
	}
}

func TestFindWholeLine(t *testing.T) {
	const path = "/tmp/tb/staging/4fa0c1d2/report.txt"
	fold := func(got, want string) bool { return strings.EqualFold(got, want) } // a stand-in for the confusion folding
	for _, tc := range []struct {
		words []string
		want  bool
	}{
		{[]string{"/tmp/tb/staging/4fa0c1d2/report.txt"}, true},
		{[]string{"/tmp/tb/sta", "ging/4fa0", "c1d2/report.txt|"}, true}, // split by OCR, the cursor glued on
		{[]string{"/tmp/tb/staging/4fa0c1d2/report.txt|", "|"}, true},    // the cursor read twice
		{[]string{"/TMP/tb/staging/4fa0c1d2/report.txt"}, true},          // as match folds it
		{[]string{"/tmp/tb/stging/4fa0c1d2/report.txt"}, false},          // a directory's character dropped
		{[]string{"/tmp/tb/staging/4fa0c1d/report.txt"}, false},          // the dispatch's
		{[]string{"/tmp/tb/staging/4fa0c1d22/report.txt"}, false},        // one added
		{[]string{"x/tmp/tb/staging/4fa0c1d2/report.txt"}, false},        // something before it
		{[]string{"mp/tb/staging/4fa0c1d2/report.txt"}, false},           // the field scrolled: its start out of view
		{[]string{"/tmp/tb/staging/4fa0c1d2/report.tx"}, false},
	} {
		var ws []Word
		for i, s := range tc.words {
			ws = append(ws, w(s, 10+i*300, 10, 1))
		}
		if _, ok := FindWholeLine(ws, path, fold); ok != tc.want {
			t.Errorf("%v is %s: %v, want %v", tc.words, path, ok, tc.want)
		}
	}
	// A last character the cursor could be read as is the field's: a repeated "l" is not
	// a cursor, and a lost last "1" is not a "1" read as the cursor's "|".
	oneIsBar := func(got, want string) bool { return strings.ReplaceAll(got, "|", "1") == want }
	for _, tc := range [][2]string{{"/a/notes.xmll", "/a/notes.xml"}, {"/a/part|", "/a/part1"}} {
		if _, ok := FindWholeLine([]Word{w(tc[0], 10, 10, 1)}, tc[1], oneIsBar); ok {
			t.Errorf("%s read as %s", tc[0], tc[1])
		}
	}
}

func TestPrep(t *testing.T) {
	img := image.NewRGBA(image.Rect(100, 100, 102, 101))
	img.Pix[0], img.Pix[1], img.Pix[2], img.Pix[3] = 255, 255, 255, 255 // white, then black
	out := Prep{Gray: true, Invert: true}.Apply(img).(*image.Gray)
	if out.Bounds() != image.Rect(0, 0, 2, 1) || out.Pix[0] != 0 || out.Pix[1] != 255 {
		t.Fatalf("prep: %v %v", out.Bounds(), out.Pix)
	}
	big := Prep{Gray: true, Scale: 2, Threshold: 128, Smooth: true}.Apply(img).(*image.Gray)
	if big.Bounds() != image.Rect(0, 0, 4, 2) || big.Pix[0] != 255 || big.Pix[3] != 0 {
		t.Fatalf("scaled prep: %v %v", big.Bounds(), big.Pix)
	}
	if (Prep{}).Apply(img) != image.Image(img) {
		t.Error("the zero Prep must return the image itself")
	}
}

// scriptedScreen captures frames tagged by its script's bytes in turn (the last one
// for ever after): equal tags are equal pixels.
type scriptedScreen struct {
	tags []byte
	n    int
}

func (s *scriptedScreen) Capture(_ context.Context, r image.Rectangle) (*image.RGBA, error) {
	img := image.NewRGBA(r)
	img.Pix[0] = s.tags[min(s.n, len(s.tags)-1)]
	s.n++
	return img, nil
}

// taggedOCR reads "Send" at the same place in every frame tagged with one of found's
// tags and nothing in the others, and notes the tag of each frame it reads.
type taggedOCR struct {
	found string
	read  []byte
}

func (o *taggedOCR) Recognize(_ context.Context, img image.Image, _ Mode) ([]Word, error) {
	tag := img.(*image.RGBA).Pix[0]
	o.read = append(o.read, tag)
	if strings.IndexByte(o.found, tag) < 0 {
		return nil, nil
	}
	return []Word{{Text: "Send", Box: image.Rect(10, 10, 50, 25), Confidence: 95}}, nil
}

// TestWaitStableReadsSettledFrames: OCR reads a frame only once it has held still for a
// poll (never one of a transition), reads it once, and still reads a region that never
// holds still, every few captures, finding an anchor there only when two reads agree.
func TestWaitStableReadsSettledFrames(t *testing.T) {
	for _, tc := range []struct {
		name          string
		frames, found string
		captures      int
		reads         string // the tags of the frames read, in order
		wantErr       bool
	}{
		{name: "still from the start", frames: "a", found: "a", captures: 2, reads: "a"},
		{name: "a transition, then still", frames: "abcdd", found: "d", captures: 5, reads: "d"},
		{name: "the anchor passes by in a transition", frames: "abcdeffff", found: "c", wantErr: true, reads: "df"},
		{name: "it appears while it is read", frames: "aab", found: "b", captures: 4, reads: "ab"},
		{name: "never still", frames: "abcdefghijklmnop", found: "abcdefghijklmnop", captures: 8, reads: "dh"},
		{name: "never still, found in one read only", frames: "abcdefghijklmnop", found: "d", wantErr: true, reads: "dhlp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			screen, ocr := &scriptedScreen{tags: []byte(tc.frames)}, &taggedOCR{found: tc.found}
			rd := &Reader{Screen: screen, OCR: ocr, Poll: time.Millisecond}
			f, err := rd.WaitStable(context.Background(), image.Rect(0, 0, 200, 100), Anchor{Text: "Send"}, 200*time.Millisecond)
			if tc.wantErr {
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("err %v, want ErrNotFound", err)
				}
			} else if err != nil || f.Box != image.Rect(10, 10, 50, 25) || screen.n != tc.captures {
				t.Fatalf("box %v after %d captures (want %d), err %v", f.Box, screen.n, tc.captures, err)
			}
			if got := string(ocr.read); got != tc.reads {
				t.Errorf("read frames %q, want %q", got, tc.reads)
			}
			if !tc.wantErr && f.Reads != len(tc.reads) {
				t.Errorf("Found.Reads %d, want %d", f.Reads, len(tc.reads))
			}
		})
	}
}

// TestWaitStableSaysCancelled: a wait its caller cancelled says so; it does not claim
// the text failed to appear within its timeout.
func TestWaitStableSaysCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	rd := &Reader{Screen: &scriptedScreen{tags: []byte("a")}, OCR: &taggedOCR{}, Poll: time.Millisecond}
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	_, err := rd.WaitStable(ctx, image.Rect(0, 0, 10, 10), Anchor{Text: "Send"}, time.Minute)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrNotFound) {
		t.Fatalf("a cancelled wait: %v; want context.Canceled, not ErrNotFound", err)
	}
	_, err = rd.WaitGone(ctx, image.Rect(0, 0, 10, 10), Anchor{Text: "Send"}, time.Minute)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled WaitGone: %v; want context.Canceled", err)
	}
}

// deadlineScreen is scriptedScreen that keeps the context of its last capture: the
// wait's own, which ends at the wait's deadline.
type deadlineScreen struct {
	scriptedScreen
	mu  sync.Mutex
	ctx context.Context
}

func (s *deadlineScreen) Capture(ctx context.Context, r image.Rectangle) (*image.RGBA, error) {
	s.mu.Lock()
	s.ctx = ctx
	s.mu.Unlock()
	return s.scriptedScreen.Capture(ctx, r)
}

// slowOCR is taggedOCR on a loaded machine: a read ends only once the wait's deadline
// has passed (its screen's last capture context is done), unless its own context ends
// first.
type slowOCR struct {
	taggedOCR
	screen *deadlineScreen
}

func (o *slowOCR) Recognize(ctx context.Context, img image.Image, m Mode) ([]Word, error) {
	o.screen.mu.Lock()
	deadline := o.screen.ctx.Done()
	o.screen.mu.Unlock()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-deadline:
	}
	select {
	case <-ctx.Done(): // the read's own context ended with the wait's: no overrun
		return nil, ctx.Err()
	case <-time.After(10 * time.Millisecond):
	}
	return o.taggedOCR.Recognize(ctx, img, m)
}

// TestWaitReadsWhatShowedInTime: the timeout bounds what the app takes to show, not what
// reading it takes. A still frame captured in time and read past the deadline (OCR on a
// loaded machine: CI's TestLiveUnderLoad ended not_sent with the send page on screen) is
// found, and for WaitGone a frame without it is read to the end likewise; an anchor that
// is acted on (clicked) is not, so that no click lands by a frame older than the wait;
// what shows only after the deadline is not found.
func TestWaitReadsWhatShowedInTime(t *testing.T) {
	const timeout = 300 * time.Millisecond
	region, send := image.Rect(0, 0, 200, 100), Anchor{Text: "Send"}
	slow := func(frames, found string) *Reader {
		screen := &deadlineScreen{scriptedScreen: scriptedScreen{tags: []byte(frames)}}
		return &Reader{Screen: screen, OCR: &slowOCR{taggedOCR{found: found}, screen}, Poll: time.Millisecond}
	}
	if f, err := slow("c", "c").WaitStable(context.Background(), region, send, timeout); err != nil || f.Box.Empty() {
		t.Fatalf("a page that showed in time, read slowly: %v (box %v)", err, f.Box)
	}
	if _, err := slow("b", "a").WaitGone(context.Background(), region, send, timeout); err != nil {
		t.Fatalf("gone in time, read slowly: %v", err)
	}
	acted := send
	acted.Acted = true
	if _, err := slow("c", "c").WaitStable(context.Background(), region, acted, timeout); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a button to click, read past the deadline: %v, want ErrNotFound", err)
	}
	// At least 2 s of captures a millisecond apart before "b" shows.
	rd := &Reader{Screen: &scriptedScreen{tags: []byte(strings.Repeat("a", 2000) + "b")}, OCR: &taggedOCR{found: "b"}, Poll: time.Millisecond}
	if _, err := rd.WaitStable(context.Background(), region, send, timeout); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a page that showed after the deadline: %v, want ErrNotFound", err)
	}
}

// readingsByScale reads one line, a reading of its own for each preparation's scale.
type readingsByScale map[int]string

func (o readingsByScale) Recognize(_ context.Context, img image.Image, _ Mode) ([]Word, error) {
	scale := img.Bounds().Dx() / 200
	if text, ok := o[scale]; ok {
		return []Word{{Text: text, Box: image.Rect(0, 0, 190*scale, 20*scale), Confidence: 90}}, nil
	}
	return nil, nil
}

// TestWholeLineAcrossReadings: a whole-line check passes on one frame when its readings
// together show every character in place, each reading leaving some out (OCR drops a
// narrow "1"), none showing one more; a character every reading lacks, as a field that
// lost it shows, fails however many preparations read it.
func TestWholeLineAcrossReadings(t *testing.T) {
	const path = "/s/7c1ea51b/f.txt"
	for _, tc := range []struct {
		name     string
		readings readingsByScale
		want     bool
		path     string // path when empty
	}{
		// The field lost one of "aa": every reading aligns its one "a" to the first.
		{"one of two lost", readingsByScale{1: "/s/7c1ea1b/f.txt", 2: "/s/7cea1b/f.txt"}, false, "/s/7c1eaa1b/f.txt"},
		{"one reading whole", readingsByScale{1: path}, true, ""},
		{"each drops another", readingsByScale{1: "/s/7cea51b/f.txt", 2: "/s/7c1ea5b/f.txt"}, true, ""},
		{"a cursor after one", readingsByScale{1: "/s/7cea51b/f.txt|", 2: "/s/7c1ea5b/f.txt|"}, true, ""},
		{"both drop the same", readingsByScale{1: "/s/7c1a51b/f.txt", 2: "/s/7c1a51b/f.txt", 3: "/s/7c1a5b/f.txt"}, false, ""},
		{"no reading shows the 1", readingsByScale{1: "/s/7cea51b/f.txt", 2: "/s/7cea51b/f.txt"}, false, ""},
		// The field lost the first "2" of "c12d2"; a reading that leaves the "d" out fits
		// its "2" either there or after the "d": placed nowhere for certain, it marks nothing.
		{"a reading that could fill the gap", readingsByScale{1: "/t/4fa0c1d2/r.txt", 2: "/t/4fa0c12/r.txt"}, false, "/t/4fa0c12d2/r.txt"},
		{"a narrow glyph left out beside its twin", readingsByScale{1: "/s/15/f.txt", 2: "/s/5/f.txt"}, false, "/s/515/f.txt"},
		{"one more, and one less", readingsByScale{1: "/s/7c1ea551b/f.txt", 2: "/s/7c1ea1b/f.txt"}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rd := &Reader{Screen: &scriptedScreen{tags: []byte("a")}, OCR: tc.readings, Poll: time.Millisecond}
			want := path
			if tc.path != "" {
				want = tc.path
			}
			a := Anchor{Text: want, WholeLine: true, Mode: SingleLine, Prep: Prep{Scale: 1}, AltPreps: []Prep{{Scale: 2}, {Scale: 3}}}
			_, err := rd.WaitStable(context.Background(), image.Rect(0, 0, 200, 30), a, 100*time.Millisecond)
			if (err == nil) != tc.want {
				t.Fatalf("%v: err %v; want found %v", tc.readings, err, tc.want)
			}
		})
	}
}

// TestPrepMatchesDraw: Apply's pixels are those of x/image/draw's scalers into a gray
// image (what Apply did before its faster paths), for every preparation the profiles
// use, on random pixels and on odd sizes and offsets.
func TestPrepMatchesDraw(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []image.Rectangle{image.Rect(0, 0, 1, 1), image.Rect(3, 5, 40, 22), image.Rect(0, 0, 97, 61), image.Rect(425, 107, 685, 431)} {
		img := image.NewRGBA(size)
		for i := range img.Pix {
			img.Pix[i] = uint8(rng.UintN(256))
		}
		for _, p := range []Prep{{Gray: true}, {Gray: true, Scale: 2}, {Gray: true, Scale: 3}, {Gray: true, Scale: 2, Smooth: true},
			{Gray: true, Scale: 3, Smooth: true}, {Gray: true, Scale: 2, Invert: true}, {Gray: true, Scale: 2, Smooth: true, Threshold: 128}} {
			got := p.Apply(img).(*image.Gray)
			want := applyWithDraw(p, img)
			if got.Rect != want.Rect || !bytes.Equal(got.Pix, want.Pix) {
				t.Errorf("%+v on %v: %v differs from draw's %v", p, size, got.Rect, want.Rect)
			}
		}
	}
}

// applyWithDraw is Prep.Apply as it was: x/image/draw's scalers into an *image.Gray.
func applyWithDraw(p Prep, img *image.RGBA) *image.Gray {
	gray := p.gray(img)
	out := gray
	if s := max(p.Scale, 1); s > 1 {
		out = image.NewGray(image.Rect(0, 0, gray.Rect.Dx()*s, gray.Rect.Dy()*s))
		var scaler xdraw.Scaler = xdraw.NearestNeighbor
		if p.Smooth {
			scaler = xdraw.BiLinear
		}
		scaler.Scale(out, out.Bounds(), gray, gray.Bounds(), xdraw.Src, nil)
	}
	p.threshold(out)
	return out
}

// BenchmarkPrepChat: the chat's preparation (gray, 2x bilinear) of a 520x648 crop.
func BenchmarkPrepChat(b *testing.B) {
	img := image.NewRGBA(image.Rect(425, 107, 945, 755))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	for _, p := range []Prep{{Gray: true, Scale: 2, Smooth: true}, {Gray: true, Scale: 2}} {
		b.Run(fmt.Sprintf("scale2-smooth-%v", p.Smooth), func(b *testing.B) {
			for b.Loop() {
				p.Apply(img)
			}
		})
		b.Run(fmt.Sprintf("draw-scale2-smooth-%v", p.Smooth), func(b *testing.B) {
			for b.Loop() {
				applyWithDraw(p, img)
			}
		})
	}
}

// BenchmarkPixelHash: the hash of a full 1280x800 capture, taken at every poll of a wait.
func BenchmarkPixelHash(b *testing.B) {
	img := image.NewRGBA(image.Rect(0, 0, 1280, 800))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	for b.Loop() {
		PixelHash(img)
	}
}

// TestPixelHash: equal pixels hash equal (whatever image holds them, and only the
// pixels inside the bounds count); one changed pixel changes the hash.
func TestPixelHash(t *testing.T) {
	a := image.NewRGBA(image.Rect(0, 0, 64, 48))
	for i := range a.Pix {
		a.Pix[i] = uint8(i * 13)
	}
	b := image.NewRGBA(a.Rect)
	copy(b.Pix, a.Pix)
	crop := a.SubImage(image.Rect(8, 8, 40, 30)).(*image.RGBA)
	cropCopy := image.NewRGBA(crop.Rect)
	for y := crop.Rect.Min.Y; y < crop.Rect.Max.Y; y++ {
		copy(cropCopy.Pix[cropCopy.PixOffset(crop.Rect.Min.X, y):], crop.Pix[crop.PixOffset(crop.Rect.Min.X, y):crop.PixOffset(crop.Rect.Max.X, y)])
	}
	if PixelHash(a) != PixelHash(b) || PixelHash(crop) != PixelHash(cropCopy) {
		t.Fatal("equal pixels hashed differently")
	}
	was := PixelHash(crop)
	a.Pix[a.PixOffset(0, 0)] ^= 1 // outside the crop
	if PixelHash(crop) != was {
		t.Error("a pixel outside the bounds changed the hash")
	}
	a.Pix[a.PixOffset(20, 20)+2] ^= 1
	if PixelHash(crop) == was {
		t.Error("a changed pixel kept the hash")
	}
}

// TestReaderRemembersRecentReads: a frame with the pixels of one of the last reads, read
// the same way, gives that read's words without OCR; other pixels, another region or
// another mode are read; a read pushed out by recentReads newer ones is read again; and
// a caller changing the words it got does not change what the next one gets.
func TestReaderRemembersRecentReads(t *testing.T) {
	ctx := context.Background()
	r, other := image.Rect(0, 0, 20, 10), image.Rect(5, 0, 25, 10)
	screen := &scriptedScreen{}
	ocr := &taggedOCR{found: "a"}
	rd := &Reader{Screen: screen, OCR: ocr}
	read := func(tag byte, region image.Rectangle, mode Mode) Look {
		t.Helper()
		screen.tags, screen.n = []byte{tag}, 0
		l, err := rd.Read(ctx, region, Prep{}, mode)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	first := read('a', r, Sparse)
	first.Words[0].Text = "changed by the caller"
	again := read('a', r, Sparse)
	read('b', r, Sparse)
	read('a', r, Sparse)
	read('a', other, Sparse)
	read('a', r, SingleLine)
	if string(ocr.read) != "abaa" {
		t.Errorf("OCR read frames tagged %q; want %q (the first, then only new pixels, region or mode)", ocr.read, "abaa")
	}
	if len(again.Words) != 1 || again.Words[0].Text != "Send" {
		t.Errorf("a remembered read gave %+v; want the words OCR read", again.Words)
	}
	for tag := byte('c'); tag < 'c'+recentReads; tag++ {
		read(tag, r, Sparse)
	}
	ocr.read = nil
	read('a', r, Sparse)
	if string(ocr.read) != "a" {
		t.Errorf("after %d newer reads, OCR read %q; want the frame read again", recentReads, ocr.read)
	}
}

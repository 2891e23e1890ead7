package vision

import (
	"context"
	"image"
	"testing"
	"time"
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

// stillScreen captures the same pixels every time, or, when changing, new ones each
// time (the anchor's word stays where it is).
type stillScreen struct {
	changing bool
	n        int
}

func (s *stillScreen) Capture(_ context.Context, r image.Rectangle) (*image.RGBA, error) {
	s.n++
	img := image.NewRGBA(r)
	if s.changing {
		img.Pix[0] = byte(s.n)
	}
	return img, nil
}

// countingOCR reads "Send" at the same place and counts its calls.
type countingOCR struct{ calls int }

func (o *countingOCR) Recognize(context.Context, image.Image, Mode) ([]Word, error) {
	o.calls++
	return []Word{{Text: "Send", Box: image.Rect(10, 10, 50, 25), Confidence: 95}}, nil
}

// TestWaitStableReadsOnlyChangedFrames: an anchor holds still in two captures; when the
// second capture's pixels equal the first's, OCR runs once, and when they changed, it
// reads them again.
func TestWaitStableReadsOnlyChangedFrames(t *testing.T) {
	for _, changing := range []bool{false, true} {
		ocr, screen := &countingOCR{}, &stillScreen{changing: changing}
		rd := &Reader{Screen: screen, OCR: ocr, Poll: time.Millisecond}
		f, err := rd.WaitStable(context.Background(), image.Rect(0, 0, 200, 100), Anchor{Text: "Send"}, time.Second)
		if err != nil || f.Box != image.Rect(10, 10, 50, 25) {
			t.Fatalf("changing=%v: %v, %v", changing, f.Box, err)
		}
		want := 1
		if changing {
			want = 2
		}
		if screen.n != 2 || ocr.calls != want {
			t.Errorf("changing=%v: %d captures, %d OCR calls; want 2 captures and %d OCR call(s)", changing, screen.n, ocr.calls, want)
		}
	}
}

//go:build cgo

package tesseract

import (
	"context"
	"image"
	"image/draw"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/sendonce/sendonce/vision"
)

// chatFrame is a recorded 1280x800 Gajim frame (a chat with file cards), from the
// fixtures.
func chatFrame(tb testing.TB) *image.RGBA {
	tb.Helper()
	frames, _ := filepath.Glob("../../testdata/fixtures/verified-text-file/frames/*.png")
	var best *image.RGBA
	var bestSize int64
	for _, f := range frames { // the largest file: the busiest frame
		fi, _ := os.Stat(f)
		if fi.Size() <= bestSize {
			continue
		}
		r, _ := os.Open(f)
		src, err := png.Decode(r)
		r.Close()
		if err != nil {
			tb.Fatal(err)
		}
		best = image.NewRGBA(src.Bounds())
		draw.Draw(best, best.Bounds(), src, image.Point{}, draw.Src)
		bestSize = fi.Size()
	}
	if best == nil {
		tb.Fatal("no recorded frames under testdata/fixtures")
	}
	return best
}

func benchRead(b *testing.B, r image.Rectangle, prep vision.Prep, mode vision.Mode) {
	b.Setenv("OMP_THREAD_LIMIT", "1") // only effective if set before the process started: scripts/bench does
	c, err := New(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	frame := chatFrame(b)
	crop := vision.Crop(frame, r)
	for b.Loop() {
		if _, err := c.Recognize(context.Background(), prep.Apply(crop), mode); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOCRHeader reads the conversation header (the title) as one line.
func BenchmarkOCRHeader(b *testing.B) {
	benchRead(b, image.Rect(480, 43, 1260, 101), vision.Prep{}, vision.SingleLine)
}

// BenchmarkOCRChat reads the chat area for sent items (grayscale, 2x bilinear).
func BenchmarkOCRChat(b *testing.B) {
	benchRead(b, image.Rect(425, 107, 945, 755), vision.Prep{Gray: true, Scale: 2, Smooth: true}, vision.Sparse)
}

// BenchmarkOCRFullScreen reads the whole 1280x800 frame, for comparison with crops.
func BenchmarkOCRFullScreen(b *testing.B) {
	benchRead(b, image.Rect(0, 0, 1280, 800), vision.Prep{}, vision.Sparse)
}

// TestReadsRecordedHeader: OCR of a recorded frame's header reads the title exactly.
func TestReadsRecordedHeader(t *testing.T) {
	c, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frames, _ := filepath.Glob("../../testdata/fixtures/wrong-title/frames/*.png")
	found := false
	for _, f := range frames {
		r, _ := os.Open(f)
		src, err := png.Decode(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		img := image.NewRGBA(src.Bounds())
		draw.Draw(img, img.Bounds(), src, image.Point{}, draw.Src)
		ws, err := c.Recognize(context.Background(), vision.Crop(img, image.Rect(480, 43, 1260, 101)), vision.SingleLine)
		if err != nil {
			t.Fatal(err)
		}
		if l, ok := vision.FindLine(ws, "Bob"); ok && l.Text == "Bob" {
			found = true
		}
	}
	if !found {
		t.Fatal("no recorded frame's header read exactly \"Bob\"")
	}
}

package evidence

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"os"
	"path/filepath"
	"testing"
)

// desktopFrame is a 1280x800 frame with some structure, like a chat window: PNG cost
// depends on content, so a flat frame would flatter the encoder.
func desktopFrame(variant int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, 1280, 800))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.RGBA{246, 245, 244, 255}}, image.Point{}, draw.Src)
	draw.Draw(img, image.Rect(0, 0, 1280, 48), &image.Uniform{color.RGBA{53, 132, 228, 255}}, image.Point{}, draw.Src)
	for i := 0; i < 14; i++ { // message bubbles
		y := 70 + i*48
		draw.Draw(img, image.Rect(300, y, 300+400+(i*37+variant*11)%500, y+36), &image.Uniform{color.RGBA{255, 255, 255, 255}}, image.Point{}, draw.Src)
		for x := 310; x < 300+380; x += 9 { // text-like speckle
			img.Set(x, y+12+(x+variant)%11, color.Black)
		}
	}
	return img
}

// BenchmarkRecordStep is one step's recording cost at 1280x800, as a delivery pays it:
// the before frame is the previous step's after frame (seen: hashed, not encoded), the
// after frame is new (hashed, PNG-encoded, written); then the record is appended and
// flushed.
func BenchmarkRecordStep(b *testing.B) {
	r, err := Create(filepath.Join(b.TempDir(), "b"), testManifest("report.txt", content), nil)
	if err != nil {
		b.Fatal(err)
	}
	frame := desktopFrame(0)
	before, _ := r.Frame(frame)
	for i := 0; b.Loop(); i++ {
		next := desktopFrame(i % 7)
		next.Pix[4*(i%(1280*800))] ^= 0xff // a pixel changes: a new frame every step
		before2, err := r.Frame(frame)
		if err != nil || before2 != before {
			b.Fatal("the previous frame was not deduplicated", err)
		}
		after, err := r.Frame(next)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Append(Record{Kind: KindStep, Intent: "press send", Class: Submit, Before: before, After: after}); err != nil {
			b.Fatal(err)
		}
		frame, before = next, after
	}
}

// BenchmarkFrameNew is one new 1280x800 frame: pixel hash, PNG encoding, content hash, write.
func BenchmarkFrameNew(b *testing.B) {
	r, err := Create(filepath.Join(b.TempDir(), "b"), testManifest("report.txt", content), nil)
	if err != nil {
		b.Fatal(err)
	}
	img := desktopFrame(0)
	for i := 0; b.Loop(); i++ {
		img.Pix[4*(i%(1280*800))] ^= 0xff
		if _, err := r.Frame(img); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFrameSeen is a 1280x800 frame equal to the last one stored: a comparison of
// the pixels only.
func BenchmarkFrameSeen(b *testing.B) {
	r, err := Create(filepath.Join(b.TempDir(), "b"), testManifest("report.txt", content), nil)
	if err != nil {
		b.Fatal(err)
	}
	img := desktopFrame(0)
	r.Frame(img)
	for b.Loop() {
		if _, err := r.Frame(img); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFrameSeenEarlier is a 1280x800 frame stored before, but not the last one:
// the pixel hash.
func BenchmarkFrameSeenEarlier(b *testing.B) {
	r, err := Create(filepath.Join(b.TempDir(), "b"), testManifest("report.txt", content), nil)
	if err != nil {
		b.Fatal(err)
	}
	imgs := []*image.RGBA{desktopFrame(0), desktopFrame(1)}
	r.Frame(imgs[0])
	r.Frame(imgs[1])
	for i := 0; b.Loop(); i++ {
		if _, err := r.Frame(imgs[i%2]); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBundleSizeReport prints a typical attempt's bundle size with and without frame
// deduplication (go test -run BundleSize -v ./evidence). It asserts only that dedupe
// never makes a bundle larger.
func TestBundleSizeReport(t *testing.T) {
	// A typical attempt: 8 steps, each with a before and an after frame; the after of
	// one step is the before of the next, and the chat view repeats.
	seq := []int{0, 1, 1, 2, 2, 3, 3, 0, 0, 1, 1, 2, 2, 0, 0, 3}
	r, err := Create(filepath.Join(t.TempDir(), "b"), testManifest("report.txt", content), nil)
	if err != nil {
		t.Fatal(err)
	}
	var undeduped int64
	for i := 0; i < len(seq); i += 2 {
		before, _ := r.Frame(desktopFrame(seq[i]))
		after, _ := r.Frame(desktopFrame(seq[i+1]))
		for _, h := range []string{before, after} {
			fi, _ := os.Stat(filepath.Join(r.Dir(), "frames", h+".png"))
			undeduped += fi.Size()
		}
		r.Append(Record{Kind: KindStep, Intent: fmt.Sprint("step ", i/2), Class: Safe, Before: before, After: after})
	}
	r.Seal("not_sent", nil, nil)
	var deduped int64
	filepath.Walk(r.Dir(), func(p string, fi os.FileInfo, err error) error {
		if !fi.IsDir() {
			deduped += fi.Size()
		}
		return nil
	})
	frames, _ := filepath.Glob(filepath.Join(r.Dir(), "frames", "*"))
	t.Logf("attempt with %d frame references: bundle %d bytes deduplicated (%d distinct frames); frames alone without dedupe %d bytes", len(seq), deduped, len(frames), undeduped)
	if deduped > undeduped+64<<10 {
		t.Fatalf("dedupe made the bundle larger: %d > %d", deduped, undeduped)
	}
}

package vision

import (
	"context"
	"image"
	"os"
	"testing"
)

// BenchmarkCapture is one full 1280x800 capture from the X display in $DISPLAY (the
// test bed's: scripts/bench-delivery runs it).
func BenchmarkCapture(b *testing.B) {
	if os.Getenv("DISPLAY") == "" {
		b.Fatal("BenchmarkCapture needs an X display in DISPLAY (testbed/up)")
	}
	var s X11Screen
	r := image.Rect(0, 0, 1280, 800)
	for b.Loop() {
		if _, err := s.Capture(context.Background(), r); err != nil {
			b.Fatal(err)
		}
	}
}

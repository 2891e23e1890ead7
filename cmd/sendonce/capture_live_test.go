//go:build cgo

package main

import (
	"bytes"
	"context"
	"image"
	"testing"

	"github.com/sendonce/sendonce/driver/x11"
	"github.com/sendonce/sendonce/vision"
)

// TestLiveCaptureOnOneConnection: the live desktop's captures, over its one X
// connection, are pixel for pixel what kbinani/screenshot reads over a new connection
// (vision.X11Screen), for the whole screen and for a region partly off it (black
// there). A pair is compared only when the screen held still around the second read
// (two captures of ours equal), so a blinking caret cannot fail it. On the test bed's
// local Xvfb the captures must come through shared memory (MIT-SHM).
func TestLiveCaptureOnOneConnection(t *testing.T) {
	d, _ := liveDesktop(t)
	if !d.SharesMemory() {
		t.Error("captures of a local Xvfb do not come through shared memory (MIT-SHM): they fell back to the socket")
	}
	ctx := context.Background()
	var other vision.X11Screen
	for _, r := range []image.Rectangle{d.Bounds(), image.Rect(1100, 600, 1400, 900), image.Rect(421, 33, 977, 420)} {
		compared := false
		for try := 0; try < 20 && !compared; try++ {
			a, err := d.Capture(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			k, err := other.Capture(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			b, err := d.Capture(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if a.Rect != r || !bytes.Equal(a.Pix, b.Pix) {
				continue // the screen changed meanwhile, or a wrong frame: try again
			}
			compared = true
			if k.Rect != a.Rect || !bytes.Equal(k.Pix, a.Pix) {
				t.Fatalf("capture of %v: %v, %d bytes differ from kbinani/screenshot's %v", r, a.Rect, countDiff(a.Pix, k.Pix), k.Rect)
			}
		}
		if !compared {
			t.Fatalf("the screen never held still for two captures of %v", r)
		}
	}
}

func countDiff(a, b []byte) int {
	n := max(len(a), len(b)) - min(len(a), len(b))
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// BenchmarkLiveCapture: a full-screen capture over the desktop's connection, beside
// kbinani/screenshot's over a new connection each time (scripts/bench-delivery runs it).
func BenchmarkLiveCapture(b *testing.B) {
	d, _ := liveDesktop(b)
	ctx := context.Background()
	var other vision.X11Screen
	for _, s := range []struct {
		name   string
		screen interface {
			Capture(context.Context, image.Rectangle) (*image.RGBA, error)
		}
	}{{"one-connection", d}, {"kbinani-new-connection", &other}} {
		b.Run(s.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.screen.Capture(ctx, image.Rect(0, 0, 1280, 800)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// liveDesktop opens the live desktop on the test bed's display (Gajim's), with DISPLAY
// set to it for the test (vision.X11Screen and robotgo read it), closed when the test
// ends.
func liveDesktop(tb testing.TB) (*x11.Desktop, string) {
	tb.Helper()
	display := liveTestBed(tb).display(tb)
	tb.Setenv("DISPLAY", display)
	d, err := x11.Open(display)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(d.Close)
	return d, display
}

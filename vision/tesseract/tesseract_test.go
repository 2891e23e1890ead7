//go:build cgo

package tesseract

import (
	"context"
	"image"
	"image/color"
	"image/draw"
	"sync"
	"testing"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/sendonce/sendonce/vision"
)

// TestWarmUpIsInvisible: New returns while the model loads in the background; calls
// made at once (two goroutines) wait for it and read the text, and a Close right after
// New waits for the load instead of freeing the engine under it.
func TestWarmUpIsInvisible(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 120, 30))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	d := &font.Drawer{Dst: img, Src: image.NewUniform(color.Black), Face: basicfont.Face7x13, Dot: fixed.P(10, 20)}
	d.DrawString("Send Files")
	page := vision.Prep{Gray: true, Scale: 3}.Apply(img)

	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([][]vision.Word, 2)
	errs := make([]error, 2)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = c.Recognize(context.Background(), page, vision.SingleLine)
		}()
	}
	wg.Wait()
	for i := range got {
		if _, _, ok := vision.FindPhrase(got[i], "Send Files"); errs[i] != nil || !ok {
			t.Errorf("call %d right after New: %v, %v; want \"Send Files\" read", i, got[i], errs[i])
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c, err = New()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil { // while the model may still be loading
		t.Fatal(err)
	}
}

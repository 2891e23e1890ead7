package vision

import (
	"context"
	"image"
	"sync"

	"github.com/kbinani/screenshot"
)

// X11Screen captures from the X display named by $DISPLAY.
type X11Screen struct {
	mu sync.Mutex
}

// Capture implements Screen.
func (s *X11Screen) Capture(ctx context.Context, r image.Rectangle) (*image.RGBA, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	img, err := screenshot.CaptureRect(r)
	if err != nil {
		return nil, err
	}
	// Keep screen coordinates: the capture's origin is r.Min.
	img.Rect = img.Rect.Add(r.Min.Sub(img.Rect.Min))
	return img, nil
}

// Bounds is the first display's bounds.
func (s *X11Screen) Bounds() image.Rectangle { return screenshot.GetDisplayBounds(0) }

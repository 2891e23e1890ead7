//go:build cgo

package tesseract

import (
	"context"
	"image"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/vision"
)

// TestBandedKeepsTheCharset: a read limited to a charset is limited so through
// NewBanded's engines, the first and the one that loaded in the background alike (a
// location field read back whole relies on it); the same crop read without one shows
// other characters, so the limit is what made the difference.
func TestBandedKeepsTheCharset(t *testing.T) {
	b, err := NewBanded(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	crop := vision.Prep{Gray: true, Scale: 2}.Apply(vision.Crop(chatFrame(t), image.Rect(425, 107, 945, 755)))
	const digits = "0123456789"
	outside := func(ws []vision.Word) string {
		var out []string
		for _, w := range ws {
			if strings.Trim(w.Text, digits) != "" {
				out = append(out, w.Text)
			}
		}
		return strings.Join(out, " ")
	}
	free, err := b.Recognize(context.Background(), crop, vision.Sparse)
	if err != nil {
		t.Fatal(err)
	}
	if outside(free) == "" {
		t.Fatal("the chat read without a charset shows digits only: the test proves nothing")
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(b.Engines) > 1 && !b.Engines[1].(interface{ Available() bool }).Available() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	engines := map[string]vision.OCR{"banded": b, "first engine": b.Engines[0]}
	if len(b.Engines) > 1 {
		engines["background engine"] = b.Engines[1]
	}
	for name, e := range engines {
		ws, err := vision.RecognizeCharset(context.Background(), e, crop, vision.Sparse, digits)
		if err != nil {
			t.Fatal(err)
		}
		if o := outside(ws); o != "" {
			t.Errorf("%s, limited to digits, read %q", name, o)
		}
	}
}

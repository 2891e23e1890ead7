package evidence

import (
	"bytes"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// samePixels fails unless a and b have the same bounds' size and colours.
func samePixels(t testing.TB, a, b image.Image) {
	t.Helper()
	ab, bb := a.Bounds(), b.Bounds()
	if ab.Dx() != bb.Dx() || ab.Dy() != bb.Dy() {
		t.Fatalf("decoded %v; want the size of %v", bb, ab)
	}
	for y := 0; y < ab.Dy(); y++ {
		for x := 0; x < ab.Dx(); x++ {
			ca := color.NRGBAModel.Convert(a.At(ab.Min.X+x, ab.Min.Y+y))
			cb := color.NRGBAModel.Convert(b.At(bb.Min.X+x, bb.Min.Y+y))
			if ca != cb {
				t.Fatalf("pixel (%d,%d) decoded as %v; want %v", x, y, cb, ca)
			}
		}
	}
}

// roundTrip encodes img with encodePNG, decodes it with image/png, compares the pixels
// and returns the PNG's colour type (2: RGB, 6: RGBA, ...).
func roundTrip(t testing.TB, img image.Image) byte {
	t.Helper()
	var buf bytes.Buffer
	if err := encodePNG(&buf, img); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	got, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("image/png cannot decode it: %v", err)
	}
	samePixels(t, img, got)
	return b[25] // the IHDR's colour type: signature 8, length 4, type 4, width 4, height 4, depth 1
}

// TestEncodePNG: every frame decodes to its own pixels; an opaque RGBA (a screen
// capture, a crop of one with its own origin) takes the fast RGB path, anything else
// image/png's encoder (alpha kept).
func TestEncodePNG(t *testing.T) {
	frames, _ := filepath.Glob("../testdata/fixtures/verified-text-file/frames/*.png")
	if len(frames) == 0 {
		t.Fatal("no recorded frames under testdata/fixtures")
	}
	f, err := os.Open(frames[0])
	if err != nil {
		t.Fatal(err)
	}
	src, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	screen := image.NewRGBA(src.Bounds())
	draw.Draw(screen, screen.Bounds(), src, image.Point{}, draw.Src)
	translucent := image.NewRGBA(image.Rect(0, 0, 3, 2))
	draw.Draw(translucent, translucent.Bounds(), &image.Uniform{color.RGBA{200, 10, 10, 255}}, image.Point{}, draw.Src)
	translucent.SetRGBA(2, 1, color.RGBA{10, 10, 10, 128}) // one pixel not opaque
	gray := image.NewGray(image.Rect(0, 0, 4, 4))
	gray.SetGray(1, 2, color.Gray{77})
	for _, tc := range []struct {
		name   string
		img    image.Image
		colour byte
	}{
		{"a recorded screen", screen, 2},
		{"a crop with its own origin", screen.SubImage(image.Rect(425, 107, 945, 755)), 2},
		{"one pixel", screen.SubImage(image.Rect(5, 5, 6, 6)), 2},
		{"a pixel not opaque", translucent, 6},
		{"not RGBA", gray, 0},
		{"empty", image.NewRGBA(image.Rect(0, 0, 0, 0)), 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.img.Bounds().Empty() {
				var buf bytes.Buffer
				if err := encodePNG(&buf, tc.img); err == nil {
					t.Fatal("an empty image was encoded; want image/png's error")
				}
				return
			}
			if got := roundTrip(t, tc.img); got != tc.colour {
				t.Errorf("colour type %d; want %d", got, tc.colour)
			}
		})
	}
}

// FuzzEncodePNG: any small RGBA image round-trips through encodePNG and image/png.
func FuzzEncodePNG(f *testing.F) {
	f.Add(uint8(3), uint8(2), []byte{1, 2, 3, 255, 4, 5, 6, 255})
	f.Add(uint8(1), uint8(1), []byte{9, 9, 9, 0})
	f.Fuzz(func(t *testing.T, w, h uint8, pix []byte) {
		w, h = w%40+1, h%40+1
		m := image.NewRGBA(image.Rect(7, 3, 7+int(w), 3+int(h)))
		for i := range m.Pix {
			if len(pix) > 0 {
				m.Pix[i] = pix[i%len(pix)]
			}
			if i%4 == 3 && (len(pix) == 0 || pix[0]%2 == 0) {
				m.Pix[i] = 0xff // half the inputs opaque: the fast path
			}
		}
		// image.RGBA holds premultiplied colour: a channel above alpha is no colour at all.
		for i := 0; i < len(m.Pix); i += 4 {
			a := m.Pix[i+3]
			m.Pix[i], m.Pix[i+1], m.Pix[i+2] = min(m.Pix[i], a), min(m.Pix[i+1], a), min(m.Pix[i+2], a)
		}
		roundTrip(t, m)
	})
}

package vision

import (
	"context"
	"image"
	"sync"
)

// Banded reads a tall image of scattered text (Sparse) as horizontal bands, one an
// engine, at the same time: a chat read of 0.37 s on one core takes about the time of its
// larger band on two. It cuts only in a run of blank rows (every pixel of the row the
// same), the run nearest the middle, so that no line of text is cut; an image without
// one, a short one, one neither gray nor RGBA, another mode or a charset read is read
// whole by the first engine.
// Words keep the image's coordinates; those of band k have Line numbers of their own
// (k*BandLines added).
//
// An engine after the first that implements Available() and says false (a model still
// loading) is left out; the first is always used. Each engine is used by one goroutine at a time, as OCR requires; Banded itself is
// too.
type Banded struct {
	Engines []OCR
}

// BandLines is added to the Line numbers of each band after the first, per band.
const BandLines = 1_000_000_000

// Band sizes: a band is at least minBandRows tall, and cut where at least blankRun blank
// rows in a row give both sides a margin.
const (
	minBandRows = 96
	blankRun    = 6
)

// Recognize implements OCR.
func (b *Banded) Recognize(ctx context.Context, img image.Image, mode Mode) ([]Word, error) {
	engines := b.available()
	cut, ok := 0, false
	if mode == Sparse && len(engines) > 1 {
		cut, ok = blankCut(img)
	}
	if !ok {
		return b.Engines[0].Recognize(ctx, img, mode)
	}
	r := img.Bounds()
	bands := []image.Rectangle{image.Rect(r.Min.X, r.Min.Y, r.Max.X, cut), image.Rect(r.Min.X, cut, r.Max.X, r.Max.Y)}
	words := make([][]Word, len(bands))
	errs := make([]error, len(bands))
	var wg sync.WaitGroup
	for i, band := range bands {
		wg.Go(func() {
			ws, err := engines[i].Recognize(ctx, atOrigin(img, band), mode)
			for j := range ws {
				ws[j].Box = ws[j].Box.Add(image.Pt(0, band.Min.Y-r.Min.Y))
				ws[j].Line += i * BandLines
			}
			words[i], errs[i] = ws, err
		})
	}
	wg.Wait()
	var out []Word
	for i := range bands {
		if errs[i] != nil {
			return nil, errs[i]
		}
		out = append(out, words[i]...)
	}
	return out, nil
}

// RecognizeCharset implements CharsetOCR: the first engine reads img whole.
func (b *Banded) RecognizeCharset(ctx context.Context, img image.Image, mode Mode, charset string) ([]Word, error) {
	return RecognizeCharset(ctx, b.Engines[0], img, mode, charset)
}

// available is the engines ready to read, the first always.
func (b *Banded) available() []OCR {
	out := []OCR{b.Engines[0]}
	for _, e := range b.Engines[1:] {
		if a, ok := e.(interface{ Available() bool }); ok && !a.Available() {
			continue
		}
		out = append(out, e)
	}
	return out
}

// blankCut is the row at which to cut img in two: the middle of the run of at least
// blankRun blank rows nearest img's middle, with minBandRows on either side. Only a gray
// or RGBA image (what Prep gives) is cut.
func blankCut(img image.Image) (int, bool) {
	r := img.Bounds()
	pix, ok := pixelsOf(img)
	if !ok || r.Dy() < 2*minBandRows {
		return 0, false
	}
	blank := make([]bool, r.Dy())
	for y := range blank {
		blank[y] = blankRow(pix.row(r.Min.Y+y), pix.bpp)
	}
	best, found := 0, false
	for y := 0; y < len(blank); {
		if !blank[y] {
			y++
			continue
		}
		end := y
		for end < len(blank) && blank[end] {
			end++
		}
		if mid := (y + end) / 2; end-y >= blankRun && mid >= minBandRows && len(blank)-mid >= minBandRows {
			if !found || abs(mid-len(blank)/2) < abs(best-len(blank)/2) {
				best, found = mid, true
			}
		}
		y = end
	}
	return r.Min.Y + best, found
}

// pixels is a gray or RGBA image's bytes: its rows within its bounds, bpp bytes a pixel.
type pixels struct {
	img image.Image
	pix []byte
	off func(x, y int) int
	bpp int
}

func pixelsOf(img image.Image) (pixels, bool) {
	switch m := img.(type) {
	case *image.Gray:
		return pixels{img, m.Pix, m.PixOffset, 1}, true
	case *image.RGBA:
		return pixels{img, m.Pix, m.PixOffset, 4}, true
	}
	return pixels{}, false
}

func (p pixels) row(y int) []byte {
	r := p.img.Bounds()
	return p.pix[p.off(r.Min.X, y):p.off(r.Max.X, y)]
}

// blankRow: every pixel of row (bpp bytes each) is the same.
func blankRow(row []byte, bpp int) bool {
	for i := bpp; i+bpp <= len(row); i += bpp {
		for k := range bpp {
			if row[i+k] != row[k] {
				return false
			}
		}
	}
	return true
}

// atOrigin is the part band of img (gray or RGBA, as blankCut requires), copied into an
// image of its kind at the origin (an engine's boxes are in its image's own
// coordinates from (0, 0)).
func atOrigin(img image.Image, band image.Rectangle) image.Image {
	r := image.Rect(0, 0, band.Dx(), band.Dy())
	var out image.Image = image.NewRGBA(r)
	if _, gray := img.(*image.Gray); gray {
		out = image.NewGray(r)
	}
	src, _ := pixelsOf(img)
	dst, _ := pixelsOf(out)
	for y := range band.Dy() {
		copy(dst.row(y), src.pix[src.off(band.Min.X, band.Min.Y+y):src.off(band.Max.X, band.Min.Y+y)])
	}
	return out
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

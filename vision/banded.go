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
// one, a short one, another mode or a charset read is read whole by the first engine.
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
// blankRun blank rows nearest img's middle, with minBandRows on either side.
func blankCut(img image.Image) (int, bool) {
	r := img.Bounds()
	if r.Dy() < 2*minBandRows {
		return 0, false
	}
	blank := make([]bool, r.Dy())
	for y := range blank {
		blank[y] = blankRow(img, r.Min.Y+y)
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

// blankRow: every pixel of row y is the same.
func blankRow(img image.Image, y int) bool {
	r := img.Bounds()
	switch m := img.(type) {
	case *image.Gray:
		row := m.Pix[m.PixOffset(r.Min.X, y):m.PixOffset(r.Max.X, y)]
		for _, v := range row {
			if v != row[0] {
				return false
			}
		}
		return true
	case *image.RGBA:
		row := m.Pix[m.PixOffset(r.Min.X, y):m.PixOffset(r.Max.X, y)]
		for i := 4; i < len(row); i += 4 {
			if row[i] != row[0] || row[i+1] != row[1] || row[i+2] != row[2] || row[i+3] != row[3] {
				return false
			}
		}
		return true
	}
	first := img.At(r.Min.X, y)
	for x := r.Min.X + 1; x < r.Max.X; x++ {
		if img.At(x, y) != first {
			return false
		}
	}
	return true
}

// atOrigin is the part band of img, copied into an image at the origin (an engine's
// boxes are in its image's own coordinates from (0, 0)).
func atOrigin(img image.Image, band image.Rectangle) image.Image {
	switch m := img.(type) {
	case *image.Gray:
		out := image.NewGray(image.Rect(0, 0, band.Dx(), band.Dy()))
		for y := range band.Dy() {
			copy(out.Pix[y*out.Stride:], m.Pix[m.PixOffset(band.Min.X, band.Min.Y+y):m.PixOffset(band.Max.X, band.Min.Y+y)])
		}
		return out
	case *image.RGBA:
		out := image.NewRGBA(image.Rect(0, 0, band.Dx(), band.Dy()))
		for y := range band.Dy() {
			copy(out.Pix[y*out.Stride:], m.Pix[m.PixOffset(band.Min.X, band.Min.Y+y):m.PixOffset(band.Max.X, band.Min.Y+y)])
		}
		return out
	}
	out := image.NewRGBA(image.Rect(0, 0, band.Dx(), band.Dy()))
	for y := range band.Dy() {
		for x := range band.Dx() {
			out.Set(x, y, img.At(band.Min.X+x, band.Min.Y+y))
		}
	}
	return out
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

package vision

import (
	"context"
	"errors"
	"fmt"
	"image"
	"slices"
	"sync"
	"testing"
	"time"
)

// runReader is an OCR engine for drawn test images: each run of rows that are not blank
// is one word, named by the value of its first pixel, boxed by the run's rows, one line
// each. It notes the bounds of every image it is given.
type runReader struct {
	mu      sync.Mutex
	given   []image.Rectangle
	barrier *sync.WaitGroup // when set, each read waits until every engine started one
	err     error
	ready   bool
}

func (o *runReader) Available() bool { return o.ready }

func (o *runReader) Recognize(_ context.Context, img image.Image, _ Mode) ([]Word, error) {
	o.mu.Lock()
	o.given = append(o.given, img.Bounds())
	o.mu.Unlock()
	if o.barrier != nil {
		o.barrier.Done()
		done := make(chan struct{})
		go func() { o.barrier.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			return nil, errors.New("the other band was not read at the same time")
		}
	}
	if o.err != nil {
		return nil, o.err
	}
	g := img.(*image.Gray)
	r := g.Bounds()
	var out []Word
	for y := r.Min.Y; y < r.Max.Y; {
		if blankRow(g.Pix[g.PixOffset(r.Min.X, y):g.PixOffset(r.Max.X, y)], 1) {
			y++
			continue
		}
		end := y
		for end < r.Max.Y && !blankRow(g.Pix[g.PixOffset(r.Min.X, end):g.PixOffset(r.Max.X, end)], 1) {
			end++
		}
		out = append(out, Word{Text: fmt.Sprint(g.Pix[g.PixOffset(r.Min.X, y)]), Box: image.Rect(0, y-r.Min.Y, r.Dx(), end-r.Min.Y), Line: len(out)})
		y = end
	}
	return out, nil
}

// textRows draws a gray image in bounds with a "line of text" (rows whose first pixel is
// the line's value and the rest background) at each of tops, each 12 rows tall.
func textRows(bounds image.Rectangle, tops ...int) *image.Gray {
	g := image.NewGray(bounds)
	for i := range g.Pix {
		g.Pix[i] = 250
	}
	for i, top := range tops {
		for y := top; y < top+12; y++ {
			g.Pix[g.PixOffset(bounds.Min.X, bounds.Min.Y+y)] = uint8(10 + i)
		}
	}
	return g
}

// TestBandedReadsAsOne: two engines read the two bands of a tall image at the same time,
// cut in the blank run nearest the middle, and the words are those one engine reads in
// the whole image (same texts, same boxes), each band's lines distinct.
func TestBandedReadsAsOne(t *testing.T) {
	for _, bounds := range []image.Rectangle{image.Rect(0, 0, 120, 400), image.Rect(7, 33, 127, 433)} {
		// Lines every 30 rows leave 18-row blank runs; the one nearest row 200 is cut.
		img := textRows(bounds, 10, 40, 70, 100, 130, 160, 190, 220, 250, 280, 310, 340, 370)
		whole, err := (&runReader{}).Recognize(context.Background(), img, Sparse)
		if err != nil {
			t.Fatal(err)
		}
		var barrier sync.WaitGroup
		barrier.Add(2)
		a, b := &runReader{barrier: &barrier, ready: true}, &runReader{barrier: &barrier, ready: true}
		got, err := (&Banded{Engines: []OCR{a, b}}).Recognize(context.Background(), img, Sparse)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.given) != 1 || len(b.given) != 1 {
			t.Fatalf("engine reads %v and %v; want one band each", a.given, b.given)
		}
		if a.given[0].Min != (image.Point{}) || b.given[0].Min != (image.Point{}) || a.given[0].Dy()+b.given[0].Dy() != bounds.Dy() {
			t.Errorf("bands %v and %v; want two at the origin that make up the %d rows", a.given[0], b.given[0], bounds.Dy())
		}
		if cut := a.given[0].Dy(); cut < 202 || cut > 220 {
			t.Errorf("cut at row %d; want within the blank run from 202 to 220", cut)
		}
		texts := func(ws []Word) []string {
			var out []string
			for _, w := range ws {
				out = append(out, fmt.Sprint(w.Text, w.Box))
			}
			return out
		}
		if !slices.Equal(texts(got), texts(whole)) {
			t.Errorf("banded words %v; want the whole image's %v", texts(got), texts(whole))
		}
		lines := map[int]bool{}
		for _, w := range got {
			if lines[w.Line] {
				t.Errorf("line number %d used twice", w.Line)
			}
			lines[w.Line] = true
		}
	}
}

// TestBandedReadsWhole: the first engine reads the image whole when there is nothing to
// cut it at, it is short, the mode is not Sparse, the other engine is not ready, or the
// read is limited to a charset.
func TestBandedReadsWhole(t *testing.T) {
	tall := textRows(image.Rect(0, 0, 120, 400), 10, 100, 200, 300)
	solid := image.NewGray(image.Rect(0, 0, 120, 400))
	for i := range solid.Pix {
		solid.Pix[i] = uint8(i)
	}
	for _, tc := range []struct {
		name    string
		img     *image.Gray
		mode    Mode
		ready   bool
		charset string
	}{
		{"no blank run", solid, Sparse, true, ""},
		{"short", textRows(image.Rect(0, 0, 120, 150), 10, 100), Sparse, true, ""},
		{"single line", tall, SingleLine, true, ""},
		{"block", tall, Block, true, ""},
		{"other engine loading", tall, Sparse, false, ""},
		{"charset", tall, Sparse, true, "0123"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := &runReader{ready: true}, &runReader{ready: tc.ready}
			bd := &Banded{Engines: []OCR{a, b}}
			var err error
			if tc.charset != "" {
				_, err = bd.RecognizeCharset(context.Background(), tc.img, tc.mode, tc.charset)
			} else {
				_, err = bd.Recognize(context.Background(), tc.img, tc.mode)
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(a.given) != 1 || a.given[0] != tc.img.Bounds() || len(b.given) != 0 {
				t.Errorf("first engine read %v, second %v; want the whole %v by the first alone", a.given, b.given, tc.img.Bounds())
			}
		})
	}
}

// TestBandedFailsWithAnyBand: a band that cannot be read fails the whole read.
func TestBandedFailsWithAnyBand(t *testing.T) {
	img := textRows(image.Rect(0, 0, 120, 400), 10, 100, 200, 300)
	broken := errors.New("engine broke")
	_, err := (&Banded{Engines: []OCR{&runReader{ready: true}, &runReader{ready: true, err: broken}}}).Recognize(context.Background(), img, Sparse)
	if !errors.Is(err, broken) {
		t.Fatalf("read: %v; want the band's error", err)
	}
}

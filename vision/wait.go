package vision

import (
	"context"
	"errors"
	"fmt"
	"image"
	"time"
)

// Waiting for what the screen shows: an anchor to appear and hold still (WaitStable), to
// go (WaitGone), or a region to stop changing (CaptureSettled), reading a capture by
// OCR only once it has held still.

// Found is an anchor found and held still.
type Found struct {
	Box   image.Rectangle
	Words []Word
	Look  Look
	Looks int // how many captures it took
	Reads int // how many of them OCR read (with every prep tried)
}

// unsettledReads is how many changed captures in a row WaitStable lets go unread before
// it reads one anyway: a region that never holds still (a spinner, a blinking cursor
// caught at every capture) is still read, every few polls.
const unsettledReads = 3

// WaitStable looks at region r until the anchor is found at the same position in two
// captures in a row, or the deadline passes (ErrNotFound, with the last look read).
//
// OCR costs far more than a capture, so a capture is read only once its pixels equal
// the capture before (the app has stopped drawing there: the frame read is the settled
// one, not one of a transition). A found anchor in such a frame has held still across
// the two captures. A capture whose pixels equal the frame last read is not read again.
func (rd *Reader) WaitStable(ctx context.Context, r image.Rectangle, a Anchor, timeout time.Duration) (Found, error) {
	var (
		last      Found  // the last frame read, with what was found in it
		lastOK    bool   // whether the anchor was found in it
		lastPix   uint64 // its pixel hash
		readAny   bool
		reads     int
		unchanged bool // the anchor showed only in captures equal to the baseline
	)
	overrun := timeout
	if a.Acted {
		overrun = 0
	}
	err := rd.watch(ctx, r, timeout, overrun, func(ctx context.Context, c capture) (bool, error) {
		switch {
		case a.Baseline != nil && c.pix == *a.Baseline:
			// What showed before the input: it proves nothing of the input.
			if !readAny || lastPix != c.pix {
				reads++
				look, _, _, ok, err := rd.readAnchor(ctx, c.frame, r, a)
				if err != nil {
					return false, err
				}
				last, lastOK, lastPix, readAny = Found{Look: look, Looks: c.n, Reads: reads}, false, c.pix, true
				unchanged = unchanged || ok
			}
		case readAny && c.pix == lastPix:
			// The pixels read last time, so the same words: a found anchor is at the
			// same position in two captures.
			last.Look.Frame, last.Looks = c.frame, c.n
			return lastOK, nil
		case c.worthReading:
			wasOK, wasBox := lastOK, last.Box
			reads++
			look, box, ws, ok, err := rd.readAnchor(ctx, c.frame, r, a)
			if err != nil {
				return false, err
			}
			last, lastOK, lastPix, readAny = Found{Look: look, Box: box, Words: ws, Looks: c.n, Reads: reads}, ok, c.pix, true
			return ok && (c.settled || (wasOK && wasBox == box)), nil
		}
		return false, nil
	})
	last.Reads = reads
	switch {
	case errors.Is(err, errTimedOut) && unchanged:
		return last, fmt.Errorf("%w: %q showed within %v only as it did before the input: the input changed nothing there", ErrNotFound, a.Text, timeout)
	case errors.Is(err, errTimedOut):
		return last, fmt.Errorf("%w: %q did not appear and hold still within %v", ErrNotFound, a.Text, timeout)
	case err != nil && ctx.Err() != nil:
		return last, fmt.Errorf("stopped waiting for %q: %w", a.Text, err)
	}
	return last, err
}

// settling tells which captures are worth reading: one whose pixels equal the capture
// before (settled), or, after unsettledReads changed captures in a row, the latest.
type settling struct {
	prev      uint64
	have      bool
	unsettled int
}

func (s *settling) next(pix uint64) (read, settled bool) {
	settled = s.have && pix == s.prev
	s.prev, s.have = pix, true
	if settled || s.unsettled >= unsettledReads {
		s.unsettled = 0
		return true, settled
	}
	s.unsettled++
	return false, false
}

// CaptureSettled captures region r until a capture equals the one a poll before it (the
// app has stopped drawing there), or, in a region that never holds still, until
// unsettledReads+1 captures were taken; it returns the last capture and its pixel hash.
func (rd *Reader) CaptureSettled(ctx context.Context, r image.Rectangle) (*image.RGBA, uint64, error) {
	var got capture
	err := rd.watch(ctx, r, 0, 0, func(_ context.Context, c capture) (bool, error) {
		got = c
		return c.worthReading, nil
	})
	if err != nil {
		return nil, 0, err
	}
	return got.frame, got.pix, nil
}

// capture is one look watch took: its number, the frame and its pixel hash, and what
// settling says of it.
type capture struct {
	n                     int
	frame                 *image.RGBA
	pix                   uint64
	worthReading, settled bool
}

// errTimedOut: watch's timeout passed (the caller's context did not end).
var errTimedOut = errors.New("timed out")

// watch captures region r every poll and hands each capture to look, until look says it
// is done (nil) or fails, or the timeout passes (errTimedOut; no timeout when 0), or ctx
// ends (its error). An error of look's that its time running out caused counts as the
// time being up.
//
// The timeout bounds what the app may take to show; overrun, how long past it a read of
// a capture taken in time may go on: OCR slowed by a loaded machine then does not turn a
// page that showed in time into one that did not.
func (rd *Reader) watch(ctx context.Context, r image.Rectangle, timeout, overrun time.Duration, look func(context.Context, capture) (bool, error)) error {
	wctx, cancel := ctx, context.CancelFunc(func() {})
	rctx := ctx // what a read has
	if timeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, timeout)
		var rcancel context.CancelFunc
		rctx, rcancel = context.WithTimeout(ctx, timeout+overrun)
		defer rcancel()
	}
	defer cancel()
	ended := func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return errTimedOut
	}
	var settle settling
	for n := 1; ; n++ {
		frame, err := rd.Screen.Capture(wctx, r)
		if err != nil {
			if wctx.Err() != nil {
				return ended()
			}
			return fmt.Errorf("capturing %v: %w", r, err)
		}
		c := capture{n: n, frame: frame, pix: PixelHash(frame)}
		c.worthReading, c.settled = settle.next(c.pix)
		done, err := look(rctx, c)
		switch {
		case err != nil && rctx.Err() != nil:
			return ended()
		case err != nil:
			return err
		case done:
			return nil
		}
		select {
		case <-wctx.Done():
			return ended()
		case <-time.After(rd.PollInterval()):
		}
	}
}

// DefaultPoll is the time between two looks while waiting. A frame is read once it
// equals the capture a poll before it, so the poll is also how long the app must have
// drawn nothing there: 40 ms is over two frames of a 60 Hz toolkit, and it took 0.95 s
// off a delivery against 75 ms (docs/benchmarks-history.md, the 2026-12-02 morning
// section).
const DefaultPoll = 40 * time.Millisecond

// PollInterval is Poll, or DefaultPoll when Poll is not set.
func (rd *Reader) PollInterval() time.Duration {
	if rd.Poll <= 0 {
		return DefaultPoll
	}
	return rd.Poll
}

// WaitGone looks at region r until a read of it no longer finds the anchor, or the
// deadline passes (ErrNotFound: it still shows). Like WaitStable it reads only frames
// that held still for a poll (or, in a region that never does, every few captures), and
// never reads the same pixels twice.
func (rd *Reader) WaitGone(ctx context.Context, r image.Rectangle, a Anchor, timeout time.Duration) (Look, error) {
	var (
		last    Look
		lastPix uint64
		readAny bool
	)
	err := rd.watch(ctx, r, timeout, timeout, func(ctx context.Context, c capture) (bool, error) {
		if !c.worthReading || (readAny && c.pix == lastPix) {
			return false, nil
		}
		look, _, _, ok, err := rd.readAnchor(ctx, c.frame, r, a)
		if err != nil {
			return false, err
		}
		last, lastPix, readAny = look, c.pix, true
		return !ok, nil
	})
	switch {
	case errors.Is(err, errTimedOut):
		return last, fmt.Errorf("%w: %q still shows after %v", ErrNotFound, a.Text, timeout)
	case err != nil && ctx.Err() != nil:
		return last, fmt.Errorf("stopped waiting for %q to go: %w", a.Text, err)
	}
	return last, err
}

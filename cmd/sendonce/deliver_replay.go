//go:build cgo && sendonce_testhooks

package main

import (
	"context"
	"image"
	"sync/atomic"
	"time"

	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/driver/replay"
	"github.com/sendonce/sendonce/vision"
)

// replayDesktop drives a recorded fixture instead of the live desktop (deliver --replay,
// test builds only).
// Its OCR reads through the fixture last opened (replay.Driver.OCR).
func replayDesktop(f *deliverFlags) desktop {
	if f.display == "" {
		f.display = ":replay"
	}
	if f.sentItemTimeout == 0 {
		f.sentItemTimeout = 2 * time.Second
	}
	current := new(atomic.Pointer[replay.Driver])
	open := func(context.Context, string) (driver.Driver, func(), error) {
		d, err := replay.New(f.replay)
		if err != nil {
			return nil, nil, usagef("--replay: %v", err)
		}
		current.Store(d)
		return d, func() {}, nil
	}
	tree := func(context.Context, string) (driver.Tree, func()) {
		if d := current.Load(); d != nil && d.HasTrees() { // recorded with the app's tree
			return d.Tree(), func() {}
		}
		return nil, func() {}
	}
	return desktop{open: open, tree: tree, ocr: func(ocr vision.OCR) vision.OCR { return replayOCR{ocr, current} }}
}

// replayOCR reads through the replay driver last opened; before any, as the engine does.
type replayOCR struct {
	vision.OCR
	current *atomic.Pointer[replay.Driver]
}

func (o replayOCR) Recognize(ctx context.Context, img image.Image, mode vision.Mode) ([]vision.Word, error) {
	return o.RecognizeCharset(ctx, img, mode, "")
}

func (o replayOCR) RecognizeCharset(ctx context.Context, img image.Image, mode vision.Mode, charset string) ([]vision.Word, error) {
	ocr := o.OCR
	if d := o.current.Load(); d != nil {
		ocr = d.OCR(ocr)
	}
	return vision.RecognizeCharset(ctx, ocr, img, mode, charset)
}

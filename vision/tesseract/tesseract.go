//go:build cgo

// Package tesseract is vision's OCR engine: libtesseract through gosseract.
//
// libtesseract reads OMP_THREAD_LIMIT when it loads: set it to 1 in the environment
// before the process starts (sendonce re-executes itself to do so), or recognition
// spends its time in thread start-up. A Client is not safe for concurrent use: make one
// per goroutine and reuse it, since creating one costs far more than one recognition.
package tesseract

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"

	"github.com/otiai10/gosseract/v2"
	"golang.org/x/image/bmp"

	"github.com/sendonce/sendonce/vision"
)

// Client is a reusable Tesseract engine.
type Client struct {
	c *gosseract.Client
}

// New makes an engine that reads langs (English when nil), its models loaded. It fails
// with a clear error, naming the Debian package to install, when a language's data is
// missing. While it loads, gosseract points the process's file
// descriptor 2 at /dev/null: call it before starting work that writes there, or write
// to a duplicate of it (NewBanded's second engine loads beside the caller's work).
func New(langs vision.Languages) (*Client, error) {
	if len(langs) == 0 {
		langs = vision.DefaultLanguages
	}
	for _, l := range langs {
		if err := LanguageAvailable(l); err != nil {
			return nil, err
		}
	}
	c := gosseract.NewClient()
	if err := c.SetLanguage(langs...); err != nil {
		c.Close()
		return nil, err
	}
	// Screen captures carry no resolution; without one, Tesseract guesses and says so on
	// stderr for every image.
	if err := c.SetVariable("user_defined_dpi", "96"); err != nil {
		c.Close()
		return nil, err
	}
	// Load the model now (about 0.2 s), not at the first Recognize: gosseract points
	// descriptor 2 at /dev/null while Tesseract initialises, so a line written there
	// meanwhile by another goroutine (a lease warning, a server's "serving" line) is
	// lost unless it goes to a duplicate of the descriptor.
	cl := &Client{c: c}
	if _, err := cl.Recognize(context.Background(), image.NewGray(image.Rect(0, 0, 8, 8)), vision.Sparse); err != nil {
		c.Close()
		return nil, fmt.Errorf("loading Tesseract's model: %w", err)
	}
	return cl, nil
}

// LanguageAvailable checks that Tesseract's data for lang is installed.
func LanguageAvailable(lang string) error {
	langs, err := gosseract.GetAvailableLanguages()
	if err == nil {
		for _, l := range langs {
			if l == lang {
				return nil
			}
		}
	}
	dirs := []string{os.Getenv("TESSDATA_PREFIX"), "/usr/share/tesseract-ocr/5/tessdata"}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, lang+".traineddata")); err == nil {
			return nil
		}
	}
	return fmt.Errorf("Tesseract language data %q is not installed (Debian: apt-get install %s)", lang, vision.Package(lang))
}

// Close frees the engine.
func (c *Client) Close() error { return c.c.Close() }

// RecognizeCharset implements vision.CharsetOCR: Recognize with Tesseract's whitelist
// set to charset for this one read.
func (c *Client) RecognizeCharset(ctx context.Context, img image.Image, mode vision.Mode, charset string) ([]vision.Word, error) {
	if err := c.c.SetWhitelist(charset); err != nil {
		return nil, err
	}
	defer c.c.SetWhitelist("")
	return c.Recognize(ctx, img, mode)
}

// Recognize implements vision.OCR.
func (c *Client) Recognize(ctx context.Context, img image.Image, mode vision.Mode) ([]vision.Word, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := bmp.Encode(&buf, img); err != nil { // cheap to encode, and leptonica reads it
		return nil, err
	}
	if err := c.c.SetImageFromBytes(buf.Bytes()); err != nil {
		return nil, err
	}
	psm := gosseract.PSM_SPARSE_TEXT
	switch mode {
	case vision.Block:
		psm = gosseract.PSM_AUTO
	case vision.SingleLine:
		psm = gosseract.PSM_SINGLE_LINE
	}
	if err := c.c.SetPageSegMode(psm); err != nil {
		return nil, err
	}
	boxes, err := c.c.GetBoundingBoxesVerbose() // one recognition: each output call runs it again
	if err != nil {
		return nil, err
	}
	words := make([]vision.Word, 0, len(boxes))
	for _, b := range boxes {
		if b.Word == "" {
			continue
		}
		words = append(words, vision.Word{Text: b.Word, Box: b.Box, Confidence: b.Confidence,
			Line: b.BlockNum*1_000_000 + b.ParNum*1_000 + b.LineNum})
	}
	return words, nil
}

// Banded is vision.Banded over engines of its own: a tall read of scattered text is
// read as two bands at once, one an engine, on a machine with two cores or more.
type Banded struct {
	vision.Banded
	first  *Client
	others []*loading
}

// NewBanded loads one engine now (a model that cannot load fails here, before the
// caller claims anything) and, on a machine with two cores or more, a second one in the
// background, used once it has loaded (vision.Banded leaves out an engine that is not
// Available). While the second loads, gosseract points the process's file descriptor 2
// at /dev/null (see New): a caller that writes to stderr meanwhile writes to a duplicate
// of it, as the sendonce command does. A second engine that fails to load is never
// used: the reads are then one engine's, as with one core.
func NewBanded(langs vision.Languages) (*Banded, error) {
	first, err := New(langs)
	if err != nil {
		return nil, err
	}
	b := &Banded{first: first}
	b.Engines = append(b.Engines, first)
	for range min(runtime.NumCPU(), 2) - 1 {
		l := &loading{langs: langs, done: make(chan struct{})}
		go l.load()
		b.others = append(b.others, l)
		b.Engines = append(b.Engines, l)
	}
	return b, nil
}

// Close frees the engines, once those loading have loaded.
func (b *Banded) Close() error {
	err := b.first.Close()
	for _, l := range b.others {
		<-l.done
		if l.c != nil {
			l.c.Close()
		}
	}
	return err
}

// loading is an engine loading in the background.
type loading struct {
	langs vision.Languages
	done  chan struct{}
	ready atomic.Bool
	c     *Client
	err   error
}

func (l *loading) load() {
	defer close(l.done)
	if l.c, l.err = New(l.langs); l.err == nil {
		l.ready.Store(true)
	}
}

// Available reports whether the engine has loaded.
func (l *loading) Available() bool { return l.ready.Load() }

// Recognize implements vision.OCR, once loaded (it waits for the load).
func (l *loading) Recognize(ctx context.Context, img image.Image, mode vision.Mode) ([]vision.Word, error) {
	<-l.done
	if l.err != nil {
		return nil, l.err
	}
	return l.c.Recognize(ctx, img, mode)
}

// RecognizeCharset implements vision.CharsetOCR, once loaded (it waits for the load).
func (l *loading) RecognizeCharset(ctx context.Context, img image.Image, mode vision.Mode, charset string) ([]vision.Word, error) {
	<-l.done
	if l.err != nil {
		return nil, l.err
	}
	return l.c.RecognizeCharset(ctx, img, mode, charset)
}

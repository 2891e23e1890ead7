// Package vision sees the screen: it captures regions, reads them with OCR into words
// with boxes and confidence, and finds text: an exact line (a destination's visible
// title) or a phrase that anchors a control. It waits for an anchor to hold still
// instead of sleeping for fixed times.
//
// The OCR engine and the screen are small interfaces: the Tesseract engine lives in
// vision/tesseract (cgo), screen capture in this package (pure Go, X11 through xgb), and
// tests use recorded frames.
package vision

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"image"
	"slices"
	"sort"
	"strings"
	"time"
)

// ErrNotFound: the text did not appear (or did not hold still) before the deadline.
var ErrNotFound = errors.New("text not found on screen")

// Word is one recognised word in screen coordinates.
type Word struct {
	Text       string
	Box        image.Rectangle
	Confidence float64 // 0-100
	Line       int     // words of one text line share a Line number
}

// Mode tells the OCR engine what layout to expect.
type Mode int

const (
	// Sparse finds scattered text anywhere in the image (buttons, cards).
	Sparse Mode = iota
	// Block reads a uniform block of text.
	Block
	// SingleLine reads the image as one line (a header title).
	SingleLine
)

// OCR recognises words in an image, boxes in the image's own coordinates. An
// implementation is used by one goroutine at a time.
type OCR interface {
	Recognize(ctx context.Context, img image.Image, mode Mode) ([]Word, error)
}

// CharsetOCR is an OCR engine that can be told the only characters a read may give
// (Tesseract's whitelist).
type CharsetOCR interface {
	RecognizeCharset(ctx context.Context, img image.Image, mode Mode, charset string) ([]Word, error)
}

// RecognizeCharset reads img with only the characters of charset, where ocr can be
// limited so (a CharsetOCR), else as ocr reads anything; an empty charset is any.
func RecognizeCharset(ctx context.Context, ocr OCR, img image.Image, mode Mode, charset string) ([]Word, error) {
	if c, ok := ocr.(CharsetOCR); ok && charset != "" {
		return c.RecognizeCharset(ctx, img, mode, charset)
	}
	return ocr.Recognize(ctx, img, mode)
}

// Screen captures a region of the screen.
type Screen interface {
	Capture(ctx context.Context, r image.Rectangle) (*image.RGBA, error)
}

// Line is the words of one text line, left to right.
type Line struct {
	Text  string
	Box   image.Rectangle
	Words []Word
}

// Lines groups words into lines, top to bottom.
func Lines(words []Word) []Line {
	byLine := map[int][]Word{}
	var order []int
	for _, w := range words {
		if _, ok := byLine[w.Line]; !ok {
			order = append(order, w.Line)
		}
		byLine[w.Line] = append(byLine[w.Line], w)
	}
	var out []Line
	for _, n := range order {
		ws := byLine[n]
		sort.SliceStable(ws, func(i, j int) bool { return ws[i].Box.Min.X < ws[j].Box.Min.X })
		l := Line{Words: ws, Box: ws[0].Box}
		texts := make([]string, 0, len(ws))
		for _, w := range ws {
			if strings.TrimSpace(w.Text) == "" {
				continue
			}
			texts = append(texts, w.Text)
			l.Box = l.Box.Union(w.Box)
		}
		l.Text = strings.Join(texts, " ")
		out = append(out, l)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Box.Min.Y < out[j].Box.Min.Y })
	return out
}

// FindLine finds a line whose text equals text exactly (words joined by one space).
func FindLine(words []Word, text string) (Line, bool) {
	for _, l := range Lines(words) {
		if l.Text == text {
			return l, true
		}
	}
	return Line{}, false
}

// FindPhrase finds the words of phrase in order, consecutive within one line, and
// returns their union box and the words. Matching is exact per word, except that a
// trailing ellipsis or punctuation the phrase does not have is ignored ("Files…").
func FindPhrase(words []Word, phrase string) (image.Rectangle, []Word, bool) {
	return FindPhraseFunc(words, phrase, func(got, want string) bool { return got == want })
}

// FindPhraseFunc is FindPhrase with a word comparison of the caller's.
func FindPhraseFunc(words []Word, phrase string, match func(got, want string) bool) (image.Rectangle, []Word, bool) {
	want := strings.Fields(phrase)
	if len(want) == 0 {
		return image.Rectangle{}, nil, false
	}
	for _, l := range Lines(words) {
		ws := l.Words
		for i := 0; i+len(want) <= len(ws); i++ {
			ok := true
			for j, w := range want {
				if !match(trimDecoration(ws[i+j].Text), trimDecoration(w)) {
					ok = false
					break
				}
			}
			if ok {
				box := ws[i].Box
				for _, w := range ws[i : i+len(want)] {
					box = box.Union(w.Box)
				}
				return box, ws[i : i+len(want)], true
			}
		}
	}
	return image.Rectangle{}, nil, false
}

func trimDecoration(s string) string { return strings.TrimRight(s, "….:,;!?") }

// Reader captures and reads regions of the screen. It remembers its last few reads: a
// frame with the pixels of one of them, read the same way (region, preparation, mode,
// characters), gives that read's words without OCR (a step that clicks the button the
// wait before it found reads nothing new). Its methods are safe for one goroutine at a
// time, as its OCR engine is.
type Reader struct {
	Screen Screen
	OCR    OCR
	// Poll is the time between two looks while waiting; default DefaultPoll (an
	// unchanged capture costs no OCR).
	Poll time.Duration

	recent [recentReads]recentRead
	next   int // the slot the next read goes into
}

// recentReads is how many reads a Reader remembers.
const recentReads = 8

// recentRead is one remembered read: how it was read, and its words (screen coordinates).
type recentRead struct {
	key   readKey
	words []Word
}

type readKey struct {
	region  image.Rectangle
	prep    Prep
	mode    Mode
	charset string
	pix     uint64
	ok      bool // the slot holds a read
}

func (rd *Reader) remembered(k readKey) ([]Word, bool) {
	for _, r := range rd.recent {
		if r.key == k {
			return slices.Clone(r.words), true
		}
	}
	return nil, false
}

func (rd *Reader) remember(k readKey, words []Word) {
	rd.recent[rd.next] = recentRead{key: k, words: slices.Clone(words)}
	rd.next = (rd.next + 1) % recentReads
}

// Look is one capture of a region and what OCR read in it.
type Look struct {
	Region image.Rectangle
	Frame  *image.RGBA // the raw capture
	Words  []Word      // in screen coordinates
}

// Read captures region r, preprocesses it and reads it.
func (rd *Reader) Read(ctx context.Context, r image.Rectangle, prep Prep, mode Mode) (Look, error) {
	frame, err := rd.Screen.Capture(ctx, r)
	if err != nil {
		return Look{}, fmt.Errorf("capturing %v: %w", r, err)
	}
	return rd.ReadFrame(ctx, frame, r, prep, mode)
}

// ReadFrame reads an already captured frame of region r.
func (rd *Reader) ReadFrame(ctx context.Context, frame *image.RGBA, r image.Rectangle, prep Prep, mode Mode) (Look, error) {
	return rd.readFrame(ctx, frame, r, prep, mode, "")
}

func (rd *Reader) readFrame(ctx context.Context, frame *image.RGBA, r image.Rectangle, prep Prep, mode Mode, charset string) (Look, error) {
	key := readKey{region: r, prep: prep, mode: mode, charset: charset, pix: PixelHash(frame), ok: true}
	if words, ok := rd.remembered(key); ok {
		return Look{Region: r, Frame: frame, Words: words}, nil
	}
	img := prep.Apply(frame)
	words, err := RecognizeCharset(ctx, rd.OCR, img, mode, charset)
	if err != nil {
		return Look{}, fmt.Errorf("reading %v: %w", r, err)
	}
	scale := max(prep.Scale, 1)
	for i := range words {
		b := words[i].Box
		words[i].Box = image.Rect(b.Min.X/scale, b.Min.Y/scale, (b.Max.X+scale-1)/scale, (b.Max.Y+scale-1)/scale).Add(r.Min)
	}
	rd.remember(key, words)
	return Look{Region: r, Frame: frame, Words: words}, nil
}

// Anchor is text to wait for: a phrase, or with Exact, a whole line.
type Anchor struct {
	Text  string
	Exact bool
	Prep  Prep
	// AltPreps are tried in turn, on the same capture, when Prep does not find the text.
	AltPreps []Prep
	Mode     Mode
	// Match compares a word read with a word wanted; nil means equal.
	Match func(got, want string) bool
	// LineSuffix finds a line whose text, spaces removed, ends with Text (a path in a
	// location field: OCR splits it into words anywhere). A trailing text cursor is ignored.
	LineSuffix bool
	// WholeLine finds a line whose text, spaces and a trailing text cursor removed, is
	// Text and nothing else: a location field read back in full, character for character
	// (as Match compares them). It is read with Text's own characters only (and a text
	// cursor's "|"), where the engine can be limited so: OCR of a long run of hex digits
	// otherwise reads one glyph as two ("5" as "S5") often enough to fail most reads. A
	// character lost, added or moved still fails; one the app shows in place of another
	// reads as the nearest of Text's own.
	WholeLine bool
	// Baseline, when set, is the pixel hash of the region before the input the wait
	// follows: a capture with exactly those pixels does not count, whatever it shows.
	Baseline *uint64
	// Acted marks an anchor whose box is clicked or pointed at once found: its reads end
	// by the wait's deadline, so that no input lands by a frame older than the wait.
	// Otherwise a capture taken in time is read to its end (watch).
	Acted bool
}

// charset is the characters a read of the anchor may give: with WholeLine, Text's own
// and the text cursor's; else any.
func (a Anchor) charset() string {
	if !a.WholeLine {
		return ""
	}
	seen := map[rune]bool{'|': true}
	out := []rune{'|'}
	for _, c := range a.Text {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return string(out)
}

// find looks for the anchor in words.
func (a Anchor) find(words []Word) (image.Rectangle, []Word, bool) {
	switch {
	case a.LineSuffix, a.WholeLine:
		l, ok := findJoinedLine(words, a.Text, a.Match, a.WholeLine)
		return l.Box, l.Words, ok
	case a.Exact:
		l, ok := FindLine(words, a.Text)
		return l.Box, l.Words, ok
	case a.Match != nil:
		return FindPhraseFunc(words, a.Text, a.Match)
	}
	return FindPhrase(words, a.Text)
}

// Occurrences counts the lines of words in which the anchor is found: a control's label
// that shows on two lines (a peer's message quoting it, say) is not one place to click.
func (a Anchor) Occurrences(words []Word) int {
	n := 0
	for _, l := range Lines(words) {
		if _, _, ok := a.find(l.Words); ok {
			n++
		}
	}
	return n
}

// FindLineSuffix finds a line whose text without spaces ends with text, compared by
// match (nil: equal).
func FindLineSuffix(words []Word, text string, match func(got, want string) bool) (Line, bool) {
	return findJoinedLine(words, text, match, false)
}

// FindWholeLine finds a line whose text without spaces is text and nothing more,
// compared by match (nil: equal): a path read back from a location field, where a
// character lost or added anywhere must not pass.
func FindWholeLine(words []Word, text string, match func(got, want string) bool) (Line, bool) {
	return findJoinedLine(words, text, match, true)
}

// findJoinedLine compares a line's text, spaces removed (OCR splits a path into words
// anywhere) and a trailing text cursor allowed for, with text: its end, or with whole
// all of it.
func findJoinedLine(words []Word, text string, match func(got, want string) bool, whole bool) (Line, bool) {
	for _, l := range Lines(words) {
		joined := strings.ReplaceAll(l.Text, " ", "")
		if whole {
			// Read with the text's own characters and "|" (Anchor.charset), the cursor
			// reads as "|" or not at all; any other last character is the field's.
			c := withoutCursor(joined)
			if len(c) == len(text) && (c == text || (match != nil && match(c, text))) {
				return l, true
			}
			continue
		}
		// The text cursor after the last character reads as one of these, or not at all;
		// or as "|" twice: glued to the name and again as a word of its own (seen live
		// in Psi+'s file field while the machine was loaded).
		candidates := []string{joined}
		if n := len(joined); n > 0 && strings.ContainsAny(joined[n-1:], "]|)}lI!/\\") {
			candidates = append(candidates, joined[:n-1])
		}
		if strings.HasSuffix(joined, "||") {
			candidates = append(candidates, joined[:len(joined)-2])
		}
		for _, c := range candidates {
			if len(c) < len(text) {
				continue
			}
			tail := c[len(c)-len(text):]
			if tail == text || (match != nil && match(tail, text)) {
				return l, true
			}
		}
	}
	return Line{}, false
}

// withoutCursor is a whole line's text without the text cursor after it: one "|", or
// two (glued to the text and again as a word of its own). A last character that was
// the text's own and read as "|" is lost with it, and the line then does not match.
func withoutCursor(joined string) string {
	for range 2 {
		joined = strings.TrimSuffix(joined, "|")
	}
	return joined
}

// Find reads region r once, from a capture that held still (CaptureSettled), with the
// anchor's preps in turn until one finds it; the look is the last one read.
func (rd *Reader) Find(ctx context.Context, r image.Rectangle, a Anchor) (Found, bool, error) {
	frame, _, err := rd.CaptureSettled(ctx, r)
	if err != nil {
		return Found{}, false, err
	}
	look, box, ws, ok, err := rd.readAnchor(ctx, frame, r, a)
	return Found{Box: box, Words: ws, Look: look, Looks: 1, Reads: 1}, ok, err
}

// readAnchor reads a frame with the anchor's preps in turn until one finds it.
func (rd *Reader) readAnchor(ctx context.Context, frame *image.RGBA, r image.Rectangle, a Anchor) (Look, image.Rectangle, []Word, bool, error) {
	var look Look
	var seen []bool // WholeLine: which of Text's characters a reading of this frame showed in place
	charset := a.charset()
	for _, prep := range append([]Prep{a.Prep}, a.AltPreps...) {
		var err error
		if look, err = rd.readFrame(ctx, frame, r, prep, a.Mode, charset); err != nil {
			return Look{}, image.Rectangle{}, nil, false, err
		}
		if box, ws, ok := a.find(look.Words); ok {
			return look, box, ws, true, nil
		}
		if a.WholeLine {
			if l, ok := seenWhole(look.Words, a.Text, a.Match, &seen); ok {
				return look, l.Box, l.Words, true, nil
			}
		}
	}
	return look, image.Rectangle{}, nil, false, nil
}

// seenWhole is the whole-line check across the readings of one frame: OCR drops a
// narrow glyph ("1" after "7") in one preparation and reads it in another. A line
// counts when its text (spaces and the cursor removed) is text with characters left out
// and nothing else (each character equal to text's, as match compares one character, in
// order). Of its characters, those that fall on the same character of text however the
// left-out ones are placed (the leftmost and the rightmost placement agree) mark that
// character in seen; the line is found once every character of text is marked. A
// character the field lacks is never marked: each reading of the field fits text with
// that character skipped, so none is forced onto it. A reading with one character more
// than text marks nothing.
func seenWhole(words []Word, text string, match func(got, want string) bool, seen *[]bool) (Line, bool) {
	want := []rune(text)
	if *seen == nil {
		*seen = make([]bool, len(want))
	}
	eq := func(got, want rune) bool {
		return got == want || (match != nil && match(string(got), string(want)))
	}
	for _, l := range Lines(words) {
		got := []rune(withoutCursor(strings.ReplaceAll(l.Text, " ", "")))
		left, right := make([]int, len(got)), make([]int, len(got))
		fits := len(got) > 0 && len(got) <= len(want)
		for i, j := 0, 0; fits && i < len(got); i, j = i+1, j+1 {
			for j < len(want) && !eq(got[i], want[j]) {
				j++
			}
			fits, left[i] = j < len(want), j
		}
		for i, j := len(got)-1, len(want)-1; fits && i >= 0; i, j = i-1, j-1 {
			for j >= 0 && !eq(got[i], want[j]) {
				j--
			}
			fits, right[i] = j >= 0, j
		}
		if !fits {
			continue
		}
		for i := range got {
			if left[i] == right[i] {
				(*seen)[left[i]] = true
			}
		}
		all := true
		for _, ok := range *seen {
			all = all && ok
		}
		if all {
			return l, true
		}
	}
	return Line{}, false
}

// pixelSeed seeds PixelHash: one per process, so a hash means nothing outside it.
var pixelSeed = maphash.MakeSeed()

// PixelHash is a fast hash of a frame's pixels (64 bits, over its rows; the runtime's
// map hash, AES-based where the CPU has AES, several times FNV-1a's speed): equal frames
// read the same, so a caller may skip OCR of a frame whose hash it has read. It is
// comparable only within one process.
func PixelHash(img *image.RGBA) uint64 {
	var h maphash.Hash
	h.SetSeed(pixelSeed)
	b := img.Bounds()
	row := b.Dx() * 4
	for y := b.Min.Y; y < b.Max.Y; y++ {
		o := img.PixOffset(b.Min.X, y)
		h.Write(img.Pix[o : o+row])
	}
	return h.Sum64()
}

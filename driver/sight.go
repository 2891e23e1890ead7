package driver

import (
	"fmt"
	"image"
	"math"
	"net/url"
	"regexp"
	"strings"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/vision"
)

// Confirm is how a profile tells, on screen, a sent item of ours that the app finished
// sending from everything else: a peer's item of the same name, a transfer still in
// progress, an older item brought into view by scrolling.
type Confirm struct {
	// Header matches a message row's header line (as OCR reads it, an avatar's letter
	// included); its first group is the author, a word of the line. A header without an author (a transfer row) marks its items as not
	// finished.
	Header string `json:"header"`
	// AuthorColor is the colour the app draws our own side's author in (a peer cannot
	// choose it by choosing a name); ColorTolerance is how far, as an RGB distance, the
	// ink read may be from it.
	AuthorColor    RGB     `json:"author_color"`
	ColorTolerance float64 `json:"color_tolerance"`
	// Progress are words that show an item in progress (an upload's percentage).
	Progress []string `json:"progress"`
	// EndBlank is a region of the window that is blank exactly when the conversation
	// view is at its end (where the app shows its jump-to-end button otherwise).
	EndBlank Region `json:"end_blank"`
	// Settle is how long a new item must hold before it counts: two reads at least
	// this far apart. The classifier reads it from the profile the bundle recorded.
	Settle Duration `json:"settle"`
	// Inline: a message's header and its content share one line ("[12:00:01] <carol>
	// https://…/report.txt"), so an item belongs to the header on its own line.
	Inline bool `json:"inline,omitempty"`
	// Mark says who can draw AuthorColor (required): MarkAppOnly, the app alone (a
	// theme's colour for our own side, which no peer's name or formatted text can take),
	// or MarkPeerProducible, a peer too (an app that colours every author by a hash of
	// their id, ours included, or renders a peer's coloured text). With a mark a peer
	// can produce, the screen never confirms a delivery alone: the provider must.
	Mark string `json:"mark"`

	header *regexp.Regexp
}

// The values of Confirm.Mark.
const (
	MarkAppOnly        = "app_only"
	MarkPeerProducible = "peer_producible"
)

// ScreenConfirms says whether the screen can confirm a delivery alone: only a mark
// that no peer can produce makes an item ours for good.
func (c *Confirm) ScreenConfirms() bool { return c != nil && c.Mark == MarkAppOnly }

func (c *Confirm) validate(app string) error {
	re, err := regexp.Compile(c.Header)
	switch {
	case c.Header == "":
		return fmt.Errorf("profile %s: confirm.header is required (what a message row's header line reads)", app)
	case err != nil:
		return fmt.Errorf("profile %s: confirm.header: %v", app, err)
	case re.NumSubexp() < 1:
		return fmt.Errorf("profile %s: confirm.header needs a group for the author", app)
	case c.ColorTolerance <= 0:
		return fmt.Errorf("profile %s: confirm.color_tolerance must be positive", app)
	case c.Settle.Duration <= 0:
		return fmt.Errorf("profile %s: confirm.settle must be a positive duration", app)
	case c.EndBlank.W == 0 && c.EndBlank.H == 0 && c.EndBlank.X == 0 && c.EndBlank.Y == 0:
		return fmt.Errorf("profile %s: confirm.end_blank is required (where the view shows it is not at its end)", app)
	case c.Mark != MarkAppOnly && c.Mark != MarkPeerProducible:
		return fmt.Errorf("profile %s: confirm.mark must be %q (only the app can draw author_color: a theme's colour for our side that no peer's name or text can take) or %q (a peer can come close: every author coloured by a hash of their id, or a peer's coloured text rendered; then only the provider confirms); got %q",
			app, MarkAppOnly, MarkPeerProducible, c.Mark)
	}
	c.header = re
	return nil
}

// header is a message row's header line as read.
type header struct {
	line   vision.Line
	author string
	ours   bool
}

// headers finds the message headers among lines, with whether each author is ours.
// Every line of a header's shape is someone's header, whatever name it holds (any
// script, spaces, dots, emoji): a peer's row is never taken for a continuation of ours.
// It is ours only when its author is drawn in our side's colour, read on the author's
// last word. Outside inline profiles, a line that reads as the file's name, or shows a
// size, is an item's line, never a header.
func (c *Confirm) headers(lines []vision.Line, look vision.Look, file string) []header {
	var out []header
	for _, l := range lines {
		m := c.header.FindStringSubmatch(l.Text)
		if m == nil {
			continue
		}
		if !c.Inline && (sizePattern.MatchString(l.Text) || file != "" && isNameLine(l.Text, file)) {
			continue
		}
		h := header{line: l, author: strings.TrimSpace(m[1])}
		if f := strings.Fields(h.author); len(f) > 0 {
			last := f[len(f)-1]
			for i := len(l.Words) - 1; i >= 0; i-- {
				if l.Words[i].Text == last {
					h.ours = c.inkMatches(look, l.Words[i].Box)
					break
				}
			}
		}
		out = append(out, h)
	}
	return out
}

// isNameLine says whether a whole line reads as the file's name.
func isNameLine(line, file string) bool {
	return evidence.NameMatches(strings.TrimSpace(line), file)
}

// inkMatches reports whether the text drawn in box has the author colour: the mean of
// the pixels that stand out from the box's background (its most common colour).
func (c *Confirm) inkMatches(look vision.Look, box image.Rectangle) bool {
	if look.Frame == nil {
		return false
	}
	// Words are in screen coordinates, the frame in its own.
	ink, ok := inkColor(look.Frame, box.Sub(look.Region.Min).Add(look.Frame.Rect.Min))
	if !ok {
		return false
	}
	return rgbDistance(ink, c.AuthorColor.float()) <= c.ColorTolerance
}

// inkColor is the mean colour of a box's text pixels: those far from the background.
func inkColor(frame *image.RGBA, box image.Rectangle) ([3]float64, bool) {
	if frame == nil {
		return [3]float64{}, false
	}
	box = box.Intersect(frame.Rect)
	if box.Empty() {
		return [3]float64{}, false
	}
	counts := map[[3]uint8]int{}
	px := func(x, y int) [3]uint8 {
		o := frame.PixOffset(x, y)
		return [3]uint8{frame.Pix[o], frame.Pix[o+1], frame.Pix[o+2]}
	}
	var bg [3]uint8
	for y := box.Min.Y; y < box.Max.Y; y++ {
		for x := box.Min.X; x < box.Max.X; x++ {
			p := px(x, y)
			counts[p]++
			if counts[p] > counts[bg] {
				bg = p
			}
		}
	}
	// Text pixels are those at least half as far from the background as the farthest;
	// antialiased edges between them and the background are left out.
	dist := func(p [3]uint8) float64 { return rgbDistance(RGB(p).float(), RGB(bg).float()) }
	far := 0.0
	for p := range counts {
		far = max(far, dist(p))
	}
	if far < 40 {
		return [3]float64{}, false // no text drawn
	}
	var sum [3]float64
	n := 0
	for p, k := range counts {
		if dist(p) >= far*0.6 {
			for i := range p {
				sum[i] += float64(p[i]) * float64(k)
			}
			n += k
		}
	}
	for i := range sum {
		sum[i] /= float64(n)
	}
	return sum, true
}

// blank reports whether every pixel of an image is close to its first.
func blank(img *image.RGBA) bool {
	b := img.Rect
	if b.Empty() {
		return false
	}
	o := img.PixOffset(b.Min.X, b.Min.Y)
	first := img.Pix[o : o+3]
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			o := img.PixOffset(x, y)
			for i := 0; i < 3; i++ {
				d := int(img.Pix[o+i]) - int(first[i])
				if d < -12 || d > 12 {
					return false
				}
			}
		}
	}
	return true
}

// sizePattern finds a displayed file size ("17 B", "1.2 kB", "3,4 MiB"); apps put a
// no-break space between the number and its unit ("9.0\u00a0MB" in Gajim's tree).
var sizePattern = regexp.MustCompile(`\b\d+(?:[.,]\d+)?[\s\x{a0}\x{202f}]?(?:B|bytes|kB|KB|KiB|MB|MiB|GB|GiB)\b`)

// items finds the file items a look shows: each run of words that reads as the file
// name, with the size shown on the same line or just below it (a file card), where it
// is, and, with the profile's confirm rules, whether it is ours and finished.
func (r *Runner) items(look vision.Look) []evidence.Item {
	lines := vision.Lines(look.Words)
	var heads []header
	if c := r.confirm(); c != nil {
		heads = c.headers(lines, look, r.Vars.FileName)
	}
	var out []evidence.Item
	for _, l := range lines {
		name, ok := nameIn(l.Text, r.Vars.FileName)
		if !ok {
			continue
		}
		it := evidence.Item{Name: name, Y: l.Box.Min.Y} // as read: the classifier matches it again
		rest := strings.Replace(l.Text, name, "", 1)
		if m := sizePattern.FindString(rest); m != "" {
			it.Size = m
		} else {
			it.Size = sizeBelow(lines, l)
		}
		if h, ok := headerAbove(heads, l, r.confirm() != nil && r.confirm().Inline); ok && h.author != "" {
			it.Ours = h.ours
			it.Finished = !r.inProgress(lines, h, heads)
		}
		out = append(out, it)
	}
	return out
}

func (r *Runner) confirm() *Confirm {
	if r.Profile == nil {
		return nil
	}
	return r.Profile.Confirm
}

// headerAbove is the nearest message header above a line (or the line itself, when
// headers are inline): the row it belongs to.
func headerAbove(heads []header, l vision.Line, inline bool) (header, bool) {
	var best header
	found := false
	for _, h := range heads {
		above := h.line.Box.Max.Y <= l.Box.Min.Y+2 || inline && h.line.Box.Min.Y <= l.Box.Min.Y+2
		if above && (!found || h.line.Box.Min.Y > best.line.Box.Min.Y) {
			best, found = h, true
		}
	}
	return best, found
}

// inProgress reports whether the row under header h (down to the next header) shows a
// progress word.
func (r *Runner) inProgress(lines []vision.Line, h header, heads []header) bool {
	end := math.MaxInt
	for _, o := range heads {
		if o.line.Box.Min.Y > h.line.Box.Min.Y {
			end = min(end, o.line.Box.Min.Y)
		}
	}
	for _, l := range lines {
		if l.Box.Min.Y <= h.line.Box.Min.Y || l.Box.Min.Y >= end {
			continue
		}
		for _, w := range l.Words {
			for _, p := range r.Profile.Confirm.Progress {
				if strings.Contains(w.Text, p) {
					return true
				}
			}
		}
	}
	return false
}

// sizeBelow finds a displayed size in the lines just below a name line and overlapping
// it horizontally: where a file card shows it.
func sizeBelow(lines []vision.Line, name vision.Line) string {
	h := max(name.Box.Dy(), 8)
	for _, l := range lines {
		below := l.Box.Min.Y >= name.Box.Min.Y+h/2 && l.Box.Min.Y <= name.Box.Max.Y+2*h
		overlaps := l.Box.Min.X < name.Box.Max.X+4*h && l.Box.Max.X > name.Box.Min.X-4*h
		if below && overlaps {
			if m := sizePattern.FindString(l.Text); m != "" {
				return m
			}
		}
	}
	return ""
}

// nameIn finds the file name in a line of OCR text, as read (OCR may confuse 1 and l,
// 0 and O, and split a word at a ligature): the run of words that matches it, or the
// last path segment of a link that names it (an app that shows a sent file as its
// download link).
func nameIn(line, name string) (string, bool) {
	words, want := strings.Fields(line), len(strings.Fields(name))
	for n := want; n <= want+2; n++ {
		for i := 0; i+n <= len(words); i++ {
			got := strings.Join(words[i:i+n], " ")
			if evidence.NameMatches(got, name) {
				return got, true
			}
		}
	}
	for _, w := range words {
		// OCR may split a long link anywhere: any word with a slash may hold its end.
		if !strings.Contains(w, "/") {
			continue
		}
		seg := w[strings.LastIndex(w, "/")+1:]
		if evidence.NameMatches(seg, name) {
			return seg, true
		}
		if u, err := url.PathUnescape(seg); err == nil && u != seg && evidence.NameMatches(u, name) {
			return u, true
		}
	}
	return "", false
}

package driver

import (
	"context"
	"errors"
	"fmt"
	"image"
	"strings"
	"time"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/internal/clock"
	"github.com/sendonce/sendonce/vision"
	"github.com/sendonce/sendonce/vision/atspi"
)

// The conversation's title is the destination's visible identity: it is read before
// anything crosses, and with every read of the chat after. Where the profile names the
// title's node (title.node) and the app publishes its tree, the title is the node's
// exact name, and OCR of the node's extents must agree with it (vision.Check); else it
// is OCR of the title's region alone, and the result says so.

// Title sources, as the result and the evidence name them.
const (
	SourceTree = "accessibility_tree"
	SourceOCR  = "ocr"
)

// titleRead is one read of the title: the text that counts, and each source's reading.
type titleRead struct {
	text   string // the tree's text where the tree was read, else OCR's
	ocr    string
	look   vision.Look
	region image.Rectangle // where OCR read
	node   string          // the node read (tree only), with its ancestors
	box    *evidence.Box   // the node's extents
	tree   bool            // the text is the tree's
	check  vision.CrossCheck
}

// counts says whether the read is the expected title: the text is, and where the tree
// gave it, OCR does not read something else there.
func (t titleRead) counts(want string) bool {
	return t.text == want && (!t.tree || t.check.Verdict != vision.Disagree)
}

// sources says where the title came from, as the result reports it: "accessibility_tree+ocr"
// when both read it and agreed, "accessibility_tree (...)" when OCR could not read its script,
// "ocr" without a tree.
func (t titleRead) sources() string {
	switch {
	case !t.tree:
		return SourceOCR
	case t.check.Verdict == vision.OCRCannotRead:
		return SourceTree + " (" + t.check.Why + ")"
	}
	return SourceTree + "+" + SourceOCR
}

// readings are the title read's sources as the evidence records them.
func (t titleRead) readings() []evidence.Reading {
	if !t.tree {
		return nil
	}
	return []evidence.Reading{
		{Source: SourceTree, Text: t.text, Node: t.node, Box: t.box},
		{Source: SourceOCR, Text: t.ocr, Box: ptr(box(t.region)), Verdict: string(t.check.Verdict), Why: t.check.Why},
	}
}

// TitleSources says where the title the check judged came from (Result.TitleSources);
// "" before the check.
func (r *Runner) TitleSources() string { return r.titleSources }

// TreeStatus says whether the app's tree was read (Result.Tree); "" for a profile that
// reads none.
func (r *Runner) TreeStatus() string { return r.treeNote }

// titleReads is the title check's state: how many reads in a row, each at least
// titleGap after the one before, read the expected title, and the last read.
type titleReads struct {
	agreed int
	last   titleRead
	at     time.Time // when the last read began (zero before the first)
}

// titleGap is the least time between two reads of the title that count as agreeing.
const titleGap = 150 * time.Millisecond

// readTitleAgain reads the title once more, titleGap after the last read began at the
// earliest.
func (r *Runner) readTitleAgain(ctx context.Context, t *titleReads) error {
	if !t.at.IsZero() {
		if wait := titleGap - r.now().Sub(t.at); wait > 0 {
			clock.Sleep(ctx, wait)
		}
	}
	at := r.now()
	read, err := r.readTitle(ctx)
	if err != nil {
		return err
	}
	if read.counts(r.Vars.Title) {
		t.agreed++
	} else {
		t.agreed = 0
	}
	t.last, t.at = read, at
	return nil
}

// checkTitle reads the conversation's visible title and stops unless it is exactly the
// expected one (and, read from the tree, OCR agrees). The header can lag the
// conversation switch (a blank frame, the previous conversation): it reads until the
// title is the expected one in two reads in a row at least titleGap apart (t holds the
// reads made before), or until the deadline, and then judges the last reading.
func (r *Runner) checkTitle(ctx context.Context, t *titleReads) error {
	deadline := r.now().Add(r.Profile.Timings.titleDeadline())
	for t.agreed < 2 && (t.at.IsZero() || !r.now().After(deadline)) {
		if err := r.readTitleAgain(ctx, t); err != nil {
			return err
		}
	}
	read := t.last
	r.titleSources = read.sources()
	h, _ := r.Rec.Frame(read.look.Frame)
	rec := evidence.Record{Kind: evidence.KindObserve, Intent: "read the conversation title", After: h, OCR: ocrWords(h, read.region, read.look.Words),
		Observed: &evidence.Observation{What: "conversation_title", DispatchID: r.dispatchID(), Title: read.text, Readings: read.readings()}}
	if _, err := r.appendRecord(rec); err != nil {
		return err
	}
	switch {
	case read.text != r.Vars.Title:
		how := "reads"
		if read.tree {
			how = "is, in the app's own words,"
		}
		r.progress("%-10s %-32s the title %s %q, not %q: stopping before any boundary", "safe", "read the title", how, read.text, r.Vars.Title)
		return fmt.Errorf("%w: the conversation's visible title %s %q, not exactly %q", ErrStopped, how, read.text, r.Vars.Title)
	case read.tree && read.check.Verdict == vision.Disagree:
		r.progress("%-10s %-32s the app says %q, the screen there reads %q: stopping before any boundary", "safe", "read the title", read.text, read.ocr)
		return fmt.Errorf("%w: the title's two sources disagree: the app's tree says %q, and %s", ErrStopped, read.text, read.check.Why)
	}
	r.progress("%-10s %-32s %q ok (%s)", "safe", "read the title", read.text, read.sources())
	return nil
}

// readTitle reads the conversation's visible title once: from the tree where the
// profile names the title's node and there is a tree, with OCR of the node's extents
// beside it; else by OCR of the title's region.
func (r *Runner) readTitle(ctx context.Context) (titleRead, error) {
	t := r.Profile.Title
	region, err := r.area(ctx, t)
	if err != nil {
		return titleRead{}, err
	}
	read := titleRead{region: region}
	if t.Node != nil && r.treeOK {
		n, path, err := r.titleNode(ctx, region)
		if err != nil {
			return titleRead{}, err
		}
		read.tree = true
		if n != nil {
			read.text, read.node = nodeText(n), n.String()
			if path != "" {
				read.node += " in " + path
			}
			// OCR reads where the node shows inside the title's region: a tab's extents
			// hold its icon and its close button too, which the region leaves out.
			if e := drawn(n); e != nil {
				read.box = ptr(box(rectOf(*e)))
				if at := rectOf(*e).Inset(-2).Intersect(region); !at.Empty() {
					read.region = at
				}
			}
		}
	}
	if !read.tree || read.text == "" {
		if read.look, err = r.Reader.Read(ctx, read.region, t.Prep, t.OCRMode()); err != nil {
			return titleRead{}, err
		}
		read.ocr = lineText(read.look.Words)
		if !read.tree {
			read.text = read.ocr
		} else {
			read.check = vision.CrossCheck{Read: read.ocr, Verdict: vision.Disagree, Why: "no node of the title shows in the title's region"}
		}
		return read, nil
	}
	if read.check, read.look, err = r.crossCheck(ctx, read.text, read.region, t.Prep); err != nil {
		return titleRead{}, err
	}
	read.ocr = read.check.Read
	return read, nil
}

// titleNode is the one node that shows, matches the profile's title node and has its
// middle inside region (nil when none does), with its ancestors. Two or more are an
// error: the title would be a guess.
func (r *Runner) titleNode(ctx context.Context, region image.Rectangle) (*atspi.Node, string, error) {
	m := r.Profile.Title.Node.match(r.Vars)
	root, in, err := r.nodesIn(ctx, m, region, false)
	if err != nil {
		return nil, "", fmt.Errorf("reading the title: %w", err)
	}
	switch len(in) {
	case 0:
		return nil, "", nil
	case 1:
		return in[0], strings.Join(pathTo(root, in[0]), " > "), nil
	}
	return nil, "", fmt.Errorf("%w: %d nodes show as the title (%s) in the title's region: refusing to guess (name an ancestor in title.node.under)", errTitleAmbiguous, len(in), m)
}

// errTitleAmbiguous: more than one node could be the title.
var errTitleAmbiguous = errors.New("the title is ambiguous")

// nodesIn reads the app's main window within region and returns the nodes that show,
// match m and have the middle of where they show inside region: the title's node, the
// send page's items.
func (r *Runner) nodesIn(ctx context.Context, m atspi.Match, region image.Rectangle, throughViewports bool) (*atspi.Node, []*atspi.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, r.Profile.Timings.titleDeadline())
	defer cancel()
	within := &atspi.Box{X: region.Min.X, Y: region.Min.Y, W: region.Dx(), H: region.Dy()}
	root, err := r.Tree.Snapshot(ctx, r.window.PID, TreeScope{Windows: &atspi.Match{Name: r.window.Title}, Within: within, ThroughViewports: throughViewports})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrNoTree, err)
	}
	var in []*atspi.Node
	for _, n := range m.Find(root) {
		if e := drawn(n); e != nil && centre(*e).In(region) {
			in = append(in, n)
		}
	}
	return root, in, nil
}

// rectOf is where a node's box lies on the screen; centre is its middle.
func rectOf(b atspi.Box) image.Rectangle { return image.Rect(b.X, b.Y, b.X+b.W, b.Y+b.H) }
func centre(b atspi.Box) image.Point {
	r := rectOf(b)
	return r.Min.Add(r.Size().Div(2))
}

// nodeText is what a node says: its name, or the text it holds where it has no name.
func nodeText(n *atspi.Node) string {
	if n.Name != "" {
		return n.Name
	}
	return n.Text
}

// languages are the OCR languages the runner's reads are in.
func (r *Runner) languages() vision.Languages {
	if len(r.Languages) == 0 {
		return vision.DefaultLanguages
	}
	return r.Languages
}

func lineText(ws []vision.Word) string {
	var parts []string
	for _, l := range vision.Lines(ws) {
		if l.Text != "" {
			parts = append(parts, l.Text)
		}
	}
	return strings.Join(parts, " ")
}

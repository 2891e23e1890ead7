package driver

import (
	"context"
	"image"
	"slices"
	"strings"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/vision"
	"github.com/sendonce/sendonce/vision/atspi"
)

// The conversation as the app's tree shows it (chat.node): each message row the node
// matches, inside the chat's region, gives its labels as words, each with the app's
// exact text and where it shows. The same rules as for OCR's words then find the file
// items, their sizes, their rows' authors (whose ink, on the same capture, must be our
// side's colour) and what is still in progress: the confirmation rules are the same
// whatever the source. A file's name from the tree is compared exactly, and OCR of the
// item's row on the same capture must agree with it (vision.Check); after the send, an
// item whose two readings disagree is no item of ours. OCR reads no other row
// (readChatFrame).

// treeChat says whether the chat is read from the tree.
func (r *Runner) treeChat() bool {
	return r.Profile.Chat.Node != nil && r.treeOK
}

// chatTree is one read of the conversation's rows from the tree.
type chatTree struct {
	root  *atspi.Node
	words []vision.Word
	nodes []*atspi.Node     // the node each word came from
	rows  []image.Rectangle // where the row of each word shows
	err   error
}

// readChatTree reads the rows the chat's node matches inside region.
func (r *Runner) readChatTree(ctx context.Context, region image.Rectangle) chatTree {
	root, rows, err := r.nodesIn(ctx, r.Profile.Chat.Node.match(r.Vars), region, true)
	if err != nil {
		return chatTree{err: err}
	}
	return chatWords(root, rows, region)
}

// chatWords are the words of the rows' nodes inside region: each node's text where it
// shows, its line that of the words level with it.
func chatWords(root *atspi.Node, rows []*atspi.Node, region image.Rectangle) chatTree {
	out := chatTree{root: root}
	for _, row := range rows {
		rowAt := rectOf(*drawn(row)) // nodesIn keeps drawn rows only
		row.Walk(func(n *atspi.Node, _ int) bool {
			e := drawn(n)
			text := nodeText(n)
			if n == row || e == nil || strings.TrimSpace(text) == "" {
				return true
			}
			at := rectOf(*e).Intersect(region)
			if at.Empty() {
				return true
			}
			out.words = append(out.words, vision.Word{Text: text, Box: at, Confidence: 100, Line: lineOf(out.words, at)})
			out.nodes, out.rows = append(out.nodes, n), append(out.rows, rowAt)
			return true
		})
	}
	return out
}

// lineOf is the line a word placed at at belongs to: that of an earlier word whose
// middle is level with its own (the next line's number for none).
func lineOf(words []vision.Word, at image.Rectangle) int {
	mid := (at.Min.Y + at.Max.Y) / 2
	next := 0
	for _, w := range words {
		if mid >= w.Box.Min.Y && mid < w.Box.Max.Y {
			return w.Line
		}
		next = max(next, w.Line+1)
	}
	return next
}

// treeItems finds the file items in the tree's words, as items finds them in OCR's,
// keeping those named exactly as the file; each one's name is cross-checked against
// OCR's words where it shows (ocr, from the same capture), then, where they do not
// agree, against a read of that place alone. A progress word OCR reads in the item's
// row makes it unfinished too (progress drawn without a text node). It returns the
// items, the readings of each one's name, and the nodes read.
func (r *Runner) treeItems(ctx context.Context, t chatTree, ocr vision.Look, phase string) ([]evidence.Item, []evidence.Reading, *evidence.Target, error) {
	look := vision.Look{Region: ocr.Region, Frame: ocr.Frame, Words: t.words}
	var items []evidence.Item
	var readings []evidence.Reading
	var read []*atspi.Node
	for _, it := range r.items(look) {
		if !atspi.Same(it.Name, r.Vars.FileName) {
			continue // a look-alike: the tree says exactly what the app shows
		}
		i := t.nameWord(it)
		if i < 0 {
			continue
		}
		n, name, at := t.nodes[i], nodeText(t.nodes[i]), t.words[i].Box
		read = append(read, n)
		check := vision.CheckAmong(name, wordsIn(ocr.Words, at), r.languages())
		if check.Verdict == vision.Disagree {
			var err error
			if check, _, _, err = r.crossCheckName(ctx, n); err != nil {
				return nil, nil, nil, err
			}
		}
		readings = append(readings,
			evidence.Reading{Source: SourceTree, Text: name, Node: n.String(), Box: ptr(box(at))},
			evidence.Reading{Source: SourceOCR, Text: check.Read, Box: ptr(box(at)), Verdict: string(check.Verdict), Why: check.Why})
		if check.Verdict == vision.Disagree && phase == "after_send" {
			continue // two sources that disagree confirm nothing
		}
		if it.Finished && r.showsProgress(ocr.Words, t.rows[i]) {
			it.Finished = false
		}
		items = append(items, it)
	}
	return items, readings, nodeTarget(t.root, read), nil
}

// readItemRows reads by OCR, on frame (the capture of region), the rows of the tree's
// items named exactly as the file, each on its own: the look holds their words, and
// nothing else on the capture is read.
func (r *Runner) readItemRows(ctx context.Context, frame *image.RGBA, region image.Rectangle, t chatTree) (vision.Look, error) {
	look := vision.Look{Region: region, Frame: frame}
	c := r.Profile.Chat
	var read []image.Rectangle
	for _, it := range r.items(vision.Look{Region: region, Frame: frame, Words: t.words}) {
		i := t.nameWord(it)
		if i < 0 || !atspi.Same(it.Name, r.Vars.FileName) {
			continue
		}
		at := t.rows[i].Intersect(region)
		if at.Empty() || slices.Contains(read, at) {
			continue
		}
		read = append(read, at)
		row, err := r.Reader.ReadFrame(ctx, vision.Crop(frame, at.Sub(region.Min).Add(frame.Bounds().Min)), at, c.Prep, c.OCRMode())
		if err != nil {
			return vision.Look{}, err
		}
		look.Words = append(look.Words, row.Words...)
	}
	return look, nil
}

// nameWord is the index of the word that gave the item's name: on the item's line
// (whose top is it.Y), the first holding exactly that name; -1 for none.
func (t chatTree) nameWord(it evidence.Item) int {
	line := -1
	for _, w := range t.words {
		if w.Box.Min.Y == it.Y {
			line = w.Line
			break
		}
	}
	for i, w := range t.words {
		if w.Line == line && atspi.Same(w.Text, it.Name) {
			return i
		}
	}
	return -1
}

// showsProgress says whether OCR reads a progress word of the profile's inside row.
func (r *Runner) showsProgress(words []vision.Word, row image.Rectangle) bool {
	if r.confirm() == nil {
		return false
	}
	for _, w := range wordsIn(words, row) {
		for _, p := range r.confirm().Progress {
			if strings.Contains(w, p) {
				return true
			}
		}
	}
	return false
}

// wordsIn are the words whose middle lies inside at.
func wordsIn(words []vision.Word, at image.Rectangle) []string {
	var out []string
	for _, w := range words {
		if w.Box.Min.Add(w.Box.Size().Div(2)).In(at.Inset(-3)) {
			out = append(out, w.Text)
		}
	}
	return out
}

// itemsFromTree puts the tree's items in o. In the last look after a stop, OCR's items
// on lines the tree has none on are kept beside them: there more items is the careful
// side (a possible side effect). A tree that gives no read leaves OCR's items, and the
// evidence says why; after the send, with a profile that requires the tree, it leaves
// none.
func (r *Runner) itemsFromTree(ctx context.Context, o *chatRead, t chatTree) error {
	if t.err != nil {
		o.readings = []evidence.Reading{{Source: SourceTree, Text: "unavailable: " + t.err.Error()}}
		if o.phase == "after_send" && r.Profile.Tree == TreeRequired {
			o.Items = nil
		}
		return nil
	}
	items, readings, target, err := r.treeItems(ctx, t, o.look, o.phase)
	if err != nil {
		return err
	}
	if o.phase == "final" {
		for _, it := range o.Items {
			if !slices.ContainsFunc(items, func(t evidence.Item) bool { return t.Y >= it.Y-8 && t.Y <= it.Y+8 }) {
				items = append(items, it)
			}
		}
	}
	o.Items, o.readings, o.target = items, readings, target
	return nil
}

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
// same capture where the name shows must agree with it (vision.Check); after the send,
// an item whose two readings disagree is no item of ours.

// treeChat says whether the chat is read from the tree.
func (r *Runner) treeChat() bool {
	return r.Profile.Chat.Node != nil && r.treeOK
}

// chatTree is one read of the conversation's rows from the tree.
type chatTree struct {
	root  *atspi.Node
	words []vision.Word
	nodes map[image.Rectangle]*atspi.Node // the label node each word came from, by where it shows
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
	out := chatTree{root: root, nodes: map[image.Rectangle]*atspi.Node{}}
	for _, row := range rows {
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
			out.nodes[at] = n
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
// agree, against a read of that place alone. It returns the items, the readings of
// each one's name, and the nodes read.
func (r *Runner) treeItems(ctx context.Context, t chatTree, ocr vision.Look, phase string) ([]evidence.Item, []evidence.Reading, *evidence.Target, error) {
	look := vision.Look{Region: ocr.Region, Frame: ocr.Frame, Words: t.words}
	var items []evidence.Item
	var readings []evidence.Reading
	var read []*atspi.Node
	for _, it := range r.items(look) {
		if !atspi.Same(it.Name, r.Vars.FileName) {
			continue // a look-alike: the tree says exactly what the app shows
		}
		n := t.nameNode(it)
		if n == nil {
			continue
		}
		read = append(read, n)
		at := rectOf(*drawn(n))
		check := vision.CheckAmong(n.Name, wordsIn(ocr.Words, at), r.languages())
		if check.Verdict == vision.Disagree {
			var err error
			if check, _, _, err = r.crossCheckName(ctx, n); err != nil {
				return nil, nil, nil, err
			}
		}
		readings = append(readings,
			evidence.Reading{Source: SourceTree, Text: n.Name, Node: n.String(), Box: ptr(box(at))},
			evidence.Reading{Source: SourceOCR, Text: check.Read, Box: ptr(box(at)), Verdict: string(check.Verdict), Why: check.Why})
		if check.Verdict == vision.Disagree && phase == "after_send" {
			continue // two sources that disagree confirm nothing
		}
		items = append(items, it)
	}
	return items, readings, nodeTarget(t.root, read), nil
}

// nameNode is the label whose words gave the item's name: the one on the item's line
// holding exactly that name.
func (t chatTree) nameNode(it evidence.Item) *atspi.Node {
	for at, n := range t.nodes {
		if at.Min.Y <= it.Y+2 && at.Max.Y > it.Y && atspi.Same(n.Name, it.Name) {
			return n
		}
	}
	return nil
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

// itemsFromTree puts the tree's items in o. After the send they are the items; before
// it, and in the last look after a stop, OCR's items on lines the tree has none on are
// kept beside them: there, more items is the careful side. A tree that gives no read
// leaves OCR's items, and the evidence says why.
func (r *Runner) itemsFromTree(ctx context.Context, o *chatRead, t chatTree) error {
	if t.err != nil {
		o.readings = []evidence.Reading{{Source: SourceTree, Text: "unavailable: " + t.err.Error()}}
		return nil
	}
	items, readings, target, err := r.treeItems(ctx, t, o.look, o.phase)
	if err != nil {
		return err
	}
	if o.phase != "after_send" {
		for _, it := range o.Items {
			if !slices.ContainsFunc(items, func(t evidence.Item) bool { return t.Y >= it.Y-8 && t.Y <= it.Y+8 }) {
				items = append(items, it)
			}
		}
	}
	o.Items, o.readings, o.target = items, readings, target
	return nil
}

package driver

import (
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sendonce/sendonce/vision"
	"github.com/sendonce/sendonce/vision/atspi"
)

func TestSizePattern(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"17 bytes", "17 bytes"}, {"9.0\u00a0MB", "9.0\u00a0MB"}, {"3,4\u202fMiB", "3,4\u202fMiB"}, {"1.2kB", "1.2kB"},
		{"report-17.txt", ""}, {"17 bites", ""},
	} {
		if got := sizePattern.FindString(c.text); got != c.want {
			t.Errorf("sizePattern in %q: %q; want %q", c.text, got, c.want)
		}
	}
}

// TestChatFromTheTree: the conversation's rows read from the tree give the file items
// by the same rules as OCR's words (our author's ink on the capture, a size below the
// name, progress in the row), with the app's exact words: a look-alike name is no item,
// a size with a no-break space is a size. Where OCR of the capture reads another name
// in the place the tree gives, the item confirms nothing after the send, and counts
// before it.
func TestChatFromTheTree(t *testing.T) {
	p, err := LoadProfile("gajim")
	if err != nil {
		t.Fatal(err)
	}
	ours, text := color.RGBA{50, 90, 140, 255}, color.RGBA{30, 30, 30, 255}
	// drawn is what the screen shows; tree what the app's tree says of the same places
	// (by the drawn line's index; "" for the same text).
	for _, c := range []struct {
		name    string
		drawn   []chatLine
		tree    map[int]string
		phase   string
		want    string // name|size|ours|finished of each item, joined by ", "
		verdict vision.Verdict
	}{
		{name: "our item, finished",
			drawn: []chatLine{{"alice 11:33", ours, 10, 20}, {"report-1.txt", text, 80, 50}, {"31 bytes", text, 80, 65}},
			tree:  map[int]string{2: "31\u00a0bytes"}, phase: "after_send",
			want: "report-1.txt|31\u00a0bytes|true|true", verdict: vision.Agree},
		{name: "a look-alike name the tree tells apart",
			drawn: []chatLine{{"alice 11:33", ours, 10, 20}, {"report-1.txt", text, 80, 50}, {"31 bytes", text, 80, 65}},
			tree:  map[int]string{1: "report-l.txt"}, phase: "after_send", want: ""},
		{name: "still uploading",
			drawn: []chatLine{{"alice 11:33", ours, 10, 20}, {"report-1.txt", text, 80, 50}, {"31 bytes", text, 80, 65}, {"42 %", text, 200, 65}},
			phase: "after_send", want: "report-1.txt|31 bytes|true|false", verdict: vision.Agree},
		{name: "the screen shows another name there, after the send",
			drawn: []chatLine{{"alice 11:33", ours, 10, 20}, {"other-9.txt", text, 80, 50}, {"31 bytes", text, 80, 65}},
			tree:  map[int]string{1: "report-1.txt"}, phase: "after_send", want: "", verdict: vision.Disagree},
		{name: "the screen shows another name there, before the send",
			drawn: []chatLine{{"alice 11:33", ours, 10, 20}, {"other-9.txt", text, 80, 50}, {"31 bytes", text, 80, 65}},
			tree:  map[int]string{1: "report-1.txt"}, phase: "before_send", want: "report-1.txt|31 bytes|true|true", verdict: vision.Disagree},
	} {
		t.Run(c.name, func(t *testing.T) {
			frame, ws := chatFrame(c.drawn)
			// One row; the header's author and time are labels of their own (as Gajim's
			// are), every other line one label, where OCR found its words.
			row := &atspi.Node{Role: "list item", States: []string{"showing"}, Extents: &atspi.Box{X: 0, Y: 0, W: 700, H: 500}}
			for _, w := range ws {
				if w.Line == 0 {
					row.Children = append(row.Children, &atspi.Node{Role: "label", Name: w.Text, States: []string{"showing"},
						Extents: &atspi.Box{X: w.Box.Min.X, Y: w.Box.Min.Y, W: w.Box.Dx(), H: w.Box.Dy()}})
				}
			}
			for i, l := range c.drawn[1:] {
				i++
				var at image.Rectangle
				for _, w := range ws {
					if w.Line == i {
						at = at.Union(w.Box)
					}
				}
				name := l.text
				if n, ok := c.tree[i]; ok {
					name = n
				}
				row.Children = append(row.Children, &atspi.Node{Role: "label", Name: name, States: []string{"showing"},
					Extents: &atspi.Box{X: at.Min.X, Y: at.Min.Y, W: at.Dx(), H: at.Dy()}})
			}
			desk := treeDesk() // a second read of the name's place reads nothing there
			r := &Runner{Profile: p, Vars: Vars{FileName: "report-1.txt", Size: 31}, Driver: desk, Reader: &vision.Reader{Screen: desk, OCR: readsText("")}}
			look := vision.Look{Region: frame.Rect, Frame: frame, Words: ws}
			items, readings, _, err := r.treeItems(context.Background(), chatWords(row, []*atspi.Node{row}, frame.Rect), look, c.phase)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, it := range items {
				got = append(got, strings.Join([]string{it.Name, it.Size, boolText(it.Ours), boolText(it.Finished)}, "|"))
			}
			if strings.Join(got, ", ") != c.want {
				t.Errorf("items %q; want %q", got, c.want)
			}
			if c.verdict != "" && (len(readings) != 2 || readings[1].Verdict != string(c.verdict)) {
				t.Errorf("readings %+v; want the tree's and OCR's, %s", readings, c.verdict)
			}
		})
	}
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// TestItemsFromTheTreeByPhase: the tree's items stand alone before and after the send;
// in the last look after a stop, OCR's items on other lines are kept beside them. A
// tree that gives no read leaves OCR's items, except after the send with a profile that
// requires the tree. A progress word OCR reads in the item's row leaves it unfinished.
func TestItemsFromTheTreeByPhase(t *testing.T) {
	p, err := LoadProfile("gajim")
	if err != nil {
		t.Fatal(err)
	}
	ours, text := color.RGBA{50, 90, 140, 255}, color.RGBA{30, 30, 30, 255}
	frame, ws := chatFrame([]chatLine{{"alice 11:33", ours, 10, 20}, {"report-1.txt", text, 80, 50}, {"31 bytes", text, 80, 65}, {"report-1.txt", text, 80, 300}})
	row := &atspi.Node{Role: "list item", States: []string{"showing"}, Extents: &atspi.Box{X: 0, Y: 0, W: 700, H: 100}}
	for _, w := range ws[:5] { // the row's labels: alice, 11:33, the name, the size's two words
		row.Children = append(row.Children, &atspi.Node{Role: "label", Name: w.Text, States: []string{"showing"},
			Extents: &atspi.Box{X: w.Box.Min.X, Y: w.Box.Min.Y, W: w.Box.Dx(), H: w.Box.Dy()}})
	}
	desk := treeDesk()
	look := vision.Look{Region: frame.Rect, Frame: frame, Words: ws}
	for _, c := range []struct {
		phase    string
		required bool
		noTree   bool
		progress bool
		want     int // items
		finished bool
	}{
		{phase: "before_send", want: 1, finished: true},
		{phase: "after_send", want: 1, finished: true},
		{phase: "final", want: 2, finished: true},
		{phase: "after_send", progress: true, want: 1},
		{phase: "after_send", noTree: true, want: 2},
		{phase: "after_send", noTree: true, required: true, want: 0},
	} {
		t.Run(fmt.Sprintf("%s/required=%v/no tree=%v/progress=%v", c.phase, c.required, c.noTree, c.progress), func(t *testing.T) {
			prof := *p
			if c.required {
				prof.Tree = TreeRequired
			}
			r := &Runner{Profile: &prof, Vars: Vars{FileName: "report-1.txt", Size: 31}, Driver: desk, Reader: &vision.Reader{Screen: desk, OCR: readsText("")}}
			o := chatRead{phase: c.phase, look: look}
			if c.progress {
				o.look.Words = append(slices.Clone(ws), vision.Word{Text: "42", Box: image.Rect(300, 55, 314, 68), Line: 9}, vision.Word{Text: "%", Box: image.Rect(316, 55, 323, 68), Line: 9})
			}
			o.Items = r.items(o.look) // OCR's: the row's item and the one further down
			tree := chatWords(row, []*atspi.Node{row}, frame.Rect)
			if c.noTree {
				tree = chatTree{err: errors.New("the bus stopped answering")}
			}
			if err := r.itemsFromTree(context.Background(), &o, tree); err != nil {
				t.Fatal(err)
			}
			if len(o.Items) != c.want || c.want > 0 && !c.noTree && o.Items[0].Finished != c.finished {
				t.Fatalf("items %+v; want %d, the first finished %v", o.Items, c.want, c.finished)
			}
		})
	}
}

// rowsTree is an app whose main window X holds the conversation's rows.
type rowsTree struct{ rows []*atspi.Node }

func (t rowsTree) Snapshot(context.Context, int, TreeScope) (*atspi.Node, error) {
	return &atspi.Node{Role: "application", Children: []*atspi.Node{
		{Role: "frame", Name: "X", States: []string{"showing"}, Children: []*atspi.Node{
			{Role: "list box", States: []string{"showing"}, Children: t.rows}}}}}, nil
}

// recognizesSizes reads nothing and keeps the size of each image it was given.
type recognizesSizes struct {
	mu    sync.Mutex
	sizes []image.Point
}

func (s *recognizesSizes) Recognize(_ context.Context, img image.Image, _ vision.Mode) ([]vision.Word, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sizes = append(s.sizes, img.Bounds().Size())
	return nil, nil
}

// TestChatReadOCRsTheItemsRows: with the conversation's rows from the tree, OCR reads
// only the row of the item named as the file (for its cross-check), not the other
// rows and not the whole capture; in the last look after a stop, and when the tree
// gives no read, it reads the whole capture.
func TestChatReadOCRsTheItemsRows(t *testing.T) {
	p, err := LoadProfile("gajim")
	if err != nil {
		t.Fatal(err)
	}
	ours, text := color.RGBA{50, 90, 140, 255}, color.RGBA{30, 30, 30, 255}
	frame, ws := chatFrame([]chatLine{{"alice 11:33", ours, 10, 20}, {"report-1.txt", text, 80, 50}, {"31 bytes", text, 80, 65},
		{"alice 11:40", ours, 10, 220}, {"other-2.txt", text, 80, 250}, {"31 bytes", text, 80, 265}})
	var rows []*atspi.Node
	for i, top := range []int{0, 200} { // each row 100 high, its labels where OCR found the words
		row := &atspi.Node{Role: "list item", States: []string{"showing"}, Extents: &atspi.Box{X: 0, Y: top, W: 700, H: 100}}
		for _, w := range ws[5*i : 5*i+5] {
			row.Children = append(row.Children, &atspi.Node{Role: "label", Name: w.Text, States: []string{"showing"},
				Extents: &atspi.Box{X: w.Box.Min.X, Y: w.Box.Min.Y, W: w.Box.Dx(), H: w.Box.Dy()}})
		}
		rows = append(rows, row)
	}
	scale := p.Chat.Prep.Scale
	for _, c := range []struct {
		phase  string
		tree   Tree
		whole  bool // the whole capture read
		items  int
		source string
	}{
		{phase: "before_send", tree: rowsTree{rows}, items: 1},
		{phase: "after_send", tree: rowsTree{rows}, items: 0}, // OCR reads nothing there: no agreement, no item
		{phase: "final", tree: rowsTree{rows}, whole: true, items: 1},
		{phase: "before_send", tree: failingTree{}, whole: true, items: 0},
	} {
		t.Run(fmt.Sprintf("%s/%T", c.phase, c.tree), func(t *testing.T) {
			desk := treeDesk()
			ocr := &recognizesSizes{}
			r := &Runner{Profile: p, Vars: Vars{FileName: "report-1.txt", Size: 31}, Driver: desk, Tree: c.tree, treeOK: true,
				window: desk.ws[0], Reader: &vision.Reader{Screen: desk, OCR: ocr}}
			o := chatRead{phase: c.phase}
			if err := r.readChatFrame(context.Background(), &o, frame, frame.Rect); err != nil {
				t.Fatal(err)
			}
			whole, row, other := 0, 0, 0
			for _, s := range ocr.sizes {
				switch {
				case s == frame.Rect.Size().Mul(scale):
					whole++
				case s == image.Pt(700, 100).Mul(scale):
					row++
				case s.Y > 100*scale:
					other++ // anything taller than a row
				}
			}
			if c.whole && (whole != 1 || row != 0) || !c.whole && (whole != 0 || row != 1) || other != 0 {
				t.Errorf("OCR read the whole capture %d times, a row %d times, other tall images %d (sizes %v); want the whole capture %v, else the item's row once",
					whole, row, other, ocr.sizes, c.whole)
			}
			if len(o.Items) != c.items {
				t.Errorf("items %+v; want %d", o.Items, c.items)
			}
		})
	}
}

// failingTree is an app whose tree stopped answering.
type failingTree struct{}

func (failingTree) Snapshot(context.Context, int, TreeScope) (*atspi.Node, error) {
	return nil, errors.New("the bus stopped answering")
}

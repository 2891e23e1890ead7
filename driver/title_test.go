package driver

import (
	"context"
	"errors"
	"image"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/vision"
	"github.com/sendonce/sendonce/vision/atspi"
)

// headerTree is an app whose main window's header shows a label (name) inside the
// title's region, and another label with the same name elsewhere (a roster row).
type headerTree struct{ name string }

func (h headerTree) Snapshot(_ context.Context, pid int, _ TreeScope) (*atspi.Node, error) {
	if pid != 4242 {
		return nil, errors.New("no such application")
	}
	return &atspi.Node{Role: "application", Children: []*atspi.Node{
		{Role: "frame", Name: "X", States: []string{"showing"}, Children: []*atspi.Node{
			{Role: "label", Name: h.name, States: []string{"showing"}, Extents: &atspi.Box{X: 10, Y: 5, W: 40, H: 20}},
			{Role: "label", Name: h.name, States: []string{"showing"}, Extents: &atspi.Box{X: 10, Y: 300, W: 40, H: 20}},
		}},
	}}, nil
}

// readsText reads its text everywhere (nothing when empty).
type readsText string

func (s readsText) Recognize(context.Context, image.Image, vision.Mode) ([]vision.Word, error) {
	if s == "" {
		return nil, nil
	}
	return []vision.Word{{Text: string(s), Box: image.Rect(5, 5, 40, 20), Confidence: 95}}, nil
}

// titleTreeProfile reads the title from the tree: a label whose middle is in the
// title's region.
const titleTreeProfile = `{"app":"x","process":"x","window_title":"X",
 "title":{"region":{"x":0,"y":0,"w":100,"h":30},"node":{"role":"label"}},"chat":{"region":{"x":0,"y":30,"w":0,"h":0}},
 "send_page":{"region":{"x":0,"y":30,"w":0,"h":0}},"sent_item_timeout":"300ms",
 "timings":{"title_deadline":"300ms"},
 "choose_file":[{"name":"choose and send","do":"key","keys":"Return","class":"submit","crosses":"choose_file,send"}]}`

// TestTitleFromTheTree: the title is the tree's node's exact name, and OCR of its
// extents must agree as far as OCR can. A look-alike the tree tells apart, or a screen
// that reads another name, stops before any boundary; a script OCR cannot read passes
// on the tree's word, and the result says so; without a tree, OCR reads it alone.
func TestTitleFromTheTree(t *testing.T) {
	for _, c := range []struct {
		name, want, node, ocr string
		langs                 vision.Languages
		tree                  bool
		stop                  string // "" when the title passes
		sources               string
	}{
		{"both agree", "Bob", "Bob", "Bob", nil, true, "", "accessibility_tree+ocr"},
		{"OCR misreads alike", "Bob", "Bob", "8ob", nil, true, "", "accessibility_tree+ocr"},
		{"a Cyrillic look-alike", "Bob", "Воb", "Bob", nil, true, `"Воb"`, "accessibility_tree (the text is in Cyrillic, which the OCR languages eng do not read)"},
		{"the screen reads another name", "Bob", "Bob", "Rob", nil, true, "two sources disagree", "accessibility_tree+ocr"},
		{"blank where the tree says it shows", "Bob", "Bob", "", nil, true, "two sources disagree", "accessibility_tree+ocr"},
		{"a script OCR cannot read", "张伟", "张伟", "Bob", nil, true, "", "accessibility_tree (the text is in Han (Chinese characters), which the OCR languages eng do not read)"},
		{"read in its language", "张伟", "张伟", "张伟", vision.Languages{"eng", "chi_sim"}, true, "", "accessibility_tree+ocr"},
		{"no tree: OCR alone", "Bob", "", "Bob", nil, false, "", "ocr"},
	} {
		t.Run(c.name, func(t *testing.T) {
			desk := treeDesk()
			r, crossed := runnerOn(t, desk, desk, readsText(c.ocr), titleTreeProfile)
			r.Vars.Title, r.Languages = c.want, c.langs
			if c.tree {
				r.Tree = headerTree{name: c.node}
			}
			res, err := r.Deliver(context.Background())
			switch {
			case c.stop == "" && errors.Is(err, ErrStopped) && strings.Contains(err.Error(), "title"):
				t.Fatalf("stopped at the title: %v", err)
			case c.stop != "" && (!errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), c.stop) || desk.keys != 0 || len(crossed()) != 0):
				t.Fatalf("%v (%d keys, crossings %v); want a stop before any boundary naming %q", err, desk.keys, crossed(), c.stop)
			}
			if res.TitleSources != c.sources {
				t.Errorf("title sources %q; want %q", res.TitleSources, c.sources)
			}
			r.Rec.Close()
			b, err := evidence.Verify(r.Rec.Dir(), evidence.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range b.Records {
				if o := rec.Observed; o != nil && o.What == "conversation_title" {
					if c.tree && (len(o.Readings) != 2 || o.Readings[0].Text != c.node || o.Readings[1].Text != c.ocr || o.Title != c.node) {
						t.Errorf("the title's record: %q, readings %+v; want the tree's %q and OCR's %q", o.Title, o.Readings, c.node, c.ocr)
					}
					return
				}
			}
			t.Fatal("no conversation_title record")
		})
	}
}

// TestTreeRequired: a profile that requires the tree stops, before anything is
// touched, where there is none; one that does not falls back to OCR and says so.
func TestTreeRequired(t *testing.T) {
	for _, required := range []bool{true, false} {
		profile := titleTreeProfile
		if required {
			profile = strings.Replace(profile, `"window_title":"X",`, `"window_title":"X","tree":"required",`, 1)
		}
		desk := treeDesk()
		r, _ := runnerOn(t, desk, desk, readsText("Bob"), profile)
		res, err := r.Deliver(context.Background())
		if required {
			if !errors.Is(err, ErrStopped) || !errors.Is(err, ErrNoTree) || desk.keys != 0 || !strings.Contains(err.Error(), "tree: required") {
				t.Errorf("required, no tree: %v, %d keys; want a stop before any input, naming the rule", err, desk.keys)
			}
			continue
		}
		if !strings.HasPrefix(res.Tree, "unavailable") || !strings.Contains(res.Tree, "OCR read in its place") || res.TitleSources != "ocr" {
			t.Errorf("not required, no tree: tree %q, title sources %q; want the fallback said", res.Tree, res.TitleSources)
		}
	}
}

// pageTree is a send page listing items (name, size) in the send page's region, and a
// roster row outside it.
type pageTree [][2]string

func (p pageTree) Snapshot(context.Context, int, TreeScope) (*atspi.Node, error) {
	frame := &atspi.Node{Role: "frame", Name: "X", States: []string{"showing"}, Children: []*atspi.Node{
		{Role: "list item", States: []string{"showing"}, Extents: &atspi.Box{X: 0, Y: 0, W: 100, H: 20}, Children: []*atspi.Node{
			{Role: "label", Name: "Bob", States: []string{"showing"}}}},
	}}
	for i, it := range p {
		y := 40 + 30*i
		frame.Children = append(frame.Children, &atspi.Node{Role: "list item", States: []string{"showing"}, Extents: &atspi.Box{X: 10, Y: y, W: 300, H: 28}, Children: []*atspi.Node{
			{Role: "label", Name: it[0], States: []string{"showing"}, Extents: &atspi.Box{X: 20, Y: y, W: 200, H: 14}},
			{Role: "label", Name: it[1], States: []string{"showing"}, Extents: &atspi.Box{X: 20, Y: y + 14, W: 60, H: 14}},
		}})
	}
	return &atspi.Node{Role: "application", Children: []*atspi.Node{frame}}, nil
}

// TestSendPageFromTheTree: the send page holds exactly one item, ours, in the app's
// words: named exactly as the file, with its size, and OCR of the name agreeing; any
// other item, or a screen that reads another name, refuses the send.
func TestSendPageFromTheTree(t *testing.T) {
	profile := strings.Replace(titleTreeProfile, `"send_page":{"region":{"x":0,"y":30,"w":0,"h":0}}`, `"send_page":{"region":{"x":0,"y":30,"w":0,"h":0},"node":{"role":"list item"}}`, 1)
	for _, c := range []struct {
		name  string
		items pageTree
		ocr   string
		stop  string
	}{
		{"one item, ours", pageTree{{"f.txt", "6 bytes"}}, "f.txt", ""},
		{"a second item", pageTree{{"f.txt", "6 bytes"}, {"other.txt", "9 bytes"}}, "f.txt", "lists 2 item(s), 1 named so"},
		{"another name", pageTree{{"g.txt", "6 bytes"}}, "g.txt", "lists 1 item(s), 0 named so"},
		{"another size", pageTree{{"f.txt", "7 bytes"}}, "f.txt", `size "7 bytes"`},
		{"the screen reads another name", pageTree{{"f.txt", "6 bytes"}}, "g.txt", "OCR reads"},
		{"nothing shows there", pageTree{{"f.txt", "6 bytes"}}, "", "OCR read nothing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			desk := treeDesk()
			r, _ := runnerOn(t, desk, desk, readsText(c.ocr), profile)
			r.Tree = c.items
			r.window, r.treeOK = desk.ws[0], true
			err := r.checkSendPage(context.Background(), ProofName)
			if c.stop == "" && err != nil || c.stop != "" && (err == nil || !strings.Contains(err.Error(), c.stop)) {
				t.Fatalf("checkSendPage: %v; want %q", err, c.stop)
			}
		})
	}
}

package driver

import (
	"context"
	"encoding/json"
	"image"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/vision/atspi"
)

// windowsTree is an app's tree that reads the same every time, of which each snapshot
// keeps, as the live reader does (atspi.Limits.Windows), only the top-level windows
// its scope's Windows matches; it records each scope it is asked for.
type windowsTree struct {
	pid  int
	root *atspi.Node

	mu     sync.Mutex
	scopes []TreeScope
}

func (w *windowsTree) Snapshot(_ context.Context, pid int, scope TreeScope) (*atspi.Node, error) {
	w.mu.Lock()
	w.scopes = append(w.scopes, scope)
	w.mu.Unlock()
	if pid != w.pid {
		return &atspi.Node{Role: "application"}, nil
	}
	if scope.Windows == nil {
		return w.root, nil
	}
	m := *scope.Windows
	m.Under = nil // the window itself: what the reader matches a top-level window by
	out := *w.root
	out.Children = nil
	for _, c := range w.root.Children {
		self := *c
		self.Children = nil
		if len(m.Find(&self)) == 1 {
			out.Children = append(out.Children, c)
		}
	}
	return &out, nil
}

// windowsAsked are the Windows of each scope the tree was asked for.
func (w *windowsTree) windowsAsked() []atspi.Match {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []atspi.Match
	for _, s := range w.scopes {
		if s.Windows == nil {
			out = append(out, atspi.Match{Name: "(all)"})
			continue
		}
		out = append(out, *s.Windows)
	}
	return out
}

// conversePage is the tree of Converse.js in Chromium, its window titled "Converse":
// in its page, an HTML dialog (a dialog by role, not a window) with the focused
// address field, and a list of contacts whose every row has a "Menu" button; beside
// the main window, a file chooser, a top-level dialog of its own. menus are the Menu
// buttons.
func conversePage(menus ...*atspi.Node) *atspi.Node {
	on := []string{"enabled", "sensitive", "showing", "visible"}
	list := &atspi.Node{Role: "list", States: on, Extents: &atspi.Box{X: 40, Y: 100, W: 300, H: 600}}
	for _, m := range menus {
		list.Children = append(list.Children, &atspi.Node{Role: "list item", States: on, Children: []*atspi.Node{m}})
	}
	return &atspi.Node{Role: "application", Name: "Chromium", Children: []*atspi.Node{
		{Role: "frame", Name: "Converse", States: on, Extents: &atspi.Box{X: 40, Y: 30, W: 1200, H: 760}, Children: []*atspi.Node{
			{Role: "document web", Name: "Converse", States: on, Extents: &atspi.Box{X: 40, Y: 90, W: 1200, H: 700}, Children: []*atspi.Node{
				list,
				{Role: "dialog", Name: "Start a new chat", States: on, Extents: &atspi.Box{X: 400, Y: 200, W: 400, H: 200}, Children: []*atspi.Node{
					{Role: "entry", States: append([]string{"editable", "focused"}, on...), Extents: &atspi.Box{X: 420, Y: 260, W: 360, H: 30}},
				}},
			}},
		}},
		{Role: "dialog", Name: "Open Files", States: on, Extents: &atspi.Box{X: 300, Y: 200, W: 700, H: 500}, Children: []*atspi.Node{
			{Role: "filler", States: on, Children: []*atspi.Node{
				{Role: "push button", Name: "Open", States: on, Extents: &atspi.Box{X: 900, Y: 650, W: 80, H: 30}},
			}},
		}},
	}}
}

// menu is a "Menu" button whose box is at x, y (24x24), as a contact's row shows it.
func menu(x, y int) *atspi.Node {
	return &atspi.Node{Role: "push button", Name: "Menu", States: []string{"enabled", "focusable", "showing", "visible"}, Extents: &atspi.Box{X: x, Y: y, W: 24, H: 24}}
}

// clickDesk is a desktop that lists the app's window and records where it is clicked.
type clickDesk struct {
	windowsOnly
	mu     sync.Mutex
	clicks []image.Point
}

func (d *clickDesk) Click(_ context.Context, p image.Point) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clicks = append(d.clicks, p)
	return nil
}

// converseWindow is Converse's window: not at the screen's origin, so that a step's
// region (in the window's coordinates) and the same numbers on the screen differ.
var converseWindow = Window{ID: 1, PID: 4242, Process: "chromium", Title: "Converse", Viewable: true, PIDFrom: PIDFromServer, Bounds: image.Rect(40, 30, 1240, 790)}

// pageRunner is a runner on Converse's window whose app's tree is tree and whose tree
// answered when the delivery began.
func pageRunner(tree Tree) (*Runner, *clickDesk) {
	desk := &clickDesk{windowsOnly: windowsOnly{focus: 1, ws: []Window{converseWindow}}}
	r := &Runner{Driver: desk, Tree: tree, Profile: &Profile{App: "converse", Process: "chromium"}}
	r.window, r.treeOK, r.treeNote = converseWindow, true, "read"
	return r, desk
}

// step is a profile step as JSON.
func step(t *testing.T, js string) Step {
	t.Helper()
	var s Step
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		t.Fatalf("step %s: %v", js, err)
	}
	return s
}

// TestNodeStepReadsTheOutermostWindow: a node step reads only the top-level window its
// OUTERMOST ancestor (under) names, when that one has a window's role; else the app's
// main window. An ancestor further in with the role "dialog" (an HTML dialog, inside a
// page's "document web") is no window: Converse's address field, under its "Start a
// new chat" dialog, is read in the main window.
//
// Before 1a56505 the outermost ancestor with a window's role was read, wherever it
// was: the read asked for the app's top-level dialogs only (the file chooser), and the
// address field never showed.
func TestNodeStepReadsTheOutermostWindow(t *testing.T) {
	main := atspi.Match{Name: "Converse"}
	for _, tc := range []struct {
		name string
		step string
		want atspi.Match // the windows each of the step's reads asks for (role and name)
		// found: whether the node shows in what is read. Named by an ancestor with a
		// window's role and nothing around it, the HTML dialog is looked for among the
		// app's windows, where it is not: the profile names its "document web".
		found bool
	}{
		{"an HTML dialog in the page is no window",
			`{"name":"wait for its address field","do":"wait_node","class":"safe","timeout":"1s","node":{"role":"entry","states":["focused"],"under":{"role":"dialog","under":{"role":"document web"}}}}`,
			main, true},
		{"the HTML dialog itself",
			`{"name":"wait for the dialog","do":"wait_node","class":"safe","timeout":"1s","node":{"role":"dialog","under":{"role":"document web"}}}`,
			main, true},
		{"a dialog outermost is a window",
			`{"name":"wait for the field","do":"wait_node","class":"safe","timeout":"100ms","node":{"role":"entry","under":{"role":"dialog","name":"Start a new chat"}}}`,
			atspi.Match{Role: "dialog", Name: "Start a new chat"}, false},
		{"a top-level dialog, outermost",
			`{"name":"wait for Open","do":"wait_node","class":"safe","timeout":"1s","node":{"role":"push button","name":"Open","under":{"role":"filler","under":{"role":"dialog","name":"Open Files"}}}}`,
			atspi.Match{Role: "dialog", Name: "Open Files"}, true},
		{"no ancestor",
			`{"name":"wait for the field","do":"wait_node","class":"safe","timeout":"1s","node":{"role":"entry","states":["focused"]}}`,
			main, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tree := &windowsTree{pid: 4242, root: conversePage()}
			r, _ := pageRunner(tree)
			s := step(t, tc.step)
			var res evidence.Record
			err := r.perform(context.Background(), s, &res)
			var asked []string // each once
			for _, w := range tree.windowsAsked() {
				if !slices.Contains(asked, w.String()) {
					asked = append(asked, w.String())
				}
			}
			if tc.found != (err == nil) {
				t.Fatalf("%s: %v (its reads asked for windows %q); want the node found: %v", s.Name, err, asked, tc.found)
			}
			if len(asked) == 0 {
				t.Fatalf("%s: the tree was never read", s.Name)
			}
			for _, w := range tree.windowsAsked() {
				if w.Role != tc.want.Role || w.Name != tc.want.Name || w.Under != nil {
					t.Fatalf("%s: its reads asked for windows %q; want %s only", s.Name, asked, tc.want)
				}
			}
		})
	}
}

// TestNodeStepRegionNarrowsTheNodes: on wait_node, wait_node_gone and click_node, the
// step's region (in the window's coordinates) narrows the nodes the step's node
// matches to those whose middle, of the box where each shows, lies inside it: of a
// page's many "Menu" buttons, click_node clicks the one in the region; without a
// region the step refuses to choose, as before. A node with no box shows nowhere in a
// region; a node's drawn box, not its extents, says where it shows.
//
// Before 1a56505 a node step's region was not read: every such step saw all the Menu
// buttons, and refused them.
func TestNodeStepRegionNarrowsTheNodes(t *testing.T) {
	// The region {x 160, y 140, w 53, h 60} of the window at (40, 30) is (200,170)-(253,230)
	// on the screen.
	inside := menu(210, 185) // middle (222, 197)
	// Its middle in the same numbers taken on the screen, (160,140)-(213,200): not in the window's region.
	onScreenNumbers := menu(160, 150)
	below := menu(210, 600)
	// Its extents' middle (225, 190) inside the region, but a scrolled view shows only
	// its top edge, whose middle (225, 164) is above it.
	scrolled := menu(205, 160)
	scrolled.Extents = &atspi.Box{X: 205, Y: 160, W: 40, H: 60}
	scrolled.Visible = &atspi.Box{X: 205, Y: 160, W: 40, H: 8}
	noBox := menu(0, 0)
	noBox.Extents = nil
	menus := func() *atspi.Node { return conversePage(inside, onScreenNumbers, below, scrolled, noBox) }
	const region = `"region":{"x":160,"y":140,"w":53,"h":60}`
	node := `"node":{"role":"push button","name":"Menu"}`

	t.Run("click_node clicks the one in its region", func(t *testing.T) {
		r, desk := pageRunner(&windowsTree{pid: 4242, root: menus()})
		var res evidence.Record
		s := step(t, `{"name":"open the contacts menu","do":"click_node","class":"safe","timeout":"1s",`+region+`,`+node+`}`)
		if err := r.perform(context.Background(), s, &res); err != nil {
			t.Fatalf("%s: %v; want the Menu in the region clicked", s.Name, err)
		}
		if want := []image.Point{{222, 197}}; len(desk.clicks) != 1 || desk.clicks[0] != want[0] {
			t.Fatalf("clicks at %v; want one, at the middle of the Menu in the region %v", desk.clicks, want)
		}
		if res.Target == nil || len(res.Target.Words) != 1 || res.Target.Box == nil || res.Target.Box.X != 210 || res.Target.Box.Y != 185 {
			t.Fatalf("the step's target %+v; want the one Menu clicked, with its box", res.Target)
		}
	})
	t.Run("without a region click_node refuses to choose", func(t *testing.T) {
		r, desk := pageRunner(&windowsTree{pid: 4242, root: menus()})
		var res evidence.Record
		s := step(t, `{"name":"open a menu","do":"click_node","class":"safe","timeout":"100ms",`+node+`}`)
		err := r.perform(context.Background(), s, &res)
		if err == nil || !strings.Contains(err.Error(), "5 nodes show as") || len(desk.clicks) != 0 {
			t.Fatalf("%v, clicks %v; want the step refused (5 nodes show), nothing clicked", err, desk.clicks)
		}
	})
	for _, tc := range []struct {
		name, step, wantErr string // "" for the step to succeed
	}{
		{"wait_node finds the one in its region",
			`{"name":"w","do":"wait_node","class":"safe","timeout":"1s",` + region + `,` + node + `}`, ""},
		// The Menu without a box is in no region, and still there: a wait for none to
		// show fails closed.
		{"wait_node_gone: one without a box still counts",
			`{"name":"w","do":"wait_node_gone","class":"safe","timeout":"100ms","region":{"x":600,"y":0,"w":100,"h":100},` + node + `}`, "still showed"},
		{"wait_node_gone: the one in its region still shows",
			`{"name":"w","do":"wait_node_gone","class":"safe","timeout":"100ms",` + region + `,` + node + `}`, "still showed"},
		{"wait_node: none in its region",
			`{"name":"w","do":"wait_node","class":"safe","timeout":"100ms","region":{"x":600,"y":0,"w":100,"h":100},` + node + `}`, "no push button"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := pageRunner(&windowsTree{pid: 4242, root: menus()})
			var res evidence.Record
			err := r.perform(context.Background(), step(t, tc.step), &res)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("%v; want %q", err, tc.wantErr)
			}
		})
	}
}

package atspi_test

import (
	"context"
	"slices"
	"testing"

	. "github.com/sendonce/sendonce/vision/atspi"
)

// page is Chromium's tree of Converse.js (issue 44), as the session's accessibility bus
// serves it: the app's window, its web page (docRole "document web"; another role
// stands for the same shape in a GTK or Qt app), the page's root section, whose box has
// height 0 at the bottom of the window while the whole page shows, and in it the
// contacts menu: a list in a box of 32x25 and, hanging below that box as HTML lets it,
// its one item, a push button. A second list item lies above the page's own box
// (scrolled out of the page, over the browser's toolbar): it does not show.
func page(docRole string) *Node {
	on := []string{"enabled", "sensitive", "showing", "visible"}
	return &Node{Role: "application", Name: "chromium", Children: []*Node{
		{Role: "frame", Name: "Converse", States: on, Extents: &Box{X: 0, Y: 0, W: 1280, H: 800}, Children: []*Node{
			{Role: docRole, Name: "Converse", States: on, Extents: &Box{X: 0, Y: 80, W: 1280, H: 720}, Children: []*Node{
				{Role: "section", States: on, Extents: &Box{X: 0, Y: 800, W: 1280, H: 0}, Children: []*Node{
					{Role: "list", States: on, Extents: &Box{X: 170, Y: 150, W: 32, H: 25}, Children: []*Node{
						{Role: "list item", Name: "menu", States: on, Extents: &Box{X: 60, Y: 175, W: 200, H: 147}, Children: []*Node{
							{Role: "push button", Name: "Start a new chat", States: on, Extents: &Box{X: 70, Y: 185, W: 180, H: 30}},
						}},
						{Role: "list item", Name: "above the page", States: on, Extents: &Box{X: 60, Y: 20, W: 200, H: 40}},
					}},
				}},
			}},
		}},
	}}
}

// names are the names of the nodes of a role in a tree, in tree order.
func names(root *Node, role string) []string {
	var out []string
	for _, n := range (Match{Role: role}).Find(root) {
		out = append(out, n.Name)
	}
	return out
}

// TestSnapshotOfAPageClipsByThePageAlone: with ShowingOnly, inside a web page (below a
// node whose role is "document web") an element's box clips none of its descendants:
// the contacts menu's item, drawn below its list's 32x25 box and under a section of
// height 0, is read, with its button, where it is drawn. The page's own box still
// clips: the item above it is left out. The same shape in an app's own widgets (no
// "document web" above it) is clipped as GTK and Qt boxes always were: the item below
// its list's box is left out.
//
// Before 1a56505 every box clipped what lay below it: the page's section, of no
// height, hid the list and all in it, and the menu's button was never found.
func TestSnapshotOfAPageClipsByThePageAlone(t *testing.T) {
	ctx := context.Background()
	for _, role := range []string{"document web", "Document Web", "document frame"} {
		b, a := serveApp(t, page(role))
		got, err := b.Snapshot(ctx, a.Ref, Limits{ShowingOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if n := names(got, "list item"); !slices.Equal(n, []string{"menu"}) {
			t.Errorf("%s: list items %q read; want the menu, drawn below its list's box (the one above the page, scrolled out of it, does not show)", role, n)
		}
		buttons := (Match{Role: "push button", Name: "Start a new chat", Showing: true}).Find(got)
		if len(buttons) != 1 {
			t.Fatalf("%s: %d buttons Start a new chat read; want the one in the menu", role, len(buttons))
		}
		if v := buttons[0].Visible; v == nil || *v != (Box{X: 70, Y: 185, W: 180, H: 30}) {
			t.Errorf("%s: the menu's button shows at %v; want where it is drawn, its whole box (70,185 180x30)", role, v)
		}
	}

	b, a := serveApp(t, page("panel"))
	got, err := b.Snapshot(ctx, a.Ref, Limits{ShowingOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := names(got, "list item"); len(n) != 0 {
		t.Errorf("outside a page: list items %q read; want none: the list's box clips what lies outside it", n)
	}
	if n := len((Match{Role: "push button"}).Find(got)); n != 0 {
		t.Errorf("outside a page: %d buttons read below a list item clipped away; want none", n)
	}
	// Without ShowingOnly nothing is left out, in a page or not: the served tree whole.
	all, err := b.Snapshot(ctx, a.Ref, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(page("panel"), all); d != "" {
		t.Errorf("a snapshot of everything differs from the tree served: %s", d)
	}
}

// TestSnapshotWithinReadsBelowANodeOfNoArea: a node whose extents have no area (width or
// height 0) never leaves out what lies below it for not meeting Within: the heading
// that titles Converse's chat lies under the page's section of height 0, at the bottom
// of the window, outside the title's region. A node with an area outside Within is
// still left out with its subtree, and so is a node of the no-area one's subtree that
// lies outside Within.
//
// Before 1a56505 the section, meeting no region, was left out and the title with it.
// Outside a page a box of no area still clips what lies below it, as GTK and Qt boxes
// always did (TestSnapshotOfAPageClipsByThePageAlone's panel case).
func TestSnapshotWithinReadsBelowANodeOfNoArea(t *testing.T) {
	on := []string{"enabled", "sensitive", "showing", "visible"}
	for _, tc := range []struct {
		name    string
		docRole string
		limits  Limits
	}{
		// As the driver reads a chat's title: what shows, within the title's region.
		{"in a page what shows", "document web", Limits{ShowingOnly: true}},
		{"in a page", "document web", Limits{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			served := &Node{Role: "application", Name: "chromium", Children: []*Node{
				{Role: "frame", Name: "Converse", States: on, Extents: &Box{X: 0, Y: 0, W: 1280, H: 800}, Children: []*Node{
					{Role: tc.docRole, States: on, Extents: &Box{X: 0, Y: 0, W: 1280, H: 800}, Children: []*Node{
						{Role: "section", States: on, Extents: &Box{X: 0, Y: 800, W: 1280, H: 0}, Children: []*Node{
							{Role: "heading", Name: "Bob", States: on, Extents: &Box{X: 300, Y: 20, W: 200, H: 30}},
							{Role: "heading", Name: "in the chat", States: on, Extents: &Box{X: 300, Y: 400, W: 200, H: 30}},
						}},
						{Role: "panel", Name: "the chat", States: on, Extents: &Box{X: 215, Y: 70, W: 1000, H: 600}, Children: []*Node{
							{Role: "heading", Name: "below a node outside", States: on, Extents: &Box{X: 300, Y: 30, W: 200, H: 30}},
						}},
					}},
				}},
			}}
			l := tc.limits
			l.Within = &Box{X: 270, Y: 0, W: 1130, H: 66}
			b, a := serveApp(t, served)
			got, err := b.Snapshot(context.Background(), a.Ref, l)
			if err != nil {
				t.Fatal(err)
			}
			if n := names(got, "heading"); !slices.Equal(n, []string{"Bob"}) {
				t.Errorf("headings %q read within the title's region; want Bob alone (under the section of no area)", n)
			}
			if n := names(got, "section"); len(n) != 1 {
				t.Errorf("%d sections read; want the one of no area kept", len(n))
			}
		})
	}
}

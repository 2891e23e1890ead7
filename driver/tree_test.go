package driver

import (
	"context"
	"errors"
	"fmt"
	"image"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/vision/atspi"
)

// chooser is an app's tree: the file chooser whose Open button turns sensitive from
// the readyAt-th snapshot on (never, when 0); every snapshot is counted.
type chooser struct {
	mu      sync.Mutex
	reads   int
	readyAt int
	pid     int
	windows *atspi.Match  // what the last snapshot was asked to keep
	slow    time.Duration // how long each snapshot takes to answer
	// cut, as the live reader does at 5 s, ends a read the scope gives no time of its
	// own that takes longer than this (0: never).
	cut time.Duration
	// crowded: a read of the whole chooser is over the limits (it lists a crowded
	// folder); one within a region is not. within is the last read's region.
	crowded bool
	within  *atspi.Box
}

func (c *chooser) Snapshot(ctx context.Context, pid int, scope TreeScope) (*atspi.Node, error) {
	windows := scope.Windows
	limit := scope.Time
	if limit == 0 {
		limit = c.cut
	}
	if limit > 0 && c.slow > limit {
		select {
		case <-time.After(limit):
			return nil, errors.New("the app did not answer in time")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	select {
	case <-time.After(c.slow):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if pid != c.pid {
		return nil, errors.New("no such application")
	}
	c.reads++
	c.within = scope.Within
	if c.crowded && scope.Within == nil && windows != nil && windows.Name == "Choose File to Send…" {
		return nil, fmt.Errorf("reading x's accessibility tree: %w: more than 2000 nodes", atspi.ErrTooBig)
	}
	open := []string{"showing", "visible"} // sorted, as a snapshot reads them
	if c.readyAt > 0 && c.reads >= c.readyAt {
		open = []string{"sensitive", "showing", "visible"}
	}
	c.windows = windows
	return &atspi.Node{Role: "application", Children: []*atspi.Node{
		{Role: "frame", Name: "X", States: []string{"showing"}, Children: []*atspi.Node{
			{Role: "push button", Name: "Open", States: []string{"showing", "sensitive"}}, // not the chooser's
		}},
		{Role: "dialog", Name: "Choose File to Send…", States: []string{"showing"}, Children: []*atspi.Node{
			{Role: "push button", Name: "Open", States: open, Extents: &atspi.Box{X: 600, Y: 500, W: 80, H: 30}},
		}},
	}}, nil
}

// treeProfile chooses (and sends) with Return once the chooser's Open button is
// sensitive, as the tree says.
const treeProfile = `{"app":"x","process":"x","window_title":"X",
 "title":{"region":{"x":0,"y":0,"w":100,"h":30}},"chat":{"region":{"x":0,"y":30,"w":0,"h":0}},
 "send_page":{"region":{"x":0,"y":30,"w":0,"h":0}},"sent_item_timeout":"300ms",
 "choose_file":[
   {"name":"wait for Open","do":"wait_node","class":"safe","timeout":"2s",
    "node":{"role":"push button","name":"Open","states":["sensitive"],"under":{"role":"dialog","name":"Choose File to Send…"}}},
   {"name":"choose and send","do":"key","keys":"Return","class":"submit","crosses":"choose_file,send"}]}`

func treeDesk() *sendsOnChoose {
	return &sendsOnChoose{windowsOnly: windowsOnly{focus: 1, ws: []Window{
		{ID: 1, PID: 4242, Process: "x", Title: "X", Viewable: true, Bounds: image.Rect(0, 0, 800, 600)},
	}}}
}

// TestWaitNodeGatesTheCrossing: the crossing key waits for the tree to say the chooser's
// Open button can be pressed (another window's sensitive Open does not count), and the
// step's result records the node read, with its ancestors and extents.
func TestWaitNodeGatesTheCrossing(t *testing.T) {
	desk := treeDesk()
	r, crossed := runnerOn(t, desk, desk, readsBob{}, treeProfile)
	tree := &chooser{pid: 4242, readyAt: 4}
	r.Tree = tree
	if _, err := r.Deliver(context.Background()); err != nil && !strings.Contains(err.Error(), "sent item") {
		t.Fatalf("deliver: %v", err)
	}
	if tree.windows == nil || tree.windows.Name != "Choose File to Send…" {
		t.Fatalf("the snapshot was asked for windows %v; want only the chooser dialog the node is under", tree.windows)
	}
	if desk.keys != 1 || len(crossed()) != 2 || tree.reads < 4 {
		t.Fatalf("%d key presses, crossings %v, %d snapshots; want the key once Open was sensitive (snapshot 4)", desk.keys, crossed(), tree.reads)
	}
	r.Rec.Close()
	b, err := evidence.Verify(r.Rec.Dir(), evidence.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var target *evidence.Target
	for _, rec := range b.Records {
		if rec.Kind == evidence.KindResult && rec.Target != nil && rec.Target.Method == "accessibility_tree" {
			target = rec.Target
		}
	}
	if target == nil || len(target.Words) != 1 || !strings.Contains(target.Words[0], `push button "Open" [sensitive showing visible] in dialog "Choose File to Send…"`) ||
		target.Box == nil || target.Box.X != 600 {
		t.Fatalf("the step's result records %+v; want the node read, its dialog and its extents", target)
	}
}

// TestWaitNodeJudgesASlowRead: on a loaded machine one read of the tree can take longer
// than the step's timeout (2 s here) and than the reader's own bound (2 s here, 5 s
// live); the read begun within the timeout is let finish and judged, and the wait does
// not stop on how slowly the bus answered.
func TestWaitNodeJudgesASlowRead(t *testing.T) {
	desk := treeDesk()
	r, crossed := runnerOn(t, desk, desk, readsBob{}, treeProfile)
	tree := &chooser{pid: 4242, readyAt: 1, slow: 2500 * time.Millisecond, cut: 2 * time.Second}
	r.Tree = tree
	if _, err := r.Deliver(context.Background()); err != nil && !strings.Contains(err.Error(), "sent item") {
		t.Fatalf("deliver: %v", err)
	}
	if desk.keys != 1 || len(crossed()) != 2 {
		t.Fatalf("%d key presses, crossings %v; want the key once the slow read said Open was sensitive", desk.keys, crossed())
	}
}

// TestWaitNodeStopsBeforeTheBoundary: a node that never comes, or no tree at all, stops
// the delivery before any boundary, naming what it waited for.
func TestWaitNodeStopsBeforeTheBoundary(t *testing.T) {
	for name, tree := range map[string]Tree{"never sensitive": &chooser{pid: 4242}, "no tree": nil} {
		desk := treeDesk()
		r, crossed := runnerOn(t, desk, desk, readsBob{}, treeProfile)
		r.Tree = tree
		_, err := r.Deliver(context.Background())
		want := `no push button named "Open" on screen [sensitive] under dialog named "Choose File to Send…" on screen showed`
		if tree == nil {
			want = "no accessibility tree"
		}
		if !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), want) || desk.keys != 0 || len(crossed()) != 0 {
			t.Errorf("%s: %v, %d keys, crossings %v; want a stop before the boundary naming %q", name, err, desk.keys, crossed(), want)
		}
	}
}

func TestProfileNodeFields(t *testing.T) {
	base := `{"app":"x","process":"x","choose_file":[%s,{"name":"c","do":"key","keys":"Return","class":"may_submit","crosses":"choose_file"}],"send":[{"name":"s","do":"key","keys":"Return","class":"submit","crosses":"send"}]}`
	for step, want := range map[string]string{
		`{"name":"w","do":"wait_node","class":"safe","node":{"role":"push button","name":"Open"}}`:       "",
		`{"name":"w","do":"wait_node","class":"safe"}`:                                                   "a wait_node step needs a node",
		`{"name":"w","do":"click_node","class":"safe"}`:                                                  "a click_node step needs a node",
		`{"name":"w","do":"wait_text","class":"safe","text":"x","node":{"role":"label"}}`:                "",
		`{"name":"w","do":"key","keys":"a","class":"safe","node":{"role":"label"}}`:                      "node is for wait_node",
		`{"name":"w","do":"hover_offset","class":"safe","offset":{"x":1,"y":1},"node":{"role":"label"}}`: "",
		`{"name":"w","do":"wait_window","class":"safe","window":"x","node":{"role":"label"}}`:            "node is for wait_node",
		`{"name":"w","do":"wait_node","class":"safe","node":{"name":"Open"}}`:                            "by its role",
		`{"name":"w","do":"wait_node","class":"safe","node":{"role":"label","pattern":"("}}`:             "node pattern",
		`{"name":"w","do":"wait_node","class":"safe","node":{"role":"label","under":{"name":"d"}}}`:      "by its role",
	} {
		_, err := ParseProfile([]byte(strings.Replace(base, "%s", step, 1)))
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v; want %q", step, err, want)
		}
	}
}

// TestNodeStandsInForAnOffset: a click_offset or hover_offset step that names a node
// acts on the middle of the node where the app's tree answered, and at its offset where
// there is no tree.
func TestNodeStandsInForAnOffset(t *testing.T) {
	node := `"node":{"role":"push button","name":"Open","under":{"role":"dialog","name":"Choose File to Send…"}}`
	profile := strings.Replace(treeProfile, `"choose_file":[`, `"choose_file":[
   {"name":"point at Open","do":"hover_offset","class":"safe","offset":{"x":5,"y":6},`+node+`},
   {"name":"click Open","do":"click_offset","class":"safe","offset":{"x":5,"y":6},`+node+`},`, 1)
	for _, c := range []struct {
		name string
		tree Tree
		want string // where both inputs went
	}{
		{"a tree", &chooser{pid: 4242, readyAt: 1}, "640,515"},
		{"no tree", nil, "5,6"},
	} {
		t.Run(c.name, func(t *testing.T) {
			desk := treeDesk()
			r, _ := runnerOn(t, desk, desk, readsBob{}, profile)
			r.Tree = c.tree
			r.Deliver(context.Background())
			r.Rec.Close()
			b, err := evidence.Verify(r.Rec.Dir(), evidence.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var at []string
			for _, rec := range b.Records {
				for _, in := range rec.Inputs {
					if in.Kind == "click" || in.Kind == "move" {
						at = append(at, fmt.Sprintf("%s %d,%d", in.Kind, in.X, in.Y))
					}
				}
			}
			want := []string{"move " + c.want, "click " + c.want}
			if strings.Join(at, "; ") != strings.Join(want, "; ") {
				t.Fatalf("the pointer went to %q; want %q", at, want)
			}
		})
	}
}

// TestWaitOnACrowdedChooser: a wait for a node whose window's tree is over the read's
// limits (Gajim's chooser listing a crowded folder) reads again only what meets the
// step's region, and finds the node there; without a region it stops before the
// boundary, naming the limit.
func TestWaitOnACrowdedChooser(t *testing.T) {
	for _, tc := range []struct {
		name, region string
		sends        bool
	}{
		{"with a region", `,"region":{"x":590,"y":490,"w":100,"h":50}`, true},
		{"without", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			profile := strings.Replace(treeProfile, `{"name":"wait for Open","do":"wait_node","class":"safe","timeout":"2s",`,
				`{"name":"wait for Open","do":"wait_text","text":"Open","class":"safe","timeout":"2s"`+tc.region+`,`, 1)
			desk := treeDesk()
			r, crossed := runnerOn(t, desk, desk, readsBob{}, profile)
			tree := &chooser{pid: 4242, readyAt: 1, crowded: true}
			r.Tree = tree
			_, err := r.Deliver(context.Background())
			if tc.sends {
				if desk.keys != 1 || len(crossed()) != 2 || tree.within == nil || tree.within.X != 590 {
					t.Fatalf("%d key presses, crossings %v, last read within %+v (%v); want Open found by a read of the step's region", desk.keys, crossed(), tree.within, err)
				}
				return
			}
			if desk.keys != 0 || len(crossed()) != 0 || err == nil || !strings.Contains(err.Error(), "over the snapshot's limits") {
				t.Fatalf("%d key presses, crossings %v, %v; want a stop before the boundary naming the limit", desk.keys, crossed(), err)
			}
		})
	}
}

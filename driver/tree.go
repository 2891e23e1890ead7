package driver

import (
	"context"
	"errors"
	"fmt"
	"image"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/internal/clock"
	"github.com/sendonce/sendonce/vision/atspi"
)

// Tree reads what an app publishes of its widgets on the accessibility bus: the app's
// own words for what it shows (vision/atspi).
type Tree interface {
	// Snapshot reads what shows of the tree of the app whose process is pid, within
	// scope.
	Snapshot(ctx context.Context, pid int, scope TreeScope) (*atspi.Node, error)
}

// TreeScope is what a snapshot reads: the app's top-level windows that match Windows
// (all when nil), and of them what meets Within on screen (all when nil).
type TreeScope struct {
	Windows *atspi.Match
	Within  *atspi.Box
	// ThroughViewports reads on below a viewport GTK cannot place (atspi.Limits): the
	// conversation's rows, once Gajim showed it again. Only the chat's reads need them;
	// other reads skip them (they double a read of Gajim's window). A replay keys its
	// trees by the other fields (the chat's region tells its reads apart).
	ThroughViewports bool `json:"-"`
	// Time bounds one read of the tree; 0 leaves it to the reader (the live one cuts a
	// read at 5 s). A wait gives its reads longer (treeReadLimit): how slowly the bus
	// answers is not what it waits for.
	Time time.Duration `json:"-"`
}

// ErrNoTree: the profile reads the app's accessibility tree, and there is none to read.
var ErrNoTree = errors.New("no accessibility tree")

// NodeMatch names a node of the app's accessibility tree in a profile, as `sendonce
// inspect` prints it: its role, its name (exact after NFC, or a pattern), the text it
// holds (templates allowed: "{{file_path}}"), the states it must be in, and an ancestor
// it must be under.
//
//	{"role": "push button", "name": "Open", "states": ["sensitive"],
//	 "under": {"role": "dialog", "name": "Choose File to Send…"}}
type NodeMatch struct {
	Role    string     `json:"role"`
	Name    string     `json:"name,omitempty"`
	Pattern string     `json:"pattern,omitempty"`
	Text    string     `json:"text,omitempty"`
	States  []string   `json:"states,omitempty"`
	Under   *NodeMatch `json:"under,omitempty"`
}

func (m *NodeMatch) check(where string) error {
	switch {
	case m == nil:
		return nil
	case m.Role == "":
		return fmt.Errorf("%s: a node is named by its role at least (sendonce inspect prints each node's role and name)", where)
	case m.Name != "" && m.Pattern != "":
		return fmt.Errorf("%s: a node has a name or a pattern, not both", where)
	}
	if m.Pattern != "" {
		if _, err := regexp.Compile(m.Pattern); err != nil {
			return fmt.Errorf("%s: node pattern: %v", where, err)
		}
	}
	return m.Under.check(where + " (under)")
}

// match is the atspi.Match the node names, templates expanded; only nodes that show.
func (m *NodeMatch) match(v Vars) atspi.Match {
	out := atspi.Match{Role: m.Role, Name: v.expand(m.Name), Text: v.expand(m.Text), States: m.States, Showing: true}
	if m.Pattern != "" {
		out.Pattern = regexp.MustCompile(m.Pattern) // checked when the profile was read
	}
	if m.Under != nil {
		u := m.Under.match(v)
		out.Under = &u
	}
	return out
}

// topLevelRoles are the roles of an app's top-level windows.
var topLevelRoles = map[string]bool{"frame": true, "dialog": true, "file chooser": true, "window": true, "alert": true, "color chooser": true, "font chooser": true}

// treePoll is how often a wait reads the tree again.
const treePoll = 50 * time.Millisecond

// treeReadLimit bounds one read of the app's tree within a wait: a bus that answers
// later than this is taken as not answering.
const treeReadLimit = 30 * time.Second

// probeTime bounds the first read of the app's tree, before anything is touched.
const probeTime = 5 * time.Second

// probeTree reads the app's main window's tree once, before anything is touched, where
// the profile reads the tree: the steps that name a node read it from then on. Without
// a tree (none given, the app publishes none, the bus does not answer) a profile that
// requires it stops here; else OCR reads in the tree's place, the steps that read only
// the tree (wait_node, click_node) stop when they come, and the evidence and the result
// say so. Where the sources that name the app's bus disagree, or the only one is in
// doubt (atspi.ErrSourcesDisagree, atspi.ErrUntrusted), every profile stops here.
func (r *Runner) probeTree(ctx context.Context) error {
	if !r.Profile.ReadsTree() {
		return nil
	}
	var err error
	switch {
	case r.Tree == nil:
		err = errors.New("this desktop gives no accessibility tree (a replay, or opened without one)")
	case r.window.PID == 0:
		err = errors.New("neither the X server nor the app's window (_NET_WM_PID) names the process that made it, to find its tree by")
	case r.window.PIDFrom == PIDFromProperty:
		// Any client on the display can write _NET_WM_PID: the tree found by it could
		// be another program's, titled as the app's window is.
		err = errors.New("the X server cannot say which process made the app's window (it has no X-Resource extension, or the app reaches it over TCP), and the window's own _NET_WM_PID is any display client's to write: the tree is not looked up by it (xdpyinfo -queryExtensions | grep X-Resource)")
	default:
		pctx, cancel := context.WithTimeout(ctx, probeTime)
		_, err = r.Tree.Snapshot(pctx, r.window.PID, TreeScope{Windows: &atspi.Match{Name: r.window.Title}, Time: probeTime})
		cancel()
	}
	r.treeOK, r.treeNote = err == nil, "read"
	text := "the app's accessibility tree answered"
	if err != nil {
		r.treeNote = fmt.Sprintf("unavailable (%v): OCR read in its place", err)
		text = "unavailable: " + err.Error()
	}
	if _, rerr := r.appendRecord(evidence.Record{Kind: evidence.KindObserve, Intent: "read the app's accessibility tree",
		Observed: &evidence.Observation{What: "accessibility_tree", DispatchID: r.dispatchID(), Readings: []evidence.Reading{{Source: SourceTree, Text: text}}}}); rerr != nil {
		return rerr
	}
	if errors.Is(err, atspi.ErrSourcesDisagree) || errors.Is(err, atspi.ErrUntrusted) {
		// Not a tree that is missing: a display where another program may be passing
		// its own tree off as the app's. OCR of the same display is no way round it.
		r.progress("%-10s %-32s %v: stopping before anything is touched", "safe", "read the app's tree", err)
		return fmt.Errorf("%w: %w", ErrStopped, err)
	}
	if err != nil && r.Profile.Tree == TreeRequired {
		r.progress("%-10s %-32s %v: stopping before anything is touched", "safe", "read the app's tree", err)
		return fmt.Errorf("%w: %w: the profile requires it (tree: required): %v; sendonce doctor says what to install or set", ErrStopped, ErrNoTree, err)
	}
	if err != nil {
		r.progress("%-10s %-32s unavailable (%v): OCR reads in its place", "safe", "read the app's tree", err)
	}
	return nil
}

// waitNode waits (the step's timeout) until exactly one node that shows matches the
// step's node (wait_node), or none does (wait_node_gone); the result records the node
// read as its target.
func (r *Runner) waitNode(ctx context.Context, s Step, res *evidence.Record) error {
	_, err := r.awaitNode(ctx, s, s.Do != "wait_node_gone", res)
	return err
}

// clickNode waits, as wait_node does, for exactly one node that shows to match the
// step's node, and clicks the middle of its extents: a control named by its role, so a
// peer's message quoting its label (a label, not a push button) is never clicked.
func (r *Runner) clickNode(ctx context.Context, s Step, res *evidence.Record) error {
	return r.pointAtNode(ctx, s, res, true)
}

// pointAtNode waits, as wait_node does, for the step's node, and clicks the middle of
// where it shows (click), or puts the pointer there.
func (r *Runner) pointAtNode(ctx context.Context, s Step, res *evidence.Record, click bool) error {
	n, err := r.awaitNode(ctx, s, true, res)
	if err != nil {
		return err
	}
	c, err := r.middle(n)
	if err != nil {
		return err
	}
	if !click {
		res.Inputs = []evidence.Input{evidence.MoveInput(c.X, c.Y)}
		return r.Driver.Move(ctx, c)
	}
	res.Inputs = []evidence.Input{evidence.ClickInput(c.X, c.Y)}
	return r.Driver.Click(ctx, c)
}

// middle is the middle of where a node shows, on the screen.
func (r *Runner) middle(n *atspi.Node) (image.Point, error) {
	e := drawn(n)
	if e == nil || e.W <= 0 || e.H <= 0 {
		return image.Point{}, fmt.Errorf("%s has no extents on screen: nothing to point at", n)
	}
	c := centre(*e)
	if !c.In(r.Driver.Bounds()) {
		return image.Point{}, fmt.Errorf("%s is off the screen (its middle is at %v)", n, c)
	}
	return c, nil
}

// awaitNode reads the tree until exactly one node that shows matches the step's node
// (present), or none does, within the step's timeout; it records the nodes read last as
// the result's target and returns the one found.
func (r *Runner) awaitNode(ctx context.Context, s Step, present bool, res *evidence.Record) (*atspi.Node, error) {
	if !r.treeOK {
		return nil, fmt.Errorf("%w: the step reads the app's accessibility tree and there is none here (%s); see sendonce doctor and sendonce inspect", ErrNoTree, r.treeNote)
	}
	m := s.Node.match(r.Vars)
	// Only the top-level window the node's outermost ancestor names is read (a chooser's
	// tree without the main window's, or a completion popup's), where that ancestor is
	// a window; else the app's main window.
	windows := &atspi.Match{Name: r.window.Title}
	outer := m.Under
	for outer != nil && outer.Under != nil {
		outer = outer.Under
	}
	if outer != nil && topLevelRoles[strings.ToLower(outer.Role)] {
		windows = outer // a dialog inside a web page, under its "document web", is no window
	}
	// The step's timeout bounds how long the app may take to show the node, not how long
	// one read of its tree may take: a read begun within it is let finish (up to
	// treeReadLimit, which the scope passes to the reader) and judged.
	deadline := r.now().Add(r.timeout(s))
	scope := TreeScope{Windows: windows, Time: treeReadLimit}
	var area image.Rectangle
	inRegion := s.Region != nil && nodeStepsInRegion[s.Do]
	if inRegion {
		var err error
		if area, err = r.region(ctx, Step{Region: s.Region, Window: s.Window}); err != nil {
			return nil, err
		}
		if present {
			// Only what meets the region is read: a long conversation's rows, when
			// the step looks at a toolbar, cost nothing. (A wait for none to show
			// reads everything: what overflows a box outside the region into it must
			// still count.)
			scope.Within = &atspi.Box{X: area.Min.X, Y: area.Min.Y, W: area.Dx(), H: area.Dy()}
		}
	}
	var last []*atspi.Node
	for {
		rctx, cancel := context.WithTimeout(ctx, treeReadLimit)
		tree, err := r.Tree.Snapshot(rctx, r.window.PID, scope)
		cancel()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("waiting for %s: %w", m, ctx.Err())
		}
		if errors.Is(err, atspi.ErrTooBig) && present && s.Region != nil && scope.Within == nil {
			// The window's tree is more than a read may hold (a file chooser listing a
			// crowded folder): only what meets the step's region is read, and the node
			// must show inside it.
			a, rerr := r.region(ctx, Step{Region: s.Region, Window: s.Window})
			if rerr != nil {
				return nil, rerr
			}
			area, inRegion = a, true
			scope.Within = &atspi.Box{X: area.Min.X, Y: area.Min.Y, W: area.Dx(), H: area.Dy()}
			continue
		}
		if err == nil {
			last = m.Find(tree)
			if inRegion {
				// A page names many controls alike (every "Menu" of a web app's list):
				// the step's region says which, by where each shows. A node without a
				// box is in no region, but still there for a wait for none to show:
				// that wait fails closed.
				last = slices.DeleteFunc(last, func(n *atspi.Node) bool {
					e := drawn(n)
					return e == nil && present || e != nil && !centre(*e).In(area)
				})
			}
			if present && len(last) == 1 || !present && len(last) == 0 {
				res.Target = nodeTarget(tree, last)
				if present {
					return last[0], nil
				}
				return nil, nil
			}
		}
		if !r.now().Before(deadline) {
			if err != nil {
				return nil, fmt.Errorf("%w: reading it: %v", ErrNoTree, err)
			}
			res.Target = nodeTarget(tree, last)
			if present && len(last) == 0 && tree != nil {
				// What showed instead: the nodes of the role, where the node was looked
				// for, whatever their name, text and states (five at most).
				near := (atspi.Match{Role: m.Role, Under: m.Under, Showing: true}).Find(tree)
				res.Target = nodeTarget(tree, near[:min(len(near), 5)])
				res.Target.Method = "accessibility_tree (not found; the nodes of its role)"
			}
			if present && len(last) > 1 {
				return nil, fmt.Errorf("%d nodes show as %s: a read must name one (name its ancestor: under)", len(last), m)
			}
			if present {
				return nil, fmt.Errorf("no %s showed within %v", m, r.timeout(s))
			}
			return nil, fmt.Errorf("%s still showed after %v", m, r.timeout(s))
		}
		clock.Sleep(ctx, min(treePoll, deadline.Sub(r.now())))
	}
}

// placePage, for a profile whose regions are a web page's (regions_in "page"), finds
// the one page that shows in the app's window (its tree's showing "document web") and
// takes its box as what the profile's regions are placed in: a browser's tab strip,
// address bar and warning bars move the page, not what is on it. None, or more than one,
// stops the delivery before anything is touched.
func (r *Runner) placePage(ctx context.Context) error {
	if r.Profile.RegionsIn != RegionsInPage {
		return nil
	}
	if !r.treeOK {
		return fmt.Errorf("%w: %w: the profile places its regions in the web page (regions_in: page), which only the app's tree shows: %s", ErrStopped, ErrNoTree, r.treeNote)
	}
	pctx, cancel := context.WithTimeout(ctx, treeReadLimit)
	defer cancel()
	tree, err := r.Tree.Snapshot(pctx, r.window.PID, TreeScope{Windows: &atspi.Match{Name: r.window.Title}, Time: treeReadLimit})
	if err != nil {
		return fmt.Errorf("%w: %w: finding the web page in the window: %v", ErrStopped, ErrNoTree, err)
	}
	var pages []image.Rectangle
	for _, n := range (atspi.Match{Role: "document web", Showing: true}).Find(tree) {
		if e := drawn(n); e != nil && !rectOf(*e).Intersect(r.window.Bounds).Empty() {
			pages = append(pages, rectOf(*e).Intersect(r.window.Bounds))
		}
	}
	if len(pages) != 1 {
		return fmt.Errorf("%w: %d web pages show in the window %q (its tree's document web): the profile's regions are a page's, and which page is in doubt", ErrStopped, len(pages), r.window.Title)
	}
	r.page = pages[0]
	r.progress("%-10s %-32s %v", "safe", "place the regions in the page", r.page)
	return nil
}

// placed is what the profile's regions are placed in: the web page, for a profile whose
// regions are a page's, else the app's window.
func (r *Runner) placed() image.Rectangle {
	if !r.page.Empty() {
		return r.page
	}
	return r.window.Bounds
}

// nodeStepsInRegion are the steps whose region, where they have one, narrows the nodes
// they match to those whose middle shows inside it.
var nodeStepsInRegion = map[string]bool{"wait_node": true, "wait_node_gone": true, "click_node": true}

// drawn is where a node shows on screen: its extents, less what a scrolled view around
// it clips away (nil without extents).
func drawn(n *atspi.Node) *atspi.Box {
	if n.Visible != nil {
		return n.Visible
	}
	return n.Extents
}

// nodeTarget records nodes read from the tree as a step's target: each as the app names
// it (role, name, text, states) with its ancestors, and the first one's extents.
func nodeTarget(root *atspi.Node, nodes []*atspi.Node) *evidence.Target {
	t := &evidence.Target{Method: "accessibility_tree"}
	for i, n := range nodes {
		line := n.String()
		if path := pathTo(root, n); len(path) > 0 {
			line += " in " + strings.Join(path, " > ")
		}
		t.Words = append(t.Words, line)
		if e := drawn(n); i == 0 && e != nil {
			t.Box = ptr(box(rectOf(*e)))
		}
	}
	return t
}

// pathTo is n's ancestors below root's application, outermost first.
func pathTo(root, n *atspi.Node) []string {
	var path []string
	var walk func(at *atspi.Node, above []string) bool
	walk = func(at *atspi.Node, above []string) bool {
		if at == n {
			path = above
			return true
		}
		if at != root {
			above = append(above, fmt.Sprintf("%s %q", at.Role, at.Name))
		}
		for _, c := range at.Children {
			if walk(c, above) {
				return true
			}
		}
		return false
	}
	walk(root, nil)
	return path
}

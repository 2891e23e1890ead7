package atspi_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/sendonce/sendonce/vision/atspi"
	"github.com/sendonce/sendonce/vision/atspi/atspitest"
)

// TestSnapshotOverDBus: the registry's applications, found by process id, and a
// snapshot of one with every field read over the bus (names and texts in their own
// scripts); what is not on screen is left out when asked.
func TestSnapshotOverDBus(t *testing.T) {
	addr := atspitest.PrivateBus(t)
	want := tree()
	want.Children[0].Extents = &Box{X: 10, Y: 20, W: 300, H: 200}
	app := atspitest.App(t, addr, want, false)
	atspitest.Registry(t, addr, app)
	ctx := context.Background()
	b, err := Open(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a, err := b.Application(ctx, uint32(os.Getpid()))
	if err != nil || a.Name != "gajim" || a.Toolkit != "fake" {
		t.Fatalf("the application of this process: %+v %v", a, err)
	}
	if _, err := b.Application(ctx, 1); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "libatk-adaptor") {
		t.Fatalf("a process with no tree: %v; want ErrUnavailable saying what to install", err)
	}
	got, err := b.Snapshot(ctx, a.Ref, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(want, got); d != "" {
		t.Fatalf("the snapshot differs from the tree served: %s", d)
	}
	showing, err := b.Snapshot(ctx, a.Ref, Limits{ShowingOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := len((Match{Role: "frame"}).Find(showing)); n != 1 {
		t.Fatalf("a snapshot of what shows holds %d frames; want 1 (Воb's is not on screen)", n)
	}
	dialog, err := b.Snapshot(ctx, a.Ref, Limits{Windows: &Match{Role: "dialog"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(dialog.Children) != 1 || dialog.Children[0].Role != "dialog" || len((Match{Role: "push button"}).Find(dialog)) != 1 {
		t.Fatalf("a snapshot of the dialog alone holds %d windows; want the dialog and its one button", len(dialog.Children))
	}
	if _, err := b.Snapshot(ctx, a.Ref, Limits{Nodes: 5}); !errors.Is(err, ErrTooBig) {
		t.Fatalf("a snapshot over its node limit: %v; want ErrTooBig", err)
	}
	if _, err := b.Snapshot(ctx, a.Ref, Limits{Depth: 1}); !errors.Is(err, ErrTooBig) {
		t.Fatalf("a snapshot over its depth limit: %v; want ErrTooBig", err)
	}
}

// TestSnapshotAsksAnObjectsKindOnce: a Bus's second read of the same tree asks each
// object only what can change (name, states, children, extents, text), not its role and
// interfaces again, and reads the same tree.
func TestSnapshotAsksAnObjectsKindOnce(t *testing.T) {
	addr := serveAt(t, tree())
	b, a := openApp(t, addr)
	ctx := context.Background()
	read := func() (*Node, int64) {
		before := b.Calls()
		n, err := b.Snapshot(ctx, a.Ref, Limits{StablePaths: true})
		if err != nil {
			t.Fatal(err)
		}
		return n, b.Calls() - before
	}
	first, firstCalls := read()
	second, secondCalls := read()
	nodes := 0
	first.Walk(func(*Node, int) bool { nodes++; return true })
	if d := diff(first, second); d != "" {
		t.Fatalf("the second read differs from the first: %s", d)
	}
	if want := firstCalls - 2*int64(nodes); secondCalls != want {
		t.Fatalf("the second read of %d nodes made %d calls, the first %d; want %d (role and interfaces asked once)", nodes, secondCalls, firstCalls, want)
	}
	// A toolkit that may give a path to another object (Qt) is asked every time.
	before := b.Calls()
	if _, err := b.Snapshot(ctx, a.Ref, Limits{}); err != nil || b.Calls()-before != firstCalls {
		t.Fatalf("a read without StablePaths made %d calls (%v); want %d", b.Calls()-before, err, firstCalls)
	}
	// Another Bus (another delivery) asks again.
	b2, _ := openApp(t, addr)
	before = b2.Calls()
	if _, err := b2.Snapshot(ctx, a.Ref, Limits{StablePaths: true}); err != nil || b2.Calls()-before != firstCalls {
		t.Fatalf("a new Bus's first read made %d calls (%v); want %d", b2.Calls()-before, err, firstCalls)
	}
	for toolkit, want := range map[string]bool{"GTK": true, "gtk": true, "Chromium": true, "Qt": false, "": false, "fake": false} {
		if StablePaths(toolkit) != want {
			t.Errorf("StablePaths(%q) = %v, want %v", toolkit, !want, want)
		}
	}
}

// TestAnAppThatStopsAnswering: a snapshot of an app that never answers ends with its
// time limit, and a wait with its ctx: nothing hangs.
func TestAnAppThatStopsAnswering(t *testing.T) {
	addr := atspitest.PrivateBus(t)
	app := atspitest.App(t, addr, tree(), true)
	atspitest.Registry(t, addr, app)
	ctx := context.Background()
	b, err := Open(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	start := time.Now()
	_, err = b.Snapshot(ctx, Ref{Bus: app, Path: RootPath}, Limits{Time: 300 * time.Millisecond})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("a snapshot of an app that does not answer: %v after %v; want its deadline", err, time.Since(start))
	}
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := b.Wait(wctx, Ref{Bus: app, Path: RootPath}, Limits{}, 0, func(*Node) bool { return true }); err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("a wait on an app that does not answer: %v after %v; want its ctx's end", err, time.Since(start))
	}
}

// diff names the first difference between two trees, or "".
func diff(want, got *Node) string {
	if got == nil {
		return fmt.Sprintf("%s %q missing", want.Role, want.Name)
	}
	w := fmt.Sprintf("%s|%s|%s|%v|%v", want.Role, want.Name, want.Text, slices.Sorted(slices.Values(want.States)), want.Extents)
	g := fmt.Sprintf("%s|%s|%s|%v|%v", got.Role, got.Name, got.Text, got.States, got.Extents)
	if want.Extents != nil && got.Extents != nil {
		w, g = strings.Replace(w, fmt.Sprint(want.Extents), fmt.Sprint(*want.Extents), 1), strings.Replace(g, fmt.Sprint(got.Extents), fmt.Sprint(*got.Extents), 1)
	}
	if w != g {
		return fmt.Sprintf("want %s, got %s", w, g)
	}
	if len(want.Children) != len(got.Children) {
		return fmt.Sprintf("%s %q: %d children, want %d", want.Role, want.Name, len(got.Children), len(want.Children))
	}
	for i := range want.Children {
		if d := diff(want.Children[i], got.Children[i]); d != "" {
			return d
		}
	}
	return ""
}

// TestOpenOutlivesItsContext: the context Open is given bounds the connecting, not the
// connection: a caller that opens under a step's deadline reads again after it.
func TestOpenOutlivesItsContext(t *testing.T) {
	addr := atspitest.PrivateBus(t)
	app := atspitest.App(t, addr, tree(), false)
	atspitest.Registry(t, addr, app)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	b, err := Open(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cancel()
	if _, err := b.Application(context.Background(), uint32(os.Getpid())); err != nil {
		t.Fatalf("a read after Open's context ended: %v; want the connection still open", err)
	}
	ended, stop := context.WithCancel(context.Background())
	stop()
	if _, err := Open(ended, addr); err == nil {
		t.Fatal("Open with an ended context connected; want its error")
	}
}

// TestSnapshotWithin: a snapshot within a box leaves out the nodes (below the app's
// windows) whose extents do not meet it, with what lies below them; nodes without
// extents are kept.
func TestSnapshotWithin(t *testing.T) {
	served := tree()
	frame := served.Children[0]
	frame.Extents = &Box{X: 0, Y: 0, W: 800, H: 600}
	frame.Children[0].Extents = &Box{X: 10, Y: 10, W: 100, H: 20}  // the label: in the header
	frame.Children[2].Extents = &Box{X: 10, Y: 500, W: 100, H: 30} // Send Files: below it
	ctx := context.Background()
	b, a := serveApp(t, served)
	got, err := b.Snapshot(ctx, a.Ref, Limits{Within: &Box{X: 0, Y: 0, W: 800, H: 50}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len((Match{Role: "push button", Name: "Send Files"}).Find(got)); n != 0 {
		t.Errorf("a node outside the box was read: %s", got)
	}
	if n := len((Match{Role: "label"}).Find(got)); n != 1 {
		t.Errorf("the node inside the box: %d found; want 1", n)
	}
	if n := len((Match{Role: "text"}).Find(got)); n != 1 {
		t.Errorf("a node without extents: %d found; want it kept", n)
	}
}

// TestSnapshotReadsThroughAnUnplacedNode: a visible viewport that GTK cannot place (its
// position G_MININT, no showing state), as Gajim's conversation viewport reports itself
// once the conversation was shown again, is read through when asked (ThroughViewports): the rows under it that show
// are in the snapshot, clipped by the ancestors that are placed. Any other node that
// does not show still hides what lies below it: one placed, one not visible, and a row
// GTK cannot place.
func TestSnapshotReadsThroughAnUnplacedNode(t *testing.T) {
	on := []string{"enabled", "sensitive", "showing", "visible"}
	unplaced := &Box{X: math.MinInt32, Y: math.MinInt32, W: 846, H: 647}
	row := func(name string, y int) *Node {
		return &Node{Role: "list item", States: on, Extents: &Box{X: 420, Y: y, W: 846, H: 94}, Children: []*Node{
			{Role: "label", Name: name, States: on, Extents: &Box{X: 565, Y: y + 40, W: 80, H: 15}}}}
	}
	served := &Node{Role: "application", Name: "gajim", Children: []*Node{
		{Role: "frame", Name: "Gajim", States: on, Extents: &Box{X: 0, Y: 0, W: 1280, H: 800}, Children: []*Node{
			{Role: "scroll pane", States: on, Extents: &Box{X: 420, Y: 105, W: 860, H: 647}, Children: []*Node{
				{Role: "viewport", States: []string{"enabled", "sensitive", "visible"}, Extents: unplaced, Children: []*Node{
					{Role: "list box", States: on, Extents: &Box{X: 420, Y: -844, W: 846, H: 1596}, Children: []*Node{
						row("shows.txt", 600), row("scrolled-away.txt", -300),
						// A row GTK cannot place, as it says of those a list scrolled away.
						{Role: "list item", States: []string{"enabled", "visible"}, Extents: &Box{X: math.MinInt32, Y: math.MinInt32, W: 846, H: 94}, Children: []*Node{
							{Role: "label", Name: "unplaced row", States: on, Extents: &Box{X: 565, Y: 640, W: 80, H: 15}}}},
					}}}}}},
			{Role: "panel", States: []string{"enabled", "visible"}, Extents: &Box{X: 0, Y: 0, W: 10, H: 10}, Children: []*Node{
				{Role: "label", Name: "placed, not showing", States: on, Extents: &Box{X: 0, Y: 0, W: 10, H: 10}}}},
			{Role: "panel", States: []string{"enabled"}, Extents: &Box{X: math.MinInt32, Y: math.MinInt32, W: 1, H: 1}, Children: []*Node{
				{Role: "label", Name: "unplaced, not visible", States: on, Extents: &Box{X: 0, Y: 0, W: 10, H: 10}}}},
		}}}}
	ctx := context.Background()
	b, a := serveApp(t, served)
	without, err := b.Snapshot(ctx, a.Ref, Limits{ShowingOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := len((Match{Role: "label"}).Find(without)); n != 0 {
		t.Errorf("without ThroughViewports: %d labels under the viewport read; want none", n)
	}
	for _, within := range []*Box{nil, {X: 425, Y: 107, W: 520, H: 648}} {
		got, err := b.Snapshot(ctx, a.Ref, Limits{ShowingOnly: true, Within: within, ThroughViewports: true})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, n := range (Match{Role: "label", Showing: true}).Find(got) {
			names = append(names, n.Name)
			if n.Visible == nil || n.Visible.Y != 640 {
				t.Errorf("within %v: %s shows at %v; want where it is drawn, y 640", within, n.Name, n.Visible)
			}
		}
		if !slices.Equal(names, []string{"shows.txt"}) {
			t.Errorf("within %v: labels %q in the snapshot; want only the row that shows", within, names)
		}
	}
}

// serveApp serves root as this process's application on a private bus with a registry,
// and returns the bus, opened, and the application found by this process's id.
func serveApp(t *testing.T, root *Node) (*Bus, App) {
	t.Helper()
	return openApp(t, serveAt(t, root))
}

// serveAt serves root as this process's application on a private bus with a registry,
// and returns the bus's address.
func serveAt(t *testing.T, root *Node) string {
	t.Helper()
	addr := atspitest.PrivateBus(t)
	atspitest.Registry(t, addr, atspitest.App(t, addr, root, false))
	return addr
}

// openApp opens the bus at addr (closed when the test ends) and finds this process's
// application on it.
func openApp(t *testing.T, addr string) (*Bus, App) {
	t.Helper()
	b, err := Open(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	a, err := b.Application(context.Background(), uint32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	return b, a
}

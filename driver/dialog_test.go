package driver

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/vision/atspi"
)

// fixedTree is an app's tree that reads the same every time.
type fixedTree struct {
	pid  int
	root *atspi.Node
}

func (f fixedTree) Snapshot(_ context.Context, pid int, _ TreeScope) (*atspi.Node, error) {
	if pid != f.pid {
		return nil, errors.New("no such application")
	}
	return f.root, nil
}

// appTree is the app's window, and inside it (as nheko draws its popups) whatever dialogs
// are given.
func appTree(dialogs ...*atspi.Node) *atspi.Node {
	frame := &atspi.Node{Role: "frame", Name: "X", States: []string{"showing"}, Children: []*atspi.Node{
		{Role: "label", Name: "No room open", States: []string{"showing"}},
	}}
	frame.Children = append(frame.Children, dialogs...)
	return &atspi.Node{Role: "application", Name: "x", Children: []*atspi.Node{frame}}
}

// TestWaitFailureNamesTheDialog: a wait that fails while the app shows a dialog (nheko's
// "Setup Encryption", drawn inside its window: no window manager sees it, its tree
// does) says so in the delivery's stop reason; a tree with no dialog showing, or no
// tree, leaves the reason as it was. Found live: every nheko delivery stopped at "wait
// for the switcher to dim the window" with nothing said of the dialog over it.
func TestWaitFailureNamesTheDialog(t *testing.T) {
	setup := &atspi.Node{Role: "dialog", States: []string{"showing", "visible"}, Children: []*atspi.Node{
		{Role: "panel", States: []string{"showing"}, Children: []*atspi.Node{
			{Role: "label", Name: "Setup Encryption", States: []string{"showing"}},
			{Role: "label", Name: "Hello and welcome to Matrix!\nIt seems like you are new.", States: []string{"showing"}},
		}},
	}}
	for _, tc := range []struct {
		name string
		tree Tree
		want string // in the stop reason; "" for no dialog named
	}{
		{"an in-window dialog with no name", fixedTree{4242, appTree(setup)}, `the app shows dialog "Setup Encryption": a dialog it opened, if unexpected, covers what this step waits for`},
		{"a named alert", fixedTree{4242, appTree(&atspi.Node{Role: "alert", Name: "Connection lost", States: []string{"showing"}})}, `alert "Connection lost"`},
		{"a first text of several lines", fixedTree{4242, appTree(&atspi.Node{Role: "dialog", States: []string{"showing"}, Children: []*atspi.Node{
			{Role: "label", Name: "Hello and welcome to Matrix!\nIt seems like you are new.", States: []string{"showing"}}}})}, `dialog "Hello and welcome to Matrix!…"`},
		{"a dialog not showing", fixedTree{4242, appTree(&atspi.Node{Role: "dialog", Name: "Hidden", States: []string{"visible"}})}, ""},
		{"no dialog", fixedTree{4242, appTree()}, ""},
		{"another process's tree", fixedTree{1, appTree(setup)}, ""},
		{"no tree", nil, ""},
		{"a tree found by a process id any client can write", fixedTree{4242, appTree(setup)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			desk := &dimsOnShortcut{sendsOnChoose: treeDesk()} // ctrl+k opens nothing: the wait fails
			r, crossed := runnerOn(t, desk, desk.sendsOnChoose, readsBob{}, colorProfile)
			r.Tree = tc.tree
			if strings.HasPrefix(tc.name, "a tree found by") {
				desk.ws[0].PIDFrom = PIDFromProperty
			}
			_, err := r.Deliver(context.Background())
			if !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), "did not turn rgb(105,105,105)") || len(crossed()) != 0 {
				t.Fatalf("%v, crossings %v; want the wait's stop before any boundary", err, crossed())
			}
			if tc.want == "" && strings.Contains(err.Error(), "the app shows") {
				t.Errorf("%v; want no dialog named", err)
			}
			if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v; want %q in the reason", err, tc.want)
			}
		})
	}
}

package driver

import (
	"context"
	"errors"
	"fmt"
	"image"
	"os"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/vision/atspi"
)

// TestFindWindowRefusesADisputedProcess: a window of the profile's title whose process
// the X server and its _NET_WM_PID disagree on, where either is the profile's, stops
// the search before any window is chosen (even beside the real one); a disputed window
// of another title, or of other processes both, is no matter.
func TestFindWindowRefusesADisputedProcess(t *testing.T) {
	self := os.Getpid() // a process whose name ProcessName reads: the profile's here
	p := &Profile{App: "x", Process: ProcessName(self), WindowTitle: "X"}
	app := Window{ID: 1, PID: self, PIDFrom: PIDFromServer, Process: p.Process, Title: "X", Viewable: true, Bounds: image.Rect(0, 0, 800, 600)}
	for _, c := range []struct {
		name    string
		ws      []Window
		wantErr bool
	}{
		{"honest", []Window{app}, false},
		{"its own pid claimed the same", []Window{{ID: 1, PID: self, PIDFrom: PIDFromServer, Process: p.Process, Title: "X", Viewable: true}}, false},
		{"the app's window claims another process", []Window{{ID: 1, PID: self, PIDFrom: PIDFromServer, Process: p.Process, ClaimedPID: 1, Title: "X", Viewable: true}}, true},
		{"another program's window claims the app's process", []Window{app, {ID: 2, PID: 1, PIDFrom: PIDFromServer, Process: ProcessName(1), ClaimedPID: self, Title: "X", Viewable: true}}, true},
		{"a disputed window of another title", []Window{app, {ID: 2, PID: 1, PIDFrom: PIDFromServer, Process: ProcessName(1), ClaimedPID: self, Title: "Y", Viewable: true}}, false},
		{"a disputed window of other processes", []Window{app, {ID: 2, PID: 1, PIDFrom: PIDFromServer, Process: ProcessName(1), ClaimedPID: 1 << 30, Title: "X", Viewable: true}}, false},
	} {
		w, err := FindWindow(context.Background(), windowsOnly{ws: c.ws}, p)
		if !c.wantErr {
			if err != nil || w.ID != 1 {
				t.Errorf("%s: %+v, %v; want window 1", c.name, w, err)
			}
			continue
		}
		if !errors.Is(err, ErrWindow) || !errors.Is(err, ErrPIDDisagrees) || w.ID != 0 {
			t.Errorf("%s: %+v, %v; want no window, ErrWindow and ErrPIDDisagrees", c.name, w, err)
			continue
		}
		for _, want := range []string{"X server", "_NET_WM_PID", "nothing was chosen"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the error does not name %q: %v", c.name, want, err)
			}
		}
	}
}

// disputedTree answers every read with err, counting the reads.
type disputedTree struct {
	err   error
	reads int
}

func (d *disputedTree) Snapshot(context.Context, int, TreeScope) (*atspi.Node, error) {
	d.reads++
	return nil, d.err
}

// TestProbeStopsOnDisputedTreeSources: where the sources of the app's accessibility bus
// disagree, or the only one is in doubt, the delivery stops before anything is touched
// for a profile that does not require the tree too (OCR of the same display is no way
// round a program passing its tree off as the app's), naming why.
func TestProbeStopsOnDisputedTreeSources(t *testing.T) {
	for _, sentinel := range []error{atspi.ErrSourcesDisagree, atspi.ErrUntrusted} {
		desk := treeDesk()
		r, crossed := runnerOn(t, desk, desk, readsBob{}, treeProfile)
		if r.Profile.Tree == TreeRequired {
			t.Fatal("the profile requires the tree: the test is of one that does not")
		}
		r.Tree = &disputedTree{err: fmt.Errorf("%w: AT_SPI_BUS names another bus", sentinel)}
		_, err := r.Deliver(context.Background())
		if !errors.Is(err, ErrStopped) || !errors.Is(err, sentinel) || !strings.Contains(err.Error(), "AT_SPI_BUS names another bus") ||
			desk.keys != 0 || len(crossed()) != 0 {
			t.Errorf("%v: %v, %d keys, crossings %v; want a stop before anything, naming it", sentinel, err, desk.keys, crossed())
		}
	}
}

// TestProbeReadsNoTreeByAPropertyPID: where the window's process is only its
// _NET_WM_PID (the X server cannot tell), the tree is not looked up by it: no read,
// and the step that reads only the tree stops, naming why.
func TestProbeReadsNoTreeByAPropertyPID(t *testing.T) {
	desk := treeDesk()
	desk.ws[0].PIDFrom = PIDFromProperty
	r, crossed := runnerOn(t, desk, desk, readsBob{}, treeProfile)
	tree := &chooser{pid: 4242, readyAt: 1}
	r.Tree = tree
	_, err := r.Deliver(context.Background())
	if !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), "no accessibility tree") || !strings.Contains(err.Error(), "X-Resource") ||
		tree.reads != 0 || desk.keys != 0 || len(crossed()) != 0 {
		t.Errorf("%v, %d reads, %d keys, crossings %v; want no read of the tree and a stop naming X-Resource", err, tree.reads, desk.keys, crossed())
	}
}

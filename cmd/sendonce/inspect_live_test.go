//go:build cgo

package main

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/sendonce/sendonce/vision/atspi"
)

// TestLiveInspectGajim: 'sendonce inspect' finds the test bed's Gajim on its display's
// accessibility bus (its own session's, as another OS user) by profile and by process
// id, and reads its tree: the main window as the app names it, on screen where the X
// server has it, every node with an area that shows inside the screen.
func TestLiveInspectGajim(t *testing.T) {
	bed := liveTestBed(t)
	env := []string{"DISPLAY=" + bed.display(t)}
	var trees []struct {
		Bus  string      `json:"bus"`
		App  atspi.App   `json:"app"`
		Tree *atspi.Node `json:"tree"`
	}
	for _, by := range [][]string{{"--app", "gajim"}, {"--pid", bed.get(t, "GAJIM_PID")}} {
		r := runSendonce(t, 30*time.Second, env, append([]string{"inspect", "--showing", "--json"}, by...)...)
		if r.code != 0 {
			t.Fatalf("inspect %v: %v", by, r)
		}
		var res struct {
			Bus  string      `json:"bus"`
			App  atspi.App   `json:"app"`
			Tree *atspi.Node `json:"tree"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("inspect %v printed %q: %v", by, r.stdout, err)
		}
		trees = append(trees, res)
	}
	res := trees[0]
	if res.Bus != bed.get(t, "A11Y_BUS") || trees[1].App.PID != res.App.PID || fmt.Sprint(res.App.PID) != bed.get(t, "GAJIM_PID") || res.App.Toolkit != "gtk" {
		t.Fatalf("inspect found %+v on %s (by pid: %+v); want Gajim (pid %s, GTK) on the test bed's bus %s", res.App, res.Bus, trees[1].App, bed.get(t, "GAJIM_PID"), bed.get(t, "A11Y_BUS"))
	}
	main, err := (atspi.Match{Role: "frame", Name: "Gajim", Showing: true}).One(res.Tree)
	if err != nil {
		t.Fatal(err)
	}
	var w, h, x, y int
	fmt.Sscanf(bed.get(t, "GAJIM_WINDOW_GEOMETRY"), "%dx%d+%d+%d", &w, &h, &x, &y)
	e := main.Extents
	if e == nil || e.X > x || e.Y > y || e.X+e.W < x+w || e.Y+e.H < y+h {
		t.Fatalf("the main window's extents %+v do not hold the window the X server has at %dx%d+%d+%d", e, w, h, x, y)
	}
	nodes := 0
	res.Tree.Walk(func(n *atspi.Node, depth int) bool {
		nodes++
		// A node with some area that says it shows is on the screen (GTK leaves a 1-pixel
		// pane handle just off its edge showing).
		if n.Extents != nil && depth > 0 && n.Extents.W > 1 && n.Extents.H > 1 && (n.Extents.X < 0 || n.Extents.Y < 0 || n.Extents.X+n.Extents.W > 1280 || n.Extents.Y+n.Extents.H > 800) {
			t.Errorf("%s %q shows at %+v, outside the 1280x800 screen", n.Role, n.Name, *n.Extents)
		}
		return true
	})
	if nodes < 20 {
		t.Fatalf("%d nodes show in Gajim's tree; want its main window's widgets", nodes)
	}
	t.Logf("Gajim's tree on %s: %d nodes on screen", res.Bus, nodes)
}

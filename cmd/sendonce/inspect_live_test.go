//go:build cgo

package main

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/sendonce/sendonce/vision/atspi"
)

// inspected is what 'sendonce inspect --json' prints.
type inspected struct {
	Bus       string      `json:"bus"`
	App       atspi.App   `json:"app"`
	Calls     int64       `json:"calls"`
	RoundTrip string      `json:"round_trip"`
	Tree      *atspi.Node `json:"tree"`
}

// TestLiveInspect: 'sendonce inspect' finds each of the test bed's apps on its display's
// accessibility bus (its own session's, as another OS user) by profile and by process
// id, and reads its tree: the main window as the app names it, on screen where the X
// server has it (Gajim), every node with an area inside the screen.
func TestLiveInspect(t *testing.T) {
	bed := liveTestBed(t)
	for _, app := range []struct {
		profile, prefix, pidKey, toolkit, frame, geometry string
	}{
		{"gajim", "", "GAJIM_PID", "gtk", "Gajim", "GAJIM_WINDOW_GEOMETRY"},
		{"psi-plus", "PSI_", "PSI_PID", "Qt", "Psi+", ""},
	} {
		t.Run(app.profile, func(t *testing.T) {
			env := []string{"DISPLAY=" + bed.get(t, app.prefix+"DISPLAY")}
			var seen []inspected
			for _, by := range [][]string{{"--app", app.profile}, {"--pid", bed.get(t, app.pidKey)}} {
				r := runSendonce(t, 30*time.Second, env, append([]string{"inspect", "--showing", "--json"}, by...)...)
				if r.code != 0 {
					t.Fatalf("inspect %v: %v", by, r)
				}
				var res inspected
				if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
					t.Fatalf("inspect %v printed %q: %v", by, r.stdout, err)
				}
				seen = append(seen, res)
			}
			res := seen[0]
			if res.Bus != bed.get(t, app.prefix+"A11Y_BUS") || seen[1].App.PID != res.App.PID || fmt.Sprint(res.App.PID) != bed.get(t, app.pidKey) || res.App.Toolkit != app.toolkit {
				t.Fatalf("inspect found %+v on %s (by pid: %+v); want %s (pid %s, %s) on the test bed's bus %s", res.App, res.Bus, seen[1].App, app.profile, bed.get(t, app.pidKey), app.toolkit, bed.get(t, app.prefix+"A11Y_BUS"))
			}
			main, err := (atspi.Match{Role: "frame", Name: app.frame, Showing: true}).One(res.Tree)
			if err != nil {
				t.Fatal(err)
			}
			if app.geometry != "" {
				var w, h, x, y int
				fmt.Sscanf(bed.get(t, app.geometry), "%dx%d+%d+%d", &w, &h, &x, &y)
				e := main.Extents
				if e == nil || e.X > x || e.Y > y || e.X+e.W < x+w || e.Y+e.H < y+h {
					t.Fatalf("the main window's extents %+v do not hold the window the X server has at %dx%d+%d+%d", e, w, h, x, y)
				}
			}
			nodes := 0
			res.Tree.Walk(func(n *atspi.Node, depth int) bool {
				nodes++
				// A node with some area that says it shows is on the screen where its
				// views let it show (GTK leaves a 1-pixel pane handle just off its edge
				// showing; a scrolled list reaches past its view).
				e := n.Visible
				if e == nil {
					e = n.Extents
				}
				if e != nil && n.Has("showing") && depth > 0 && e.W > 1 && e.H > 1 && (e.X < 0 || e.Y < 0 || e.X+e.W > 1280 || e.Y+e.H > 800) {
					t.Errorf("%s %q shows at %+v, outside the 1280x800 screen", n.Role, n.Name, *e)
				}
				return true
			})
			if nodes < 10 {
				t.Fatalf("%d nodes show in %s's tree; want its main window's widgets", nodes, app.profile)
			}
			// What the read cost the app: at least a role and a name of each node kept.
			if rt, err := time.ParseDuration(res.RoundTrip); res.Calls < int64(2*nodes) || err != nil || rt <= 0 {
				t.Fatalf("inspect says its read of %d nodes made %d calls and the app answers one in %q; want at least %d calls and a positive time", nodes, res.Calls, res.RoundTrip, 2*nodes)
			}
			t.Logf("%s's tree on %s: %d nodes on screen", app.profile, res.Bus, nodes)
		})
	}
}

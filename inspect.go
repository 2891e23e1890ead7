package sendonce

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/internal/clock"
	"github.com/sendonce/sendonce/vision/atspi"
)

// InspectRequest names an app whose accessibility tree to read: by profile (its
// process), by process name or by process id, on the accessibility bus of an X display's
// session (or one given by address).
type InspectRequest struct {
	Display string // the X display whose app's accessibility bus to read (atspi.Locate)
	Bus     string // the accessibility bus's address, instead of the display's
	App     string // a profile's name (Options.ProfileDirs, then built in): the app is its process
	Process string // the app's process name, as profiles name it ("gajim")
	PID     uint32 // the app's process id
	Window  string // only the top-level window of this exact name (after NFC)
	// ShowingOnly leaves out what is not on screen.
	ShowingOnly bool
	Limits      atspi.Limits
}

// InspectResult is an app's accessibility tree: what a profile can address by role and
// name, as the app itself publishes it.
type InspectResult struct {
	Bus      string      `json:"bus"`
	App      atspi.App   `json:"app"`
	Nodes    int         `json:"nodes"`
	Duration Duration    `json:"read_in"`
	Tree     *atspi.Node `json:"tree"`
}

// Duration is a time span in the JSON contract: Go's own spelling ("1.5s").
type Duration time.Duration

func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// Inspect reads an app's accessibility tree, as a person would with Accerciser: to find
// the role and name a profile's step can address. A display, bus or app that cannot be
// reached is ErrDesktopUnavailable.
func Inspect(ctx context.Context, req InspectRequest, opt Options) (InspectResult, error) {
	res, err := inspect(ctx, req, opt)
	return res, desktopUnavailable(err)
}

// inspectAskTime bounds how long inspect waits for an app asked for its tree to show a
// page (atspi.AskForTree).
const inspectAskTime = 5 * time.Second

func inspect(ctx context.Context, req InspectRequest, opt Options) (InspectResult, error) {
	match, err := req.process(opt)
	if err != nil {
		return InspectResult{}, err
	}
	// The bus: the one given; else the app's (atspi.Locate) when its process id is
	// given; else the one the display's root window names, to find the app on, and then
	// the app's own, which must be the same.
	addr, check := req.Bus, false
	switch {
	case addr != "":
	case req.Display == "":
		return InspectResult{}, FieldErrorf("display", "is required to find the accessibility bus (or give its address)")
	case req.PID != 0:
		loc, err := atspi.Locate(ctx, req.Display, int(req.PID))
		if err != nil {
			return InspectResult{}, err
		}
		addr = loc.Address
	default:
		if addr, err = atspi.AddressOnDisplay(req.Display); err != nil {
			return InspectResult{}, err
		}
		check = true
	}
	bus, err := atspi.Open(ctx, addr)
	if err != nil {
		return InspectResult{}, err
	}
	defer bus.Close()
	apps, err := bus.Applications(ctx)
	if err != nil {
		return InspectResult{}, err
	}
	var app *atspi.App
	var seen []string
	for i, a := range apps {
		if match(a) {
			if app != nil {
				return InspectResult{}, FieldErrorf("process", "two applications match (pids %d and %d): give --pid", app.PID, a.PID)
			}
			app = &apps[i]
		}
		seen = append(seen, fmt.Sprintf("%s (%s, pid %d)", a.Name, driver.ProcessName(int(a.PID)), a.PID))
	}
	if app == nil {
		why := "a GTK 3 app needs Debian's libatk-adaptor and no NO_AT_BRIDGE=1, a Qt app QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1"
		if req.PID != 0 && atspi.IsChromium("/proc", int(req.PID)) {
			why = "a Chromium-built app: " + atspi.ChromiumFix
		}
		return InspectResult{}, fmt.Errorf("%w: no such application on the accessibility bus %s; registered: %s (%s)",
			atspi.ErrUnavailable, addr, strings.Join(seen, ", "), why)
	}
	if check {
		loc, err := atspi.Locate(ctx, req.Display, int(app.PID))
		if err != nil {
			return InspectResult{}, err
		}
		if loc.Address != addr {
			return InspectResult{}, fmt.Errorf("%w: %s (pid %d) is on the accessibility bus %s, which the root window of display %s names, but its own is %s (%s): another program on the display may have rewritten AT_SPI_BUS; nothing was read (give --pid, or --bus)",
				atspi.ErrSourcesDisagree, app.Name, app.PID, addr, req.Display, loc.Address, loc.From)
		}
	}
	if err := bus.AskForTree(ctx, *app, inspectAskTime); err != nil {
		return InspectResult{}, err
	}
	now := clock.Or(opt.Clock)
	start := now()
	// A person looks for what shows, the conversation's rows included.
	limits := atspi.Limits{Nodes: req.Limits.Nodes, Depth: req.Limits.Depth, Time: req.Limits.Time, ShowingOnly: req.ShowingOnly, ThroughViewports: true}
	if req.Window != "" {
		limits.Windows = &atspi.Match{Name: req.Window} // the other windows are not read
	}
	tree, err := bus.Snapshot(ctx, app.Ref, limits)
	if err != nil {
		return InspectResult{}, err
	}
	if req.Window != "" && len(tree.Children) == 0 {
		return InspectResult{}, FieldErrorf("window", "%s has no top-level window named %q", app.Name, req.Window)
	}
	res := InspectResult{Bus: addr, App: *app, Duration: Duration(now().Sub(start)), Tree: tree}
	tree.Walk(func(*atspi.Node, int) bool { res.Nodes++; return true })
	return res, nil
}

// process is how the request names its app, as a test on a registered application.
func (req InspectRequest) process(opt Options) (func(atspi.App) bool, error) {
	named := 0
	for _, v := range []bool{req.App != "", req.Process != "", req.PID != 0} {
		if v {
			named++
		}
	}
	if named != 1 {
		return nil, gate.Invalidf("inspect: name the app one way: --app NAME (a profile), --process NAME or --pid PID")
	}
	switch {
	case req.PID != 0:
		return func(a atspi.App) bool { return a.PID == req.PID }, nil
	case req.Process != "":
		return func(a atspi.App) bool { return driver.ProcessName(int(a.PID)) == req.Process }, nil
	}
	p, err := driver.Profiles{Dirs: opt.ProfileDirs}.Load(req.App)
	if err != nil {
		return nil, fieldError("app", err)
	}
	return func(a atspi.App) bool { return p.MatchesProcess(driver.ProcessName(int(a.PID))) }, nil
}

// WriteText writes the tree for a person: a node a line, indented, with its role, name,
// text, states and extents.
func (r InspectResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%s (pid %d, %s) on %s: %d nodes, read in %v\n", r.App.Name, r.App.PID, r.App.Toolkit, r.Bus, r.Nodes, time.Duration(r.Duration).Round(time.Millisecond))
	r.Tree.Walk(func(n *atspi.Node, depth int) bool {
		line := strings.Repeat("  ", depth) + n.String()
		if e := n.Extents; e != nil {
			line += fmt.Sprintf(" @%d,%d %dx%d", e.X, e.Y, e.W, e.H)
		}
		fmt.Fprintln(w, line)
		return true
	})
}

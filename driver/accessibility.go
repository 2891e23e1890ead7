package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sendonce/sendonce/vision/atspi"
)

// OpenAccessibility is the accessibility tree of the apps on an X display, for the
// steps of a profile that read it (Deliverer.OpenTree): each app's bus found at its
// first read by atspi.Locate (the app's session bus, weighed against the bus the
// display's root window names: sources that disagree stop the read), connected then,
// and closed by the returned func; each app is asked for its tree at its first read
// (atspi.AskForTree: a Chromium-built app shows its pages only when asked). A display
// without one costs nothing until a step reads it, which then stops, naming what to
// install or set.
func OpenAccessibility(_ context.Context, display string) (Tree, func()) {
	t := &accessibility{display: display, located: map[int]string{}, buses: map[string]*atspi.Bus{}, apps: map[int]atspi.App{}}
	return t, t.close
}

type accessibility struct {
	display string
	mu      sync.Mutex
	located map[int]string        // each process's accessibility bus's address, by process id
	buses   map[string]*atspi.Bus // by address
	apps    map[int]atspi.App     // by process id, each asked for its tree (AskForTree) once found
}

// snapshotTime bounds one read of an app's tree when the read's scope does not (a
// step's wait gives its reads longer).
const snapshotTime = 5 * time.Second

// askTime bounds how long an app asked for its tree (a Chromium-built one: its pages'
// trees come only when asked) may take to show a page, within the read's own bound.
const askTime = 5 * time.Second

// snapshotLimits are the bounds of one read of an app's tree in scope.
func snapshotLimits(scope TreeScope) atspi.Limits {
	l := atspi.Limits{ShowingOnly: true, Time: snapshotTime, Windows: scope.Windows, Within: scope.Within, ThroughViewports: scope.ThroughViewports}
	if scope.Time > 0 {
		l.Time = scope.Time
	}
	return l
}

func (t *accessibility) Snapshot(ctx context.Context, pid int, scope TreeScope) (*atspi.Node, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	bus, err := t.bus(ctx, pid)
	if err != nil {
		return nil, err
	}
	app, ok := t.apps[pid]
	if !ok {
		if app, err = bus.Application(ctx, uint32(pid)); err != nil {
			return nil, err
		}
		if err := bus.AskForTree(ctx, app, askTime); err != nil {
			return nil, err
		}
		t.apps[pid] = app
	}
	l := snapshotLimits(scope)
	l.StablePaths = atspi.StablePaths(app.Toolkit)
	n, err := bus.Snapshot(ctx, app.Ref, l)
	if err != nil {
		return nil, fmt.Errorf("reading %s's accessibility tree: %w", app.Name, err)
	}
	return n, nil
}

// bus is the accessibility bus of process pid, located at its first read.
func (t *accessibility) bus(ctx context.Context, pid int) (*atspi.Bus, error) {
	addr, ok := t.located[pid]
	if !ok {
		loc, err := atspi.Locate(ctx, t.display, pid)
		if err != nil && errors.Is(err, atspi.ErrUnavailable) && atspi.IsChromium("/proc", pid) {
			return nil, fmt.Errorf("%w; the app is Chromium-built: %s", err, atspi.ChromiumFix)
		}
		if err != nil {
			return nil, err
		}
		addr = loc.Address
		t.located[pid] = addr
	}
	if b := t.buses[addr]; b != nil {
		return b, nil
	}
	b, err := atspi.Open(ctx, addr)
	if err != nil {
		return nil, err
	}
	t.buses[addr] = b
	return b, nil
}

func (t *accessibility) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range t.buses {
		b.Close()
	}
}

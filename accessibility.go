package sendonce

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/vision/atspi"
)

// OpenAccessibility is the accessibility tree of the apps on an X display, for the
// steps of a profile that read it (Deliverer.OpenTree): the bus the display's root
// window names, connected at the first read, and closed by the returned func. A display
// without one costs nothing until a step reads it, which then stops, naming what to
// install or set.
func OpenAccessibility(_ context.Context, display string) (driver.Tree, func()) {
	t := &accessibility{display: display, apps: map[int]atspi.App{}}
	return t, t.close
}

type accessibility struct {
	display string
	mu      sync.Mutex
	bus     *atspi.Bus
	apps    map[int]atspi.App // by process id
}

// snapshotTime bounds one read of an app's tree when the read's scope does not (a
// step's wait gives its reads longer).
const snapshotTime = 5 * time.Second

// snapshotLimits are the bounds of one read of an app's tree in scope.
func snapshotLimits(scope driver.TreeScope) atspi.Limits {
	l := atspi.Limits{ShowingOnly: true, Time: snapshotTime, Windows: scope.Windows, Within: scope.Within, ThroughViewports: scope.ThroughViewports}
	if scope.Time > 0 {
		l.Time = scope.Time
	}
	return l
}

func (t *accessibility) Snapshot(ctx context.Context, pid int, scope driver.TreeScope) (*atspi.Node, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bus == nil {
		addr, err := atspi.AddressOnDisplay(t.display)
		if err != nil {
			return nil, err
		}
		if t.bus, err = atspi.Open(ctx, addr); err != nil {
			return nil, err
		}
	}
	app, ok := t.apps[pid]
	if !ok {
		var err error
		if app, err = t.bus.Application(ctx, uint32(pid)); err != nil {
			return nil, err
		}
		t.apps[pid] = app
	}
	n, err := t.bus.Snapshot(ctx, app.Ref, snapshotLimits(scope))
	if err != nil {
		return nil, fmt.Errorf("reading %s's accessibility tree: %w", app.Name, err)
	}
	return n, nil
}

func (t *accessibility) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bus != nil {
		t.bus.Close()
	}
}

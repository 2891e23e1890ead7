// Package atspi reads what a desktop app publishes about its own widgets on the AT-SPI
// accessibility bus: each node's role, exact name and text, states and screen extents.
// GTK (with Debian's libatk-adaptor), Qt (QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1) and
// Chromium-based apps publish such a tree; it is the app's own words, where OCR of its
// pixels is a guess.
//
// It speaks D-Bus (github.com/godbus/dbus/v5), with no C and no Python. Every call takes
// a context and a bound of its own, so an app that stops answering costs a timeout,
// never a hang.
package atspi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/sendonce/sendonce/internal/clock"
)

// The AT-SPI D-Bus names this package uses (at-spi2-core's xml/ interfaces).
const (
	IfaceAccessible  = "org.a11y.atspi.Accessible"
	IfaceComponent   = "org.a11y.atspi.Component"
	IfaceText        = "org.a11y.atspi.Text"
	IfaceApplication = "org.a11y.atspi.Application"
	RegistryName     = "org.a11y.atspi.Registry"
	RootPath         = "/org/a11y/atspi/accessible/root" // an app's root, and the registry's
	nullPath         = "/org/a11y/atspi/null"
	coordsScreen     = 0 // ATSPI_COORD_TYPE_SCREEN
)

// ErrUnavailable: no accessibility bus, or the app publishes no tree on it. What to
// install or set is in the error's text.
var ErrUnavailable = errors.New("accessibility tree unavailable")

// Ref names one accessible object: the bus name of the app that serves it, and its path.
type Ref struct {
	Bus  string `json:"bus"`
	Path string `json:"path"`
}

func (r Ref) null() bool { return r.Path == "" || r.Path == nullPath }

// Box is a node's extents in screen pixels.
type Box struct {
	X int `json:"x"`
	Y int `json:"y"`
	W int `json:"w"`
	H int `json:"h"`
}

// Node is one accessible object as a snapshot read it.
type Node struct {
	Ref     Ref      `json:"-"`
	Role    string   `json:"role"`
	Name    string   `json:"name,omitempty"`
	Text    string   `json:"text,omitempty"` // the Text interface's content, where it has one
	States  []string `json:"states,omitempty"`
	Extents *Box     `json:"extents,omitempty"`
	// Visible is the part of Extents inside every ancestor's (a snapshot's reckoning of
	// what a scrolled view does not clip away); nil where the node has no extents.
	Visible  *Box    `json:"visible,omitempty"`
	Children []*Node `json:"children,omitempty"`
}

// Has says whether the node is in state s ("showing", "sensitive", "focused", ...).
func (n *Node) Has(s string) bool {
	for _, st := range n.States {
		if st == s {
			return true
		}
	}
	return false
}

// String is the node as a person reads it: its role, its name quoted, its text where it
// differs from the name, and its states in brackets.
func (n *Node) String() string {
	s := n.Role
	if n.Name != "" {
		s += fmt.Sprintf(" %q", n.Name)
	}
	if n.Text != "" && n.Text != n.Name {
		s += fmt.Sprintf(" text=%q", n.Text)
	}
	if len(n.States) > 0 {
		s += " [" + strings.Join(n.States, " ") + "]"
	}
	return s
}

// Walk calls fn for n and every node below it, depth first, with each node's depth.
func (n *Node) Walk(fn func(node *Node, depth int) bool) { n.walk(fn, 0) }

func (n *Node) walk(fn func(*Node, int) bool, depth int) bool {
	if !fn(n, depth) {
		return false
	}
	for _, c := range n.Children {
		if !c.walk(fn, depth+1) {
			return false
		}
	}
	return true
}

// App is an application registered on the accessibility bus.
type App struct {
	Ref     Ref    `json:"-"`
	Name    string `json:"name"`
	PID     uint32 `json:"pid"`
	Toolkit string `json:"toolkit,omitempty"`
}

// Bus is a connection to one accessibility bus.
type Bus struct {
	conn *dbus.Conn
	// CallTimeout bounds each D-Bus call (default 2 s), within the caller's ctx.
	CallTimeout time.Duration
	calls       atomic.Int64

	// kinds holds, for reads with Limits.StablePaths, what each object read in full said
	// of its kind: its role and its interfaces, which an object keeps for its life. A Bus
	// lives for one delivery, whose reads then ask each object only what changes: its
	// name, states, children, extents and text. What an app answers each call costs it a
	// turn of its main loop, and that turn grows with the app's state (Gajim's: 0.18 ->
	// 0.49 ms over 30 deliveries), so two calls in seven saved is that much less of the
	// app's time.
	mu    sync.Mutex
	kinds map[Ref]kind
}

// StablePaths says whether a toolkit's object paths name one object for the bus
// connection's life, so that what a path said of its kind holds for the next read
// (Limits.StablePaths): at-spi2-atk, which GTK 3 and Chromium publish through, numbers
// its objects with a counter that only goes up. Qt gives a destroyed object's id, and
// so its path, to the next object made; an unknown toolkit may too.
func StablePaths(toolkit string) bool {
	switch strings.ToLower(toolkit) {
	case "gtk", "gail", "chromium":
		return true
	}
	return false
}

// kind is what an object keeps for its life: its role and interfaces.
type kind struct {
	role   string
	ifaces []string
}

// maxKinds bounds what a Bus remembers of objects' kinds (a read holds at most
// Limits.Nodes).
const maxKinds = 20000

func (b *Bus) kindOf(r Ref) (kind, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k, ok := b.kinds[r]
	return k, ok
}

func (b *Bus) remember(r Ref, k kind) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kinds == nil {
		b.kinds = map[Ref]kind{}
	}
	if len(b.kinds) < maxKinds {
		b.kinds[r] = k
	}
}

// Calls is how many D-Bus calls the connection has made to apps (not to the bus
// itself): what reads cost the apps, which answer them one after the other.
func (b *Bus) Calls() int64 { return b.calls.Load() }

// AddressOf asks a session bus for the address of its accessibility bus
// (org.a11y.Bus.GetAddress), starting the bus launcher if the session activates it.
func AddressOf(ctx context.Context, sessionAddress string) (string, error) {
	conn, err := dial(ctx, sessionAddress)
	if err != nil {
		return "", fmt.Errorf("%w: the session bus %s: %v", ErrUnavailable, sessionAddress, err)
	}
	defer conn.Close()
	var addr string
	err = conn.Object("org.a11y.Bus", "/org/a11y/bus").CallWithContext(ctx, "org.a11y.Bus.GetAddress", 0).Store(&addr)
	if err != nil {
		return "", fmt.Errorf("%w: asking the session bus for its accessibility bus (is at-spi2-core installed?): %v", ErrUnavailable, err)
	}
	return addr, nil
}

// Open connects to the accessibility bus at address.
func Open(ctx context.Context, address string) (*Bus, error) {
	conn, err := dial(ctx, address)
	if err != nil {
		return nil, fmt.Errorf("%w: the accessibility bus %s: %v", ErrUnavailable, address, err)
	}
	return &Bus{conn: conn}, nil
}

// dial connects to the bus at address. ctx bounds the connecting only: the connection
// lives until Close (godbus closes a connection whose own context ends, so it is given
// none that does), and a bus that does not answer the handshake is left behind.
func dial(ctx context.Context, address string) (*dbus.Conn, error) {
	type dialed struct {
		conn *dbus.Conn
		err  error
	}
	done := make(chan dialed, 1)
	go func() {
		conn, err := dbus.Dial(address, dbus.WithContext(context.WithoutCancel(ctx)))
		if err == nil {
			if err = conn.Auth(nil); err == nil {
				err = conn.Hello()
			}
			if err != nil {
				conn.Close()
				conn = nil
			}
		}
		done <- dialed{conn, err}
	}()
	select {
	case d := <-done:
		return d.conn, d.err
	case <-ctx.Done():
		go func() {
			if d := <-done; d.conn != nil {
				d.conn.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// Close closes the connection.
func (b *Bus) Close() error { return b.conn.Close() }

func (b *Bus) call(ctx context.Context, r Ref, method string, args ...any) *dbus.Call {
	timeout := b.CallTimeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	b.calls.Add(1)
	return b.conn.Object(r.Bus, dbus.ObjectPath(r.Path)).CallWithContext(ctx, method, 0, args...)
}

func (b *Bus) property(ctx context.Context, r Ref, iface, name string, v any) error {
	var variant dbus.Variant
	if err := b.call(ctx, r, "org.freedesktop.DBus.Properties.Get", iface, name).Store(&variant); err != nil {
		return err
	}
	return variant.Store(v)
}

// RoundTrip is the mean time the app takes to answer a message that asks nothing
// (org.freedesktop.DBus.Peer.Ping, n times in a row): what each call of a read costs
// before any work, the app's own. An app answers one message per turn of its main loop,
// so a busy or burdened loop shows here.
func (b *Bus) RoundTrip(ctx context.Context, app App, n int) (time.Duration, error) {
	start := clock.System()
	for range n {
		if err := b.call(ctx, app.Ref, "org.freedesktop.DBus.Peer.Ping").Err; err != nil {
			return 0, fmt.Errorf("pinging %s: %w", app.Name, err)
		}
	}
	return clock.System().Sub(start) / time.Duration(max(n, 1)), nil
}

// Applications lists the applications registered on the bus.
func (b *Bus) Applications(ctx context.Context) ([]App, error) {
	kids, err := b.children(ctx, Ref{Bus: RegistryName, Path: RootPath})
	if err != nil {
		return nil, fmt.Errorf("%w: listing the registry's applications: %v", ErrUnavailable, err)
	}
	var apps []App
	for _, k := range kids {
		a := App{Ref: k}
		b.property(ctx, k, IfaceAccessible, "Name", &a.Name)
		b.property(ctx, k, IfaceApplication, "ToolkitName", &a.Toolkit)
		b.conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.GetConnectionUnixProcessID", 0, k.Bus).Store(&a.PID)
		apps = append(apps, a)
	}
	return apps, nil
}

// Application is the application whose process id is pid.
func (b *Bus) Application(ctx context.Context, pid uint32) (App, error) {
	apps, err := b.Applications(ctx)
	if err != nil {
		return App{}, err
	}
	var seen []string
	for _, a := range apps {
		if a.PID == pid {
			return a, nil
		}
		seen = append(seen, fmt.Sprintf("%s (pid %d)", a.Name, a.PID))
	}
	if len(seen) == 0 {
		seen = append(seen, "none")
	}
	why := WhyAbsent("/proc", int(pid))
	if why == "" {
		why = "a GTK 3 app needs Debian's libatk-adaptor and no NO_AT_BRIDGE=1, a Qt app QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1"
	}
	return App{}, fmt.Errorf("%w: process %d publishes no accessibility tree on this bus (registered: %s): %s",
		ErrUnavailable, pid, strings.Join(seen, ", "), why)
}

func (b *Bus) children(ctx context.Context, r Ref) ([]Ref, error) {
	var kids []struct {
		Bus  string
		Path dbus.ObjectPath
	}
	if err := b.call(ctx, r, IfaceAccessible+".GetChildren").Store(&kids); err != nil {
		return nil, err
	}
	out := make([]Ref, 0, len(kids))
	for _, k := range kids {
		if ref := (Ref{Bus: k.Bus, Path: string(k.Path)}); !ref.null() {
			out = append(out, ref)
		}
	}
	return out, nil
}

// Limits bound a snapshot.
type Limits struct {
	Nodes int           // at most this many nodes (default 2000)
	Depth int           // at most this deep below the root (default 40)
	Time  time.Duration // at most this long (default 3 s)
	// ShowingOnly leaves out what is not on screen (and what lies below it).
	ShowingOnly bool
	// Windows, when set, keeps only the root's children (an app's top-level windows)
	// that match it, and what lies below them: a read of one dialog skips the others.
	Windows *Match
	// ThroughViewports, with ShowingOnly, reads on below a viewport that says it does
	// not show because GTK cannot place it (readThrough).
	ThroughViewports bool
	// Within, when set, leaves out what lies outside it on screen: a node whose extents
	// do not meet it, and what lies below that node (a read of a window's header skips
	// its conversation).
	Within *Box
	// StablePaths: the app's object paths are never given to another object (see
	// StablePaths), so each object's role and interfaces are asked once per Bus.
	StablePaths bool
}

func (l Limits) orDefaults() Limits {
	if l.Nodes <= 0 {
		l.Nodes = 2000
	}
	if l.Depth <= 0 {
		l.Depth = 40
	}
	if l.Time <= 0 {
		l.Time = 3 * time.Second
	}
	return l
}

// ErrTooBig: the subtree is larger than the snapshot's limits allow.
var ErrTooBig = errors.New("accessibility subtree over the snapshot's limits")

// Snapshot reads the subtree under root, within limits: a tree that does not fit is an
// error, never a silently cut one.
func (b *Bus) Snapshot(ctx context.Context, root Ref, limits Limits) (*Node, error) {
	l := limits.orDefaults()
	ctx, cancel := context.WithTimeoutCause(ctx, l.Time, errSlowApp)
	defer cancel()
	// The reads go out side by side (snapshotCalls nodes at a time, each node's calls at
	// once): the app answers them one after the other, without a round trip between.
	var count atomic.Int64
	slots := make(chan struct{}, snapshotCalls)
	var read func(r Ref, depth int, clip *Box, inPage bool) (*Node, error)
	read = func(r Ref, depth int, clip *Box, inPage bool) (*Node, error) {
		if count.Add(1) > int64(l.Nodes) {
			return nil, fmt.Errorf("%w: more than %d nodes", ErrTooBig, l.Nodes)
		}
		slots <- struct{}{}
		var within *Box // what the node must meet to be read further
		if l.ShowingOnly && depth > 1 {
			within = clip
		}
		n, kids, err := b.node(ctx, r, l.ShowingOnly && depth > 0, l.ThroughViewports, l.StablePaths, within)
		<-slots
		if err != nil {
			return nil, err
		}
		if e := n.Extents; e != nil && depth > 0 && !(l.ThroughViewports && e.unplaced()) {
			v := *e
			if clip != nil {
				v = v.intersect(*clip)
			}
			n.Visible = &v
			// Inside a web page, an element's box clips nothing: HTML lets content
			// overflow its box (a menu drawn below its 24-pixel button, a page held by
			// a box of height 0), and the browser says itself, by the showing state,
			// what a scrolled view hides. The page's own box (the document) clips.
			if !inPage {
				clip = &v
			}
		}
		if isDocument(n.Role) {
			inPage = true
		}
		if l.ShowingOnly && depth > 0 && !n.Has("showing") && !(l.ThroughViewports && n.readThrough()) || depth == 1 && l.Windows != nil && !l.Windows.self(n) ||
			depth > 1 && l.ShowingOnly && n.Visible != nil && n.Visible.empty() && !n.Extents.empty() ||
			depth > 1 && l.Within != nil && n.Visible != nil && !n.Extents.empty() && !n.Visible.meets(*l.Within) {
			return nil, nil
		}
		if len(kids) > 0 && depth+1 > l.Depth {
			return nil, fmt.Errorf("%w: deeper than %d", ErrTooBig, l.Depth)
		}
		children := make([]*Node, len(kids))
		reads := make([]func() error, len(kids))
		for i, k := range kids {
			reads[i] = func() (err error) {
				children[i], err = read(k, depth+1, clip, inPage)
				return err
			}
		}
		if err := together(reads...); err != nil {
			return nil, err
		}
		for _, c := range children {
			if c != nil {
				n.Children = append(n.Children, c)
			}
		}
		return n, nil
	}
	n, err := read(root, 0, nil, false)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("reading the accessibility tree: the app did not answer within %v: %w", l.Time, context.Cause(ctx))
	}
	return n, err
}

// isDocument says whether a role is a web page's: Chromium's and Firefox's
// "document web", and AT-SPI's other document roles.
func isDocument(role string) bool {
	switch strings.ToLower(role) {
	case "document web", "document frame", "document text":
		return true
	}
	return false
}

// unplaced: GTK 3 gives G_MININT as the position of a widget it cannot place on screen.
func (b Box) unplaced() bool { return b.X == math.MinInt32 && b.Y == math.MinInt32 }

// readThrough says whether a snapshot of what shows reads on below a node that says it
// does not show: a visible viewport that GTK 3 cannot place. Gajim's conversation view
// reports that of its viewport once the conversation was shown again, while every
// message row under it shows, placed where it is drawn. Its children say what shows;
// its bogus extents clip nothing. Only a viewport: the rows a list scrolled away say
// the same of themselves, and what lies below them does not show.
func (n *Node) readThrough() bool {
	return n.Role == "viewport" && !n.Has("showing") && n.Has("visible") && n.Extents != nil && n.Extents.unplaced()
}

// intersect is the part of b inside o (empty: no width or height).
func (b Box) intersect(o Box) Box {
	x0, y0 := max(b.X, o.X), max(b.Y, o.Y)
	x1, y1 := min(b.X+b.W, o.X+o.W), min(b.Y+b.H, o.Y+o.H)
	return Box{X: x0, Y: y0, W: max(x1-x0, 0), H: max(y1-y0, 0)}
}

func (b Box) empty() bool { return b.W <= 0 || b.H <= 0 }

// meets says whether two boxes share a pixel.
func (b Box) meets(o Box) bool {
	return b.X < o.X+o.W && o.X < b.X+b.W && b.Y < o.Y+o.H && o.Y < b.Y+b.H
}

// errSlowApp is a snapshot's cause when its time ran out.
var errSlowApp = fmt.Errorf("%w", context.DeadlineExceeded)

// snapshotCalls is how many nodes a snapshot reads at once.
const snapshotCalls = 16

// node reads one object: role, name, states, children, and where it has them, extents
// and text; the calls go out together. With showingOnly, the states and the extents
// come first, and an object that is not showing, or lies wholly outside within (a row
// its scrolled view hides), is read no further: its States and Extents say why.
func (b *Bus) node(ctx context.Context, r Ref, showingOnly, throughViewports, stablePaths bool, within *Box) (*Node, []Ref, error) {
	n := &Node{Ref: r}
	var bits []uint32
	stateCall := func() error {
		if err := b.call(ctx, r, IfaceAccessible+".GetState").Store(&bits); err != nil {
			return fmt.Errorf("the states of %s: %w", r.Path, err)
		}
		return nil
	}
	if showingOnly {
		var box struct{ X, Y, W, H int32 }
		boxErr := errors.New("not read")
		if err := together(stateCall, func() error {
			// An object without the Component interface answers with an error: it has
			// no extents. The call's own end (a timeout) is an error all the same.
			if boxErr = b.call(ctx, r, IfaceComponent+".GetExtents", uint32(coordsScreen)).Store(&box); boxErr != nil && ctx.Err() != nil {
				return fmt.Errorf("the extents of %s: %w", r.Path, boxErr)
			}
			return nil
		}); err != nil {
			return nil, nil, err
		}
		if boxErr == nil {
			n.Extents = &Box{X: int(box.X), Y: int(box.Y), W: int(box.W), H: int(box.H)}
		}
		n.States = stateNames(bits)
		if throughViewports && !n.Has("showing") && n.Has("visible") && n.Extents != nil && n.Extents.unplaced() {
			// Perhaps a viewport GTK cannot place: its role says (readThrough).
			if k, ok := b.kindOf(r); ok && stablePaths {
				n.Role = k.role
			} else if err := b.call(ctx, r, IfaceAccessible+".GetRoleName").Store(&n.Role); err != nil && ctx.Err() != nil {
				return nil, nil, fmt.Errorf("the role of %s: %w", r.Path, err)
			}
		}
		if !n.Has("showing") && !(throughViewports && n.readThrough()) || within != nil && n.Extents != nil && !n.Extents.empty() && !(throughViewports && n.Extents.unplaced()) && n.Extents.intersect(*within).empty() {
			return n, nil, nil
		}
		stateCall = func() error { return nil }
	}
	var ifaces []string
	var kids []Ref
	roleCall := func() error {
		if err := b.call(ctx, r, IfaceAccessible+".GetRoleName").Store(&n.Role); err != nil {
			return fmt.Errorf("the role of %s: %w", r.Path, err)
		}
		return nil
	}
	ifacesCall := func() error {
		if err := b.call(ctx, r, IfaceAccessible+".GetInterfaces").Store(&ifaces); err != nil {
			return fmt.Errorf("the interfaces of %s: %w", r.Path, err)
		}
		return nil
	}
	known, isKnown := b.kindOf(r)
	isKnown = isKnown && stablePaths
	if isKnown {
		n.Role, ifaces = known.role, known.ifaces
		roleCall, ifacesCall = func() error { return nil }, func() error { return nil }
	} else if n.Role != "" {
		roleCall = func() error { return nil } // read above (a viewport GTK cannot place)
	}
	err := together(
		roleCall,
		func() error {
			if err := b.property(ctx, r, IfaceAccessible, "Name", &n.Name); err != nil {
				return fmt.Errorf("the name of %s: %w", r.Path, err)
			}
			return nil
		},
		stateCall,
		ifacesCall,
		func() (err error) {
			if kids, err = b.children(ctx, r); err != nil {
				return fmt.Errorf("the children of %s: %w", r.Path, err)
			}
			return nil
		},
	)
	if err != nil {
		return nil, nil, err
	}
	if !isKnown && stablePaths {
		b.remember(r, kind{role: n.Role, ifaces: ifaces})
	}
	n.States = stateNames(bits)
	var more []func() error
	for _, i := range ifaces {
		switch i {
		case IfaceComponent:
			if n.Extents != nil {
				continue // read with the states
			}
			more = append(more, func() error {
				var box struct{ X, Y, W, H int32 }
				if err := b.call(ctx, r, IfaceComponent+".GetExtents", uint32(coordsScreen)).Store(&box); err != nil {
					return fmt.Errorf("the extents of %s: %w", r.Path, err)
				}
				n.Extents = &Box{X: int(box.X), Y: int(box.Y), W: int(box.W), H: int(box.H)}
				return nil
			})
		case IfaceText:
			more = append(more, func() error {
				if err := b.call(ctx, r, IfaceText+".GetText", int32(0), int32(-1)).Store(&n.Text); err != nil {
					return fmt.Errorf("the text of %s: %w", r.Path, err)
				}
				return nil
			})
		}
	}
	if err := together(more...); err != nil {
		return nil, nil, err
	}
	return n, kids, nil
}

// together runs the calls at once and returns the first one's error, in their order.
func together(calls ...func() error) error {
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// stateNames turns AT-SPI's state set (bit i of word i/32) into names, sorted.
func stateNames(bits []uint32) []string {
	var out []string
	for w, word := range bits {
		for i := 0; i < 32; i++ {
			if word&(1<<i) == 0 {
				continue
			}
			if s := w*32 + i; s < len(states) {
				out = append(out, states[s])
			} else {
				out = append(out, fmt.Sprintf("state-%d", s))
			}
		}
	}
	sort.Strings(out)
	return out
}

// StateBits is the state set AT-SPI sends for these state names (the inverse of what a
// snapshot reads); unknown names are left out.
func StateBits(names []string) []uint32 {
	bits := make([]uint32, (len(states)+31)/32)
	for _, name := range names {
		for i, s := range states {
			if s == name {
				bits[i/32] |= 1 << (i % 32)
			}
		}
	}
	return bits
}

// states are AT-SPI's state names by number (AtspiStateType).
var states = []string{"invalid", "active", "armed", "busy", "checked", "collapsed", "defunct", "editable",
	"enabled", "expandable", "expanded", "focusable", "focused", "has-tooltip", "horizontal", "iconified",
	"modal", "multi-line", "multiselectable", "opaque", "pressed", "resizable", "selectable", "selected",
	"sensitive", "showing", "single-line", "stale", "transient", "vertical", "visible", "manages-descendants",
	"indeterminate", "required", "truncated", "animated", "invalid-entry", "supports-autocompletion",
	"selectable-text", "is-default", "visited", "checkable", "has-popup", "read-only"}

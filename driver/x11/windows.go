//go:build unix

package x11

import (
	"fmt"
	"image"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/res"
	"github.com/jezek/xgb/xproto"

	"github.com/sendonce/sendonce/driver"
)

// windowList reads the EWMH client list with each window's title, PID, process,
// absolute geometry and map state. noRes is why the X server cannot say which process
// made a window (nil: it can; serverPIDs).
func windowList(c *xgb.Conn, noRes error) ([]driver.Window, error) {
	ids, err := clientIDs(c)
	if err != nil {
		return nil, err
	}
	var out []driver.Window
	for _, id := range ids {
		if w, ok := describe(c, noRes, id); ok {
			out = append(out, w)
		}
	}
	return out, nil
}

// clientIDs is the EWMH client list: the application windows the window manager manages.
func clientIDs(c *xgb.Conn) ([]xproto.Window, error) {
	root := xproto.Setup(c).DefaultScreen(c).Root
	clients, err := property(c, root, "_NET_CLIENT_LIST")
	if err != nil {
		return nil, err
	}
	ids := make([]xproto.Window, 0, len(clients)/4)
	for i := 0; i+4 <= len(clients); i += 4 {
		ids = append(ids, xproto.Window(xgb.Get32(clients[i:])))
	}
	return ids, nil
}

// describe reads one client window's title, PID, process, absolute geometry and map
// state; ok is false when it went away meanwhile. The PID is the X server's word where
// it has one (see pidOf).
func describe(c *xgb.Conn, noRes error, id xproto.Window) (driver.Window, bool) {
	root := xproto.Setup(c).DefaultScreen(c).Root
	w := driver.Window{ID: uint32(id)}
	if name, err := property(c, id, "_NET_WM_NAME"); err == nil && len(name) > 0 {
		w.Title = string(name)
	} else if name, err := property(c, id, "WM_NAME"); err == nil {
		w.Title = string(name)
	}
	w.PID, w.PIDFrom, w.ClaimedPID = pidOf(c, noRes, id)
	if w.PID != 0 {
		w.Process = driver.ProcessName(w.PID)
	}
	attrs, err := xproto.GetWindowAttributes(c, id).Reply()
	if err != nil {
		return w, false
	}
	w.Viewable = attrs.MapState == xproto.MapStateViewable
	geo, err := xproto.GetGeometry(c, xproto.Drawable(id)).Reply()
	if err != nil {
		return w, false
	}
	// Absolute coordinates: window managers reparent, so translate to the root.
	tr, err := xproto.TranslateCoordinates(c, id, root, 0, 0).Reply()
	if err != nil {
		return w, false
	}
	w.Bounds = image.Rect(int(tr.DstX), int(tr.DstY), int(tr.DstX)+int(geo.Width), int(tr.DstY)+int(geo.Height))
	return w, true
}

// focusedClient is the client window holding the input focus (ID 0 if none does): the
// focus window itself, the client it is inside of, or the one client inside the window
// manager's frame that has it. Only that one window is described.
func focusedClient(c *xgb.Conn, noRes error) (driver.Window, error) {
	f, err := xproto.GetInputFocus(c).Reply()
	if err != nil {
		return driver.Window{}, err
	}
	ids, err := clientIDs(c)
	if err != nil {
		return driver.Window{}, err
	}
	clients := map[xproto.Window]bool{}
	for _, id := range ids {
		clients[id] = true
	}
	found := func(id xproto.Window) (driver.Window, error) {
		if w, ok := describe(c, noRes, id); ok {
			return w, nil
		}
		return driver.Window{}, nil // it went away: no window has the focus
	}
	root := xproto.Setup(c).DefaultScreen(c).Root
	// None (0) and PointerRoot (1) are no window.
	for w := f.Focus; w > 1 && w != root; {
		if clients[w] {
			return found(w)
		}
		tree, err := xproto.QueryTree(c, w).Reply()
		if err != nil {
			return driver.Window{}, err
		}
		if w == f.Focus { // a window manager's frame: the one client inside it
			var inside []xproto.Window
			for _, child := range tree.Children {
				if clients[child] {
					inside = append(inside, child)
				}
			}
			if len(inside) == 1 {
				return found(inside[0])
			}
		}
		w = tree.Parent
	}
	return driver.Window{}, nil
}

// serverPIDs readies c to ask the X server which process made a window: the
// X-Resource extension (1.2 or later), whose answer comes from the server's own end of
// the client's connection, where _NET_WM_PID is a property any client on the display
// can write. The error says why the server cannot answer (nil: it can).
func serverPIDs(c *xgb.Conn) error {
	if err := res.Init(c); err != nil {
		return fmt.Errorf("the X server has no X-Resource extension (%v)", err)
	}
	v, err := res.QueryVersion(c, 1, 2).Reply()
	if err != nil {
		return fmt.Errorf("the X server's X-Resource extension did not answer its version: %v", err)
	}
	if v.ServerMajor < 1 || v.ServerMajor == 1 && v.ServerMinor < 2 {
		return fmt.Errorf("the X server's X-Resource extension is version %d.%d, and client ids need 1.2", v.ServerMajor, v.ServerMinor)
	}
	return nil
}

// pidOf is the process of window id: the X server's word (the X-Resource extension's
// local client pid of the client that made the window) where it has one, else the
// window's _NET_WM_PID, which any client on the display can write. claimed is the
// _NET_WM_PID where it names another process than the server's, 0 otherwise.
func pidOf(c *xgb.Conn, noRes error, id xproto.Window) (pid int, from string, claimed int) {
	if p, err := property(c, id, "_NET_WM_PID"); err == nil && len(p) >= 4 {
		claimed = int(xgb.Get32(p))
	}
	if noRes == nil {
		if server := clientPID(c, id); server != 0 {
			if claimed == server {
				claimed = 0
			}
			return server, driver.PIDFromServer, claimed
		}
	}
	if claimed == 0 {
		return 0, "", 0
	}
	return claimed, driver.PIDFromProperty, 0
}

// clientPID asks the X server the process id of the client that made window id (0:
// the server cannot tell, as for a client over TCP, or the window went away).
func clientPID(c *xgb.Conn, id xproto.Window) int {
	r, err := res.QueryClientIds(c, 1, []res.ClientIdSpec{{Client: uint32(id), Mask: res.ClientIdMaskLocalClientPID}}).Reply()
	if err != nil {
		return 0
	}
	for _, v := range r.Ids {
		if v.Spec.Mask&res.ClientIdMaskLocalClientPID != 0 && len(v.Value) == 1 {
			return int(v.Value[0])
		}
	}
	return 0
}

// atom is the server's atom of name; create says to make it if the server has none yet.
func atom(c *xgb.Conn, name string, create bool) (xproto.Atom, error) {
	r, err := xproto.InternAtom(c, !create, uint16(len(name)), name).Reply()
	if err != nil {
		return 0, err
	}
	if r.Atom == 0 {
		return 0, fmt.Errorf("X atom %s is not known (no EWMH window manager?)", name)
	}
	return r.Atom, nil
}

func property(c *xgb.Conn, w xproto.Window, name string) ([]byte, error) {
	a, err := atom(c, name, false)
	if err != nil {
		return nil, err
	}
	r, err := xproto.GetProperty(c, false, w, a, xproto.GetPropertyTypeAny, 0, 1<<16).Reply()
	if err != nil {
		return nil, err
	}
	return r.Value, nil
}

// activate asks the window manager to raise and focus w (EWMH _NET_ACTIVE_WINDOW).
func activate(c *xgb.Conn, w xproto.Window) error {
	root := xproto.Setup(c).DefaultScreen(c).Root
	a, err := atom(c, "_NET_ACTIVE_WINDOW", false)
	if err != nil {
		return err
	}
	ev := xproto.ClientMessageEvent{Format: 32, Window: w, Type: a,
		Data: xproto.ClientMessageDataUnionData32New([]uint32{2, xproto.TimeCurrentTime, 0, 0, 0})}
	return xproto.SendEventChecked(c, false, root, xproto.EventMaskSubstructureRedirect|xproto.EventMaskSubstructureNotify, string(ev.Bytes())).Check()
}

//go:build cgo

// Package x11 is the live Driver: robotgo sends the input events (XTest) but typed text,
// which goes as XTest events on the package's own X connection (typing.go); X11 (xgb)
// lists and activates windows, and captures the screen over its own X connection
// (vision.X11Screen, a new connection a capture, for pixel formats it does not read);
// a field's text is read back through the PRIMARY selection on a connection of its own
// (selection.go). It acts on the display named by $DISPLAY.
package x11

import (
	"context"
	"fmt"
	"image"
	"io"
	"strings"
	"sync"

	"github.com/go-vgo/robotgo"
	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/vision"
)

// Desktop is the live desktop on $DISPLAY.
type Desktop struct {
	mu      sync.Mutex
	display string // the X display's name, for the connections of selection reads
	conn    *xgb.Conn
	capture capturer                // on conn: the common pixel format
	screen  vision.X11Screen        // any other format, and the display's bounds
	root    xproto.Window           // the default screen's root window
	noXTest error                   // why robotgo types text, not XTest events on conn (nil: XTest)
	noRes   error                   // why the X server cannot say which process made a window (nil: it can)
	mapped  map[xproto.Keycode]bool // spare keys typing put characters on: emptied at Close
	perKey  int
}

// Open connects to display. Screen capture reads $DISPLAY, so the caller sets it to the
// same display.
func Open(display string) (*Desktop, error) {
	xgb.Logger.SetOutput(io.Discard) // xgb logs to stderr when there is no ~/.Xauthority; errors still return
	c, err := xgb.NewConnDisplay(display)
	if err != nil {
		return nil, fmt.Errorf("cannot open X display %q: %w", display, err)
	}
	if err := robotgo.SetXDisplayName(display); err != nil {
		c.Close()
		return nil, fmt.Errorf("robotgo: display %q: %w", display, err)
	}
	robotgo.MouseSleep, robotgo.KeySleep = 0, 0
	go drainEvents(c)
	return &Desktop{display: display, conn: c, capture: newCapturer(c), root: xproto.Setup(c).DefaultScreen(c).Root, noXTest: xtestTyping(c), noRes: serverPIDs(c)}, nil
}

// Close closes the X connection (a capture waiting on the server returns) and unmaps
// the capture's shared memory.
func (d *Desktop) Close() {
	d.mu.Lock()
	if len(d.mapped) > 0 {
		emptyKeys(d.conn, d.mapped, d.perKey)
	}
	d.mu.Unlock()
	d.conn.Close()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.capture.unmap()
}

func (d *Desktop) Windows(ctx context.Context) ([]driver.Window, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return windowList(d.conn, d.noRes)
}

func (d *Desktop) Activate(ctx context.Context, w driver.Window) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return activate(d.conn, xproto.Window(w.ID))
}

func (d *Desktop) Click(ctx context.Context, p image.Point) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	robotgo.Move(p.X, p.Y)
	robotgo.MilliSleep(30) // let the pointer's enter/motion events reach the toolkit first
	robotgo.Click("left")
	return nil
}

// Move puts the pointer at p.
func (d *Desktop) Move(ctx context.Context, p image.Point) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	robotgo.Move(p.X, p.Y)
	return nil
}

// Key presses a chord: modifiers and a key joined by "+", e.g. "ctrl+shift+u".
func (d *Desktop) Key(ctx context.Context, chord string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	parts := strings.Split(strings.ToLower(chord), "+")
	key, mods := parts[len(parts)-1], parts[:len(parts)-1]
	switch key {
	case "return":
		key = "enter"
	}
	args := make([]interface{}, len(mods))
	for i, m := range mods {
		args[i] = m
	}
	if err := robotgo.KeyTap(key, args...); err != nil {
		return fmt.Errorf("key %s: %w", chord, err)
	}
	return nil
}

// Focused is the client window (one in _NET_CLIENT_LIST) that holds the X input focus:
// the focus window itself, the client it is inside of, or the one client inside the
// window manager's frame that has it.
func (d *Desktop) Focused(ctx context.Context) (driver.Window, error) {
	if err := ctx.Err(); err != nil {
		return driver.Window{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return focusedClient(d.conn, d.noRes)
}

func (d *Desktop) Type(ctx context.Context, text string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := modifiersClear(d.conn, d.root); err != nil {
		return err
	}
	if d.noXTest != nil {
		robotgo.Type(text)
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mapped == nil {
		d.mapped = map[xproto.Keycode]bool{}
	}
	k, err := readKeyboard(d.conn, d.mapped)
	if err != nil {
		return err
	}
	d.perKey = k.perKey
	keys, err := k.keysFor(text)
	if err != nil {
		return fmt.Errorf("typing %q: %w", text, err)
	}
	return typeKeys(ctx, d.conn, d.root, k, keys, d.mapped)
}

// drainEvents reads and drops the events and errors the server sends on c until it
// closes: nothing here waits for one, and xgb's queue, once full, would stall every
// reply (MappingNotify goes to every client whenever anyone changes the keyboard map).
func drainEvents(c *xgb.Conn) {
	for {
		if ev, err := c.WaitForEvent(); ev == nil && err == nil {
			return
		}
	}
}

func (d *Desktop) Capture(ctx context.Context, r image.Rectangle) (*image.RGBA, error) {
	if !d.capture.ok {
		return d.screen.Capture(ctx, r)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.capture.capture(ctx, d.conn, r)
}

func (d *Desktop) Bounds() image.Rectangle { return d.screen.Bounds() }

// XTestTyping is nil when typed ASCII text goes as XTest events on the desktop's own
// connection, else why robotgo types it.
func (d *Desktop) XTestTyping() error { return d.noXTest }

// SharesMemory reports whether captures come through a segment shared with the X
// server (MIT-SHM) rather than through the socket.
func (d *Desktop) SharesMemory() bool { return d.capture.shared != nil }

// Credentials says whose rights a window's process reads files with.
func (d *Desktop) Credentials(pid int) (driver.Credentials, error) {
	return driver.ProcessCredentials(pid)
}

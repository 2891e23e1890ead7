// Package driver acts on a desktop chat app: it finds the app's window, sends the input
// events an app profile describes, and runs one delivery's steps with the gate asked at
// every boundary and every step recorded as evidence.
//
// The Driver interface is the desktop: the live one (driver/x11) uses robotgo for input
// and X11 for windows, capture and reading a field's text back (the X selection); the
// replay one (driver/replay) serves recorded frames,
// so the whole pipeline, OCR included, runs in tests without an X server.
//
// A step that may submit cannot run without a pass: Runner.crossingStep takes the
// *store.Pass that only a durable crossing in the store produces, and spends it before
// the first input event.
package driver

import (
	"context"
	"errors"
	"image"
)

// ErrWindow: the app's window could not be found, or more than one could be it.
var ErrWindow = errors.New("app window")

// Window is a top-level window.
type Window struct {
	ID       uint32
	Title    string
	PID      int
	Process  string // the process's command name, e.g. "gajim"
	Bounds   image.Rectangle
	Viewable bool
	// PIDFrom says whose word PID is: PIDFromServer (the X server's, which no client
	// can set) or PIDFromProperty (_NET_WM_PID's, which any client on the display can
	// write: a server without the X-Resource extension, or a client it cannot tell
	// the process of); "" where the desktop does not say (a replay).
	PIDFrom string `json:",omitempty"`
	// ClaimedPID is the window's _NET_WM_PID where it is not the process the X server
	// says made the window: another client may have rewritten it, and FindWindow
	// chooses no window of that title while it does.
	ClaimedPID int `json:",omitempty"`
}

// Where a Window's PID comes from (Window.PIDFrom).
const (
	PIDFromServer   = "X server"
	PIDFromProperty = "_NET_WM_PID"
)

// Driver is a desktop: its windows, input events and screen.
type Driver interface {
	Windows(ctx context.Context) ([]Window, error)
	Activate(ctx context.Context, w Window) error
	Click(ctx context.Context, p image.Point) error
	// Move puts the pointer at p without clicking (a control that shows on hover).
	Move(ctx context.Context, p image.Point) error
	// Key presses a chord such as "ctrl+shift+u", "Return" or "Escape".
	Key(ctx context.Context, chord string) error
	Type(ctx context.Context, text string) error
	Capture(ctx context.Context, r image.Rectangle) (*image.RGBA, error)
	Bounds() image.Rectangle
	// Focused is the top-level window that has the keyboard focus (ID 0: none does).
	// The runner asks it before every keyboard event: keys typed into another window
	// could land in another conversation, or another app.
	Focused(ctx context.Context) (Window, error)
	// FieldText selects all the text of the field that has the keyboard focus in w (it
	// presses ctrl+a) and reads it back through the X PRIMARY selection: the app's own
	// text, character for character, not a reading of pixels. Only a selection that a
	// window of w's own X client made after the call began counts. It then presses End,
	// which leaves the field as typing left it (the cursor at the end, nothing selected).
	FieldText(ctx context.Context, w Window) (string, error)
}

// InputGuard is asked before every input event; an error stops the event.
type InputGuard func(ctx context.Context) error

// Guarded is a Driver whose input events are refused unless the guard allows them (the
// display lease, checked before every event).
type Guarded struct {
	Driver
	Guard InputGuard
}

func (g Guarded) check(ctx context.Context) error {
	if g.Guard == nil {
		return nil
	}
	return g.Guard(ctx)
}

func (g Guarded) Activate(ctx context.Context, w Window) error {
	if err := g.check(ctx); err != nil {
		return err
	}
	return g.Driver.Activate(ctx, w)
}

func (g Guarded) Click(ctx context.Context, p image.Point) error {
	if err := g.check(ctx); err != nil {
		return err
	}
	return g.Driver.Click(ctx, p)
}

func (g Guarded) Move(ctx context.Context, p image.Point) error {
	if err := g.check(ctx); err != nil {
		return err
	}
	return g.Driver.Move(ctx, p)
}

func (g Guarded) Key(ctx context.Context, chord string) error {
	if err := g.check(ctx); err != nil {
		return err
	}
	return g.Driver.Key(ctx, chord)
}

func (g Guarded) FieldText(ctx context.Context, w Window) (string, error) {
	if err := g.check(ctx); err != nil {
		return "", err
	}
	return g.Driver.FieldText(ctx, w)
}

func (g Guarded) Type(ctx context.Context, text string) error {
	if err := g.check(ctx); err != nil {
		return err
	}
	return g.Driver.Type(ctx, text)
}

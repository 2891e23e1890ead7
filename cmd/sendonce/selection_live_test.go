//go:build cgo

package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/driver/x11"
)

// fieldApp is an X client on the test bed's display. Unless unfocused, it has a window
// with the keyboard focus and a field holding text: as GTK and Qt do, it claims the
// PRIMARY selection with a hidden window of its own when ctrl+a selects the field's
// text (if claims). It answers requests for the selection with the text it selected:
// stale, if set, is one it claims at the start, as an app that selected something
// earlier would hold it; an unfocused client answers with text whenever it owns it.
// It refuses its first refuses requests (as GTK's file chooser, now and then, refuses
// one a moment after ctrl+a); a negative refuses refuses them all.
type fieldApp struct {
	c                 *xgb.Conn
	win, hidden       xproto.Window
	text, stale       string
	claims, unfocused bool
	refuses           int
	utf8String        xproto.Atom
}

func startFieldApp(t *testing.T, display string, app fieldApp) *fieldApp {
	t.Helper()
	c, err := xgb.NewConnDisplay(display)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	a := &app
	a.c = c
	if !a.unfocused {
		a.win = focusedWindow(t, c)
	}
	a.hidden, a.utf8String = hiddenWindow(t, c)
	selected := a.stale
	if a.unfocused {
		selected = a.text
	}
	if a.stale != "" {
		xproto.SetSelectionOwner(c, a.hidden, xproto.AtomPrimary, xproto.TimeCurrentTime)
	}
	go func() {
		for {
			ev, err := c.WaitForEvent()
			if ev == nil && err == nil {
				return
			}
			switch ev := ev.(type) {
			case xproto.KeyPressEvent:
				if a.claims && ev.State&xproto.ModMaskControl != 0 {
					selected = a.text
					xproto.SetSelectionOwner(c, a.hidden, xproto.AtomPrimary, ev.Time)
				}
			case xproto.SelectionRequestEvent:
				answer := xproto.SelectionNotifyEvent{Time: ev.Time, Requestor: ev.Requestor, Selection: ev.Selection, Target: ev.Target, Property: xproto.AtomNone}
				refuse := a.refuses != 0
				if a.refuses > 0 {
					a.refuses--
				}
				if ev.Owner == a.hidden && ev.Target == a.utf8String && !refuse {
					xproto.ChangeProperty(c, xproto.PropModeReplace, ev.Requestor, ev.Property, a.utf8String, 8, uint32(len(selected)), []byte(selected))
					answer.Property = ev.Property
				}
				xproto.SendEvent(c, false, ev.Requestor, 0, string(answer.Bytes()))
			}
		}
	}()
	return a
}

// TestLiveFieldText: the desktop reads a field's text through the X selection exactly
// as the app holds it (UTF-8 included), and only a selection the app of the field's
// window made after ctrl+a counts: an earlier one of its own is not taken for it, nor
// one that another client claims meanwhile. Gajim's and Psi+'s own fields are read this
// way in every live delivery (read the typed path back).
func TestLiveFieldText(t *testing.T) {
	d, display := liveDesktop(t)
	ctx := context.Background()
	const path = "/var/lib/sendonce/staging/0a1B2c3D4e5F/Rapport final – été 2026.txt"

	t.Run("the app's text after ctrl+a", func(t *testing.T) {
		app := startFieldApp(t, display, fieldApp{text: path, claims: true, stale: "an earlier selection"})
		got, err := d.FieldText(ctx, driver.Window{ID: uint32(app.win), Title: "field"})
		if err != nil || got != path {
			t.Fatalf("FieldText = %q, %v; want %q", got, err, path)
		}
	})
	t.Run("an app that refuses the text once", func(t *testing.T) {
		app := startFieldApp(t, display, fieldApp{text: path, claims: true, refuses: 1})
		got, err := d.FieldText(ctx, driver.Window{ID: uint32(app.win), Title: "field"})
		if err != nil || got != path {
			t.Fatalf("FieldText = %q, %v; want %q: a refusal is asked again", got, err, path)
		}
	})
	t.Run("an app that always refuses the text", func(t *testing.T) {
		app := startFieldApp(t, display, fieldApp{text: path, claims: true, refuses: -1})
		within, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		got, err := d.FieldText(within, driver.Window{ID: uint32(app.win), Title: "field"})
		if !errors.Is(err, x11.ErrNoSelection) || got != "" {
			t.Fatalf("FieldText = %q, %v; want ErrNoSelection when the app never gives the text", got, err)
		}
	})
	t.Run("an earlier selection of the app's", func(t *testing.T) {
		app := startFieldApp(t, display, fieldApp{text: path, stale: path})
		got, err := d.FieldText(ctx, driver.Window{ID: uint32(app.win), Title: "field"})
		if !errors.Is(err, x11.ErrNoSelection) {
			t.Fatalf("FieldText = %q, %v; want ErrNoSelection: the app held the selection from before and selected nothing after ctrl+a", got, err)
		}
	})
	t.Run("another client's selection", func(t *testing.T) {
		app := startFieldApp(t, display, fieldApp{text: path})
		other := startFieldApp(t, display, fieldApp{text: path, unfocused: true})
		first, err := xproto.GetSelectionOwner(other.c, xproto.AtomPrimary).Reply()
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		defer close(stop)
		go other.claimWhenTaken(first.Owner, stop) // as soon as FieldText takes it
		got, err := d.FieldText(ctx, driver.Window{ID: uint32(app.win), Title: "field"})
		if !errors.Is(err, x11.ErrOtherClient) {
			t.Fatalf("FieldText = %q, %v; want ErrOtherClient: the selection belongs to another client than the field's window", got, err)
		}
	})
}

// claimWhenTaken claims the PRIMARY selection 50 ms after a client other than a has
// taken it from first: after FieldText has checked that it holds it and pressed ctrl+a,
// while it waits for the field's app to claim it.
func (a *fieldApp) claimWhenTaken(first xproto.Window, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(2 * time.Millisecond):
		}
		now, err := xproto.GetSelectionOwner(a.c, xproto.AtomPrimary).Reply()
		if err != nil {
			return
		}
		if now.Owner != first && now.Owner != a.hidden && now.Owner != 0 {
			time.Sleep(50 * time.Millisecond)
			xproto.SetSelectionOwner(a.c, a.hidden, xproto.AtomPrimary, xproto.TimeCurrentTime)
			return
		}
	}
}

// hiddenWindow is an unmapped window of c's, as toolkits own selections with, and the
// UTF8_STRING atom.
func hiddenWindow(t *testing.T, c *xgb.Conn) (xproto.Window, xproto.Atom) {
	t.Helper()
	win, err := xproto.NewWindowId(c)
	if err != nil {
		t.Fatal(err)
	}
	screen := xproto.Setup(c).DefaultScreen(c)
	xproto.CreateWindow(c, 0, win, screen.Root, 0, 0, 1, 1, 0, xproto.WindowClassInputOnly, 0, 0, nil)
	r, err := xproto.InternAtom(c, false, uint16(len("UTF8_STRING")), "UTF8_STRING").Reply()
	if err != nil {
		t.Fatal(err)
	}
	return win, r.Atom
}

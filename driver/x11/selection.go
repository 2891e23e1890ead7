//go:build cgo

package x11

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/sendonce/sendonce/driver"
)

// ErrNoSelection: the field's text could not be read through the X selection.
var ErrNoSelection = errors.New("no selection to read")

// ErrOtherClient: what was selected after ctrl+a belongs to another X client than the
// field's window.
var ErrOtherClient = fmt.Errorf("%w: the selection belongs to another X client", ErrNoSelection)

// selectionWait is how long FieldText waits, when ctx sets no deadline, for the app to
// claim the selection after ctrl+a and to answer the request for the text.
const selectionWait = 2 * time.Second

// FieldText reads the text of the field that has the keyboard focus in w. Toolkits put
// the text a user selects in the X PRIMARY selection; so, on a connection of its own
// (the selection's events come to it), it:
//
//  1. takes the PRIMARY selection for a window of its own, so that no earlier selection,
//     the app's from an earlier attempt included, can answer for this one;
//  2. presses ctrl+a, which selects all of the focused field's text;
//  3. waits for the selection's owner to be a window of w's X client (the same resource
//     id base: GTK and Qt claim it with a hidden window of their connection), and asks
//     it for the text as UTF8_STRING;
//  4. checks the owner did not change while it answered;
//  5. presses End, which leaves the field as typing left it: its text unselected, the
//     cursor at its end, and closed the completion list GTK's file chooser opens on a
//     select-all (of its current folder's files, over its Open button).
//
// The text is the app's own, character for character. The connection's close gives
// up what it still owns. It waits until ctx's deadline (or selectionWait), and ctx's
// end closes the connection, which ends any request waiting on the server. Text read
// from an owner that changed meanwhile comes back with the error, for the evidence.
func (d *Desktop) FieldText(ctx context.Context, w driver.Window) (string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, selectionWait)
		defer cancel()
	}
	c, err := xgb.NewConnDisplay(d.display)
	if err != nil {
		return "", fmt.Errorf("reading the field: cannot open X display %q: %w", d.display, err)
	}
	defer c.Close()
	defer context.AfterFunc(ctx, c.Close)()
	r, err := newRequestor(c)
	if err != nil {
		return "", fmt.Errorf("reading the field: %w", err)
	}
	if err := xproto.SetSelectionOwnerChecked(c, r.own, xproto.AtomPrimary, xproto.TimeCurrentTime).Check(); err != nil {
		return "", fmt.Errorf("reading the field: taking the selection: %w", err)
	}
	if owner, err := selectionOwner(c); err != nil || owner != r.own {
		return "", fmt.Errorf("%w: the PRIMARY selection could not be cleared first (owner %#x, %v)", ErrNoSelection, owner, err)
	}
	if err := d.Key(ctx, "ctrl+a"); err != nil {
		return "", err
	}
	text, err := r.read(ctx, w)
	if ctx.Err() == nil {
		if endErr := d.Key(ctx, "End"); err == nil {
			err = endErr
		}
	}
	return text, err
}

// requestor asks for the PRIMARY selection on a connection of its own: the events the
// server sends it, an unmapped window of its own, the atoms of the exchange.
type requestor struct {
	c                *xgb.Conn
	events           <-chan xgb.Event
	own              xproto.Window
	utf8String, into xproto.Atom
}

func newRequestor(c *xgb.Conn) (*requestor, error) {
	events := make(chan xgb.Event, 16)
	go func() {
		defer close(events)
		for {
			ev, err := c.WaitForEvent()
			if ev == nil && err == nil {
				return
			}
			if ev != nil {
				select {
				case events <- ev:
				default: // a full queue drops what nobody waits for
				}
			}
		}
	}()
	r := &requestor{c: c, events: events}
	var err error
	if r.own, err = xproto.NewWindowId(c); err != nil {
		return nil, err
	}
	if err := xproto.CreateWindowChecked(c, 0, r.own, xproto.Setup(c).DefaultScreen(c).Root, 0, 0, 1, 1, 0, xproto.WindowClassInputOnly, 0, 0, nil).Check(); err != nil {
		return nil, err
	}
	if r.utf8String, err = atom(c, "UTF8_STRING", true); err != nil {
		return nil, err
	}
	if r.into, err = atom(c, "SENDONCE_FIELD", true); err != nil {
		return nil, err
	}
	return r, nil
}

// read waits for a window of w's client to take the PRIMARY selection from r's own, and
// reads it as text. An owner that refuses the text (GTK's file chooser does, now and
// then, when its completion takes the selection back a moment after ctrl+a) is asked
// again, owner and all, until ctx ends: reading changes nothing in the field.
func (r *requestor) read(ctx context.Context, w driver.Window) (string, error) {
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for {
		owner, err := r.owner(ctx, w, poll.C)
		if err != nil {
			return "", err
		}
		text, refused, err := r.convert(ctx, w, owner)
		if !refused {
			return text, err
		}
		select {
		case <-poll.C:
		case <-ctx.Done():
			return "", err
		}
	}
}

// owner waits for a window other than r's own to hold the PRIMARY selection, and checks
// it is one of w's client.
func (r *requestor) owner(ctx context.Context, w driver.Window, poll <-chan time.Time) (xproto.Window, error) {
	nothing := func() error {
		return fmt.Errorf("%w: nothing was selected after ctrl+a in %q (is the focus in a text field?): %w", ErrNoSelection, w.Title, ctx.Err())
	}
	for {
		owner, err := selectionOwner(r.c)
		if err != nil {
			if ctx.Err() != nil {
				// ctx's end closed the connection while the owner was asked: the wait
				// ran out, which is what to say (not the closed connection's EOF).
				return 0, nothing()
			}
			return 0, err
		}
		// No owner (None) is no answer yet: GTK's location field may let go of the
		// selection a moment after ctrl+a (its completion), then take it again.
		if owner != r.own && owner != xproto.WindowNone {
			if !sameClient(uint32(owner), w.ID, xproto.Setup(r.c).ResourceIdMask) {
				return 0, fmt.Errorf("%w: window %#x holds it after ctrl+a, not a window of %q's (%#x)", ErrOtherClient, owner, w.Title, w.ID)
			}
			return owner, nil
		}
		select {
		case <-poll:
		case <-ctx.Done():
			return 0, nothing()
		}
	}
}

// convert asks the selection's owner for its text as UTF8_STRING. refused says the owner
// answered that it would not give it (with the error that says so).
func (r *requestor) convert(ctx context.Context, w driver.Window, owner xproto.Window) (text string, refused bool, err error) {
	if err := xproto.ConvertSelectionChecked(r.c, r.own, xproto.AtomPrimary, r.utf8String, r.into, xproto.TimeCurrentTime).Check(); err != nil {
		return "", false, err
	}
	for answered := false; !answered; {
		select {
		case ev, ok := <-r.events:
			if !ok {
				return "", false, fmt.Errorf("%w: the X connection closed", ErrNoSelection)
			}
			n, isNotify := ev.(xproto.SelectionNotifyEvent)
			if !isNotify || n.Requestor != r.own || n.Selection != xproto.AtomPrimary {
				continue
			}
			if n.Property == xproto.AtomNone {
				return "", true, fmt.Errorf("%w: %q's client would not give the selection as text", ErrNoSelection, w.Title)
			}
			answered = true
		case <-ctx.Done():
			return "", false, fmt.Errorf("%w: %q's client did not answer the request for the selection: %w", ErrNoSelection, w.Title, ctx.Err())
		}
	}
	prop, err := xproto.GetProperty(r.c, true, r.own, r.into, xproto.GetPropertyTypeAny, 0, 1<<16).Reply()
	if err != nil {
		return "", false, err
	}
	switch {
	case prop.Type != r.utf8String:
		return "", false, fmt.Errorf("%w: the selection came as another type than UTF8_STRING (a long one sent in pieces?)", ErrNoSelection)
	case prop.BytesAfter != 0:
		return "", false, fmt.Errorf("%w: the selection is longer than 256 KiB", ErrNoSelection)
	case !utf8.Valid(prop.Value):
		return "", false, fmt.Errorf("%w: the selection is not UTF-8", ErrNoSelection)
	}
	if after, err := selectionOwner(r.c); err != nil || after != owner {
		return string(prop.Value), false, fmt.Errorf("%w: the selection changed hands while it was read (%#x, then %#x)", ErrNoSelection, owner, after)
	}
	return string(prop.Value), false, nil
}

// sameClient says whether two resource ids were made by one X client: a client's ids
// share the bits outside the server's resource id mask.
func sameClient(a, b, mask uint32) bool { return a&^mask == b&^mask }

func selectionOwner(c *xgb.Conn) (xproto.Window, error) {
	r, err := xproto.GetSelectionOwner(c, xproto.AtomPrimary).Reply()
	if err != nil {
		return 0, err
	}
	return r.Owner, nil
}

package driver

import (
	"context"
	"errors"
	"fmt"
	"image"
	"strings"
	"time"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/internal/clock"
)

// The app's windows, and the keyboard focus: which window is the app's, waits for a
// dialog to come or go, and the focus a typing step waits for.

// findWindow picks the app's main window by process, title and visibility, and refuses
// when that leaves none or more than one.
func (r *Runner) findWindow(ctx context.Context) error {
	w, err := FindWindow(ctx, r.Driver, r.Profile)
	if err == nil {
		r.window = w
	}
	return err
}

// FindWindow finds the profile's one main window on the display: viewable, of the
// profile's process, with its title. None, or more than one, is ErrWindow; so is a
// window of its title whose process the X server and its _NET_WM_PID disagree on,
// where either names the profile's process (ErrPIDDisagrees): nothing is chosen then.
func FindWindow(ctx context.Context, d Driver, p *Profile) (Window, error) {
	ws, err := d.Windows(ctx)
	if err != nil {
		return Window{}, fmt.Errorf("%w: listing windows: %v", ErrWindow, err)
	}
	var found []Window
	for _, w := range ws {
		if !w.Viewable || !p.matchesTitle(w.Title) {
			continue
		}
		if w.ClaimedPID != 0 && w.ClaimedPID != w.PID {
			claimed := ProcessName(w.ClaimedPID)
			if p.MatchesProcess(w.Process) || p.MatchesProcess(claimed) {
				return Window{}, fmt.Errorf("%w: %w: window %#x titled %q was made by process %d (%s) says the X server, but its _NET_WM_PID names process %d (%s): another program on the display may have rewritten it to pass a window, or an accessibility tree, off as %s's; nothing was chosen. Check which programs run on this display (xlsclients -l), and restart %s",
					ErrWindow, ErrPIDDisagrees, w.ID, w.Title, w.PID, orUnknown(w.Process), w.ClaimedPID, orUnknown(claimed), p.App, p.App)
			}
		}
		if p.MatchesProcess(w.Process) {
			found = append(found, w)
		}
	}
	switch len(found) {
	case 0:
		return Window{}, fmt.Errorf("%w: no viewable %s window titled %q: is %s running on this display?", ErrWindow, p.Process, p.WindowTitle, p.App)
	case 1:
		return found[0], nil
	}
	return Window{}, fmt.Errorf("%w: %d viewable %s windows titled %q; refusing to guess which one", ErrWindow, len(found), p.Process, p.WindowTitle)
}

// ErrPIDDisagrees: the X server and a window's _NET_WM_PID name different processes
// for the window (Window.ClaimedPID).
var ErrPIDDisagrees = errors.New("the window's process is in doubt")

// orUnknown is a process's name, or "unknown" where it cannot be read.
func orUnknown(name string) string {
	if name == "" {
		return "unknown"
	}
	return name
}

func (r *Runner) windowTitled(ctx context.Context, prefix string) (Window, bool, error) {
	ws, err := r.Driver.Windows(ctx)
	if err != nil {
		return Window{}, false, err
	}
	for _, w := range ws {
		if w.Viewable && r.Profile.MatchesProcess(w.Process) && strings.HasPrefix(w.Title, prefix) {
			return w, true, nil
		}
	}
	return Window{}, false, nil
}

// waitWindow waits for a window to be there (and to hold still at the same place for
// two looks), or to be gone.
func (r *Runner) waitWindow(ctx context.Context, prefix string, present bool, timeout time.Duration) error {
	deadline := r.now().Add(timeout)
	var last *image.Rectangle
	for {
		w, ok, err := r.windowTitled(ctx, prefix)
		if err != nil {
			return err
		}
		if ok == present {
			if !present {
				return nil
			}
			if last != nil && *last == w.Bounds {
				return nil
			}
			last = &w.Bounds
		} else {
			last = nil
		}
		if r.now().After(deadline) {
			if present {
				return fmt.Errorf("no window titled %q appeared within %v", prefix, timeout)
			}
			return fmt.Errorf("the window titled %q is still open after %v", prefix, timeout)
		}
		if err := clock.Sleep(ctx, r.Reader.PollInterval()); err != nil {
			return fmt.Errorf("waiting for the window titled %q: %w", prefix, err)
		}
	}
}

// escapeWindow presses Escape in the window the step names while it is viewable
// (Repeat times at most), activating it and waiting for the focus there first.
func (r *Runner) escapeWindow(ctx context.Context, s Step, res *evidence.Record) error {
	for i := 0; i < max(s.Repeat, 1); i++ {
		w, ok, err := r.windowTitled(ctx, s.Window)
		if err != nil || !ok {
			return err
		}
		if err := r.Driver.Activate(ctx, w); err != nil {
			return err
		}
		if err := r.focusOn(ctx, w); err != nil {
			return err
		}
		if err := r.Driver.Key(ctx, "Escape"); err != nil {
			return err
		}
		res.Inputs = append(res.Inputs, evidence.KeyInput("Escape"))
		if err := r.waitWindow(ctx, s.Window, false, r.Profile.Timings.windowClose()); err == nil {
			return r.Driver.Activate(ctx, r.window)
		}
	}
	return fmt.Errorf("a window titled %q is still open after %d Escape(s)", s.Window, max(s.Repeat, 1))
}

// focusWait is how long a keyboard step waits for the keyboard focus to arrive in its
// window: a window manager focuses a newly mapped dialog a moment after it maps.
const focusWait = 2 * time.Second

// ErrFocus: the keyboard focus was not in the window a keyboard step types into.
var ErrFocus = errors.New("keyboard focus elsewhere")

// focusOn waits (focusWait at most) until the keyboard focus is in want: that window
// by ID, or, given only a title, the app's viewable window of that title. Keys sent
// anywhere else could land in another conversation or another app, so it stops
// before the input instead, naming where the focus was.
func (r *Runner) focusOn(ctx context.Context, want Window) error {
	deadline := r.now().Add(focusWait)
	for {
		if ctx.Err() != nil {
			return fmt.Errorf("stopped before the input: %w", context.Cause(ctx))
		}
		target := want
		if target.ID == 0 {
			w, ok, err := r.windowTitled(ctx, want.Title)
			if err != nil {
				return err
			}
			if ok {
				target = w
			}
		}
		got, err := r.Driver.Focused(ctx)
		if err != nil {
			return fmt.Errorf("%w: reading the keyboard focus: %v", ErrFocus, err)
		}
		if target.ID != 0 && got.ID == target.ID {
			return nil
		}
		if r.now().After(deadline) {
			where := "no window"
			if got.ID != 0 {
				where = fmt.Sprintf("%q (window %#x, %s)", got.Title, got.ID, got.Process)
			}
			return fmt.Errorf("%w: the keyboard focus is in %s, not in %q that the step types into: stopped before the input", ErrFocus, where, want.Title)
		}
		clock.Sleep(ctx, 20*time.Millisecond)
	}
}

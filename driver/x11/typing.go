//go:build cgo

package x11

import (
	"context"
	"fmt"
	"time"

	"github.com/go-vgo/robotgo"
	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"
)

// typingPace is the pause after each typed character: the anchor's rate (xdotool at
// 2 ms a character), against robotgo's 5 ms hold of every key. BENCHMARKS.md has the
// loss rate over 100 typed paths.
const typingPace = 2 * time.Millisecond

// typist types text as XTest key events on the desktop's own X connection: for each
// character its key pressed and released (with Shift where the keyboard map has the
// character on a key's second level), a round trip so that the server has handled
// them, then typingPace. Printable ASCII that the keyboard map has on a key is typed
// so; any other character goes through robotgo, which maps a spare key for it.
type typist struct {
	keys  map[rune]keyOnMap
	shift xproto.Keycode
	root  xproto.Window
}

// keyOnMap is a character's key: its keycode, and whether it needs Shift.
type keyOnMap struct {
	code  xproto.Keycode
	shift bool
}

// newTypist reads the keyboard map of c's display; it fails where the server lacks
// XTest or has no Shift key on its map.
func newTypist(c *xgb.Conn) (*typist, error) {
	if err := xtest.Init(c); err != nil {
		return nil, fmt.Errorf("XTest: %w", err)
	}
	setup := xproto.Setup(c)
	first, last := setup.MinKeycode, setup.MaxKeycode
	m, err := xproto.GetKeyboardMapping(c, first, byte(last-first+1)).Reply()
	if err != nil {
		return nil, fmt.Errorf("reading the keyboard map: %w", err)
	}
	t := &typist{keys: keysOnMap(first, int(m.KeysymsPerKeycode), m.Keysyms), root: setup.DefaultScreen(c).Root}
	for i, n := 0, int(m.KeysymsPerKeycode); n > 0 && i*n < len(m.Keysyms); i++ {
		if m.Keysyms[i*n] == keysymShiftL {
			t.shift = first + xproto.Keycode(i)
			break
		}
	}
	if t.shift == 0 {
		return nil, fmt.Errorf("the keyboard map has no Shift_L key")
	}
	return t, nil
}

const keysymShiftL = 0xffe1

// keysOnMap finds, for each printable ASCII character (whose keysym is its code), the
// first key that has it on its first level, else the first that has it on its second
// (with Shift). syms holds perKey keysyms for each keycode from first on.
func keysOnMap(first xproto.Keycode, perKey int, syms []xproto.Keysym) map[rune]keyOnMap {
	out := map[rune]keyOnMap{}
	if perKey < 2 {
		return out
	}
	for level, shift := range []bool{false, true} {
		for i := 0; (i+1)*perKey <= len(syms); i++ {
			r := rune(syms[i*perKey+level])
			if r < 0x20 || r > 0x7e {
				continue
			}
			if _, seen := out[r]; !seen {
				out[r] = keyOnMap{code: first + xproto.Keycode(i), shift: shift}
			}
		}
	}
	return out
}

// typeText types text; it stops between characters when ctx ends.
func (t *typist) typeText(ctx context.Context, c *xgb.Conn, text string) error {
	for _, r := range text {
		if err := ctx.Err(); err != nil {
			return err
		}
		k, ok := t.keys[r]
		if !ok {
			robotgo.Type(string(r))
			continue
		}
		if k.shift {
			t.fake(c, xproto.KeyPress, t.shift)
		}
		t.fake(c, xproto.KeyPress, k.code)
		t.fake(c, xproto.KeyRelease, k.code)
		if k.shift {
			t.fake(c, xproto.KeyRelease, t.shift)
		}
		if _, err := xproto.GetInputFocus(c).Reply(); err != nil { // the server has handled the events
			return fmt.Errorf("typing: %w", err)
		}
		time.Sleep(typingPace)
	}
	return nil
}

func (t *typist) fake(c *xgb.Conn, event byte, code xproto.Keycode) {
	xtest.FakeInput(c, event, byte(code), 0, t.root, 0, 0, 0)
}

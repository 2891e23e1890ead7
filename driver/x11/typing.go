//go:build cgo

package x11

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"
)

// typingPace is the pause after each typed character: the anchor's rate (xdotool at
// 2 ms a character), against robotgo's 5 ms hold of every key. BENCHMARKS.md ("Typing
// as XTest events") has what 300 paths typed so into the test bed's chooser showed.
const typingPace = 2 * time.Millisecond

// xtestTyping readies c to type text as XTest key events on it (see typeKeys); it
// fails where the server lacks XTest.
func xtestTyping(c *xgb.Conn) error {
	if err := xtest.Init(c); err != nil {
		return fmt.Errorf("XTest: %w", err)
	}
	return nil
}

// errNoKey: a character of the text is on no key of the keyboard map.
var errNoKey = errors.New("not on the keyboard map")

// keyboard is the display's keyboard map as typeKeys uses it.
type keyboard struct {
	keys  map[rune]keyOnMap
	shift xproto.Keycode
	// spare is a key the map leaves empty (0: none), and perKey the keysyms a key has:
	// a character on no key is put on the spare key for its press (see typeKeys).
	spare  xproto.Keycode
	perKey int
}

// keyOnMap is a character's key: its keycode, and whether it needs Shift; or, for a
// character on no key (code 0), the keysym to put on the spare key.
type keyOnMap struct {
	code  xproto.Keycode
	shift bool
	sym   xproto.Keysym
}

// readKeyboard reads the keyboard map now (another client may have changed it since
// the last text).
func readKeyboard(c *xgb.Conn) (keyboard, error) {
	setup := xproto.Setup(c)
	first, last := setup.MinKeycode, setup.MaxKeycode
	m, err := xproto.GetKeyboardMapping(c, first, byte(last-first+1)).Reply()
	if err != nil {
		return keyboard{}, fmt.Errorf("reading the keyboard map: %w", err)
	}
	n := int(m.KeysymsPerKeycode)
	k := keyboard{keys: keysOnMap(first, n, m.Keysyms), perKey: n}
	for i := 0; n > 0 && (i+1)*n <= len(m.Keysyms); i++ {
		if m.Keysyms[i*n] == keysymShiftL && k.shift == 0 {
			k.shift = first + xproto.Keycode(i)
		}
	}
	// The last empty key: where xdotool puts a character it finds on no key.
	for i := len(m.Keysyms)/max(n, 1) - 1; n > 0 && i >= 0; i-- {
		if empty(m.Keysyms[i*n : (i+1)*n]) {
			k.spare = first + xproto.Keycode(i)
			break
		}
	}
	return k, nil
}

func empty(syms []xproto.Keysym) bool {
	for _, s := range syms {
		if s != 0 {
			return false
		}
	}
	return true
}

// keysymOf is the keysym that types r: its code for Latin-1, else 0x01000000 plus its
// code (X11's rule for every Unicode character).
func keysymOf(r rune) xproto.Keysym {
	if r >= 0x20 && r <= 0x7e || r >= 0xa0 && r <= 0xff {
		return xproto.Keysym(r)
	}
	return xproto.Keysym(0x01000000 | r)
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

// keysFor is the key of every character of text: its own key, else the spare key with
// the character's keysym put on it; or errNoKey naming the first character that has
// none (a control character, a character that needs Shift on a map without a Shift
// key, a character beyond ASCII on a map without an empty key).
func (k keyboard) keysFor(text string) ([]keyOnMap, error) {
	out := make([]keyOnMap, 0, len(text))
	for _, r := range text {
		key, ok := k.keys[r]
		switch {
		case ok && (!key.shift || k.shift != 0):
			out = append(out, key)
		case r >= 0xa0 && k.spare != 0 && k.perKey > 0 && r != 0xfffd:
			out = append(out, keyOnMap{sym: keysymOf(r)})
		default:
			return nil, fmt.Errorf("%q: %w", r, errNoKey)
		}
	}
	return out, nil
}

// typeKeys types the keys as XTest events on c: for each character its key pressed
// and released (with Shift where the keyboard map has the character on a key's second
// level), a checked request so that the server has handled them (and any error comes
// back), then typingPace. A character on no key is first put on the spare key (the
// server tells every client of the new map before the press it then sends, so the app
// reads the press with it), and the spare key is emptied again at the end. It stops
// between characters when ctx ends.
func typeKeys(ctx context.Context, c *xgb.Conn, root xproto.Window, k keyboard, keys []keyOnMap) (err error) {
	fake := func(event byte, code xproto.Keycode) {
		xtest.FakeInput(c, event, byte(code), 0, root, 0, 0, 0)
	}
	remap := func(sym xproto.Keysym) error {
		syms := make([]xproto.Keysym, k.perKey)
		for i := range syms {
			syms[i] = sym
		}
		return xproto.ChangeKeyboardMappingChecked(c, 1, k.spare, byte(k.perKey), syms).Check()
	}
	var mapped xproto.Keysym
	defer func() {
		if mapped != 0 {
			if rerr := remap(0); rerr != nil && err == nil {
				err = fmt.Errorf("emptying the spare key again: %w", rerr)
			}
		}
	}()
	for _, key := range keys {
		if err := ctx.Err(); err != nil {
			return err
		}
		if key.code == 0 {
			if key.sym != mapped {
				if err := remap(key.sym); err != nil {
					return fmt.Errorf("putting %#x on the spare key %d: %w", key.sym, k.spare, err)
				}
				mapped = key.sym
			}
			key.code = k.spare
		}
		if key.shift {
			fake(xproto.KeyPress, k.shift)
		}
		fake(xproto.KeyPress, key.code)
		last := key.code
		if key.shift {
			fake(xproto.KeyRelease, key.code)
			last = k.shift
		}
		// The last event checked: a round trip, so the server has handled them all.
		if err := xtest.FakeInputChecked(c, xproto.KeyRelease, byte(last), 0, root, 0, 0, 0).Check(); err != nil {
			return fmt.Errorf("typing: %w", err)
		}
		time.Sleep(typingPace)
	}
	return nil
}

// heldModifiers are the modifiers that change what a key types or does (NumLock,
// usually Mod2, changes only the keypad, which typing never uses).
const heldModifiers = xproto.KeyButMaskShift | xproto.KeyButMaskLock | xproto.KeyButMaskControl |
	xproto.KeyButMaskMod1 | xproto.KeyButMaskMod4 | xproto.KeyButMaskMod5

// ErrModifierHeld: a modifier is held or locked (CapsLock, a Shift or Ctrl key held
// down), so typed text would reach the app changed.
var ErrModifierHeld = errors.New("a modifier key is held or locked")

// modifiersClear fails with ErrModifierHeld while a modifier other than NumLock is
// held or locked.
func modifiersClear(c *xgb.Conn, root xproto.Window) error {
	p, err := xproto.QueryPointer(c, root).Reply()
	if err != nil {
		return fmt.Errorf("reading the keyboard's modifiers: %w", err)
	}
	if held := p.Mask & heldModifiers; held != 0 {
		return fmt.Errorf("%w (state %#x: CapsLock, Shift, Ctrl, Alt, Super or AltGr): typed text would reach the app changed; release or unlock it", ErrModifierHeld, held)
	}
	return nil
}

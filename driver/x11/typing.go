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
// 2 ms a character), against robotgo's 5 ms hold of every key. BENCHMARKS.md's typing
// rows have today's figures; docs/benchmarks-history.md ("Typing as XTest events", in
// the 2026-12-02 evening section) has what 300 paths typed so into the test bed's
// chooser showed.
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
	// spares are the keys free for the characters on no key: those the map leaves
	// empty, and those earlier typing put a character on (onSpare: which). perKey is
	// the keysyms a key has. Each such character gets a spare key of its own.
	spares  []xproto.Keycode
	onSpare map[xproto.Keysym]xproto.Keycode
	perKey  int
}

// keyOnMap is a character's key: its keycode, and whether it needs Shift; for a
// character on no key, sym is the keysym to put on that (spare) key first.
type keyOnMap struct {
	code  xproto.Keycode
	shift bool
	sym   xproto.Keysym
}

// readKeyboard reads the keyboard map now (another client may have changed it since
// the last text); ours are the keys earlier typing put characters on.
func readKeyboard(c *xgb.Conn, ours map[xproto.Keycode]bool) (keyboard, error) {
	setup := xproto.Setup(c)
	first, last := setup.MinKeycode, setup.MaxKeycode
	m, err := xproto.GetKeyboardMapping(c, first, byte(last-first+1)).Reply()
	if err != nil {
		return keyboard{}, fmt.Errorf("reading the keyboard map: %w", err)
	}
	n := int(m.KeysymsPerKeycode)
	k := keyboard{keys: keysOnMap(first, n, m.Keysyms), perKey: n, onSpare: map[xproto.Keysym]xproto.Keycode{}}
	for i := 0; n > 0 && (i+1)*n <= len(m.Keysyms); i++ {
		if m.Keysyms[i*n] == keysymShiftL && k.shift == 0 {
			k.shift = first + xproto.Keycode(i)
		}
	}
	// The empty keys, from the last: where xdotool puts a character it finds on no key.
	for i := len(m.Keysyms)/max(n, 1) - 1; n > 0 && i >= 0; i-- {
		code := first + xproto.Keycode(i)
		switch syms := m.Keysyms[i*n : (i+1)*n]; {
		case empty(syms):
			k.spares = append(k.spares, code)
		case ours[code]:
			k.spares = append(k.spares, code)
			k.onSpare[syms[0]] = code
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

// keysFor is the key of every character of text: its own key, else a spare key of its
// own with the character's keysym put on it; or errNoKey naming the first character
// that has none (a control character, a character that needs Shift on a map without a
// Shift key, more distinct characters beyond the map than it has empty keys).
func (k keyboard) keysFor(text string) ([]keyOnMap, error) {
	beyond := func(r rune) bool { return r >= 0xa0 && r != 0xfffd && k.perKey > 0 }
	// A character an earlier text left on a spare key keeps it; the others take the
	// free spare keys in turn.
	onKey, taken := map[rune]keyOnMap{}, map[xproto.Keycode]bool{}
	for _, r := range text {
		if _, ok := k.keys[r]; !ok && beyond(r) {
			if code, ok := k.onSpare[keysymOf(r)]; ok {
				onKey[r], taken[code] = keyOnMap{code: code}, true
			}
		}
	}
	out := make([]keyOnMap, 0, len(text))
	next := 0
	for _, r := range text {
		key, ok := k.keys[r]
		switch {
		case ok && (!key.shift || k.shift != 0):
			out = append(out, key)
		case !ok && beyond(r):
			if key, ok := onKey[r]; ok {
				out = append(out, key)
				continue
			}
			for next < len(k.spares) && taken[k.spares[next]] {
				next++
			}
			if next == len(k.spares) {
				return nil, fmt.Errorf("%q: %w (more characters beyond it than the %d empty keys)", r, errNoKey, len(k.spares))
			}
			key := keyOnMap{code: k.spares[next], sym: keysymOf(r)}
			onKey[r], taken[key.code] = keyOnMap{code: key.code}, true
			out = append(out, key)
		default:
			return nil, fmt.Errorf("%q: %w", r, errNoKey)
		}
	}
	return out, nil
}

// typeKeys types the keys as XTest events on c: for each character its key pressed
// and released (with Shift where the keyboard map has the character on a key's second
// level), a checked request so that the server has handled them (and any error comes
// back), then typingPace. The characters on no key are first put on spare keys, one
// each, all before the first press: the server tells every client of the new map
// before the presses it then sends, and a toolkit that looks a key up only when it
// gets to the press (Qt) finds the same map then. The spare keys stay mapped (they are
// no key a person presses) until mapped records them to be emptied, at Close. It stops
// between characters when ctx ends.
func typeKeys(ctx context.Context, c *xgb.Conn, root xproto.Window, k keyboard, keys []keyOnMap, mapped map[xproto.Keycode]bool) error {
	fake := func(event byte, code xproto.Keycode) {
		xtest.FakeInput(c, event, byte(code), 0, root, 0, 0, 0)
	}
	for _, key := range keys {
		if key.sym == 0 {
			continue
		}
		if err := putOnKey(c, key.code, key.sym, k.perKey); err != nil {
			return fmt.Errorf("putting %#x on the spare key %d: %w", key.sym, key.code, err)
		}
		mapped[key.code] = true
	}
	for _, key := range keys {
		if err := ctx.Err(); err != nil {
			return err
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

// putOnKey makes code type sym, at every level (0: no symbol).
func putOnKey(c *xgb.Conn, code xproto.Keycode, sym xproto.Keysym, perKey int) error {
	syms := make([]xproto.Keysym, perKey)
	for i := range syms {
		syms[i] = sym
	}
	return xproto.ChangeKeyboardMappingChecked(c, 1, code, byte(perKey), syms).Check()
}

// emptyKeys empties again the spare keys typing put characters on.
func emptyKeys(c *xgb.Conn, mapped map[xproto.Keycode]bool, perKey int) error {
	var errs []error
	for code := range mapped {
		errs = append(errs, putOnKey(c, code, 0, perKey))
		delete(mapped, code)
	}
	return errors.Join(errs...)
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

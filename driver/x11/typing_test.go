//go:build cgo

package x11

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/jezek/xgb/xproto"
)

// TestKeysOnMap: a character is typed with the first key that has it on its first
// level, else the first that has it on its second (with Shift); keysyms that are not
// printable ASCII (Shift_L, none) name no character.
func TestKeysOnMap(t *testing.T) {
	syms := []xproto.Keysym{
		'a', 'A', // keycode 8
		'1', '!', // 9
		'!', 0, // 10: '!' without Shift, preferred to 9's
		keysymShiftL, 0, // 11
		'a', 'A', // 12: the first key wins
		0xe9, 0xc9, // 13: é, É: not ASCII, robotgo types them
	}
	got := keysOnMap(8, 2, syms)
	want := map[rune]keyOnMap{'a': {code: 8}, 'A': {code: 8, shift: true}, '1': {code: 9}, '!': {code: 10}}
	if !maps.Equal(got, want) {
		t.Errorf("keysOnMap = %v; want %v", got, want)
	}
	if got := keysOnMap(8, 1, syms); len(got) != 0 {
		t.Errorf("one keysym a key (no second level): %v; want none", got)
	}
	if got, want := keysOnMap(8, 2, syms[:3]), map[rune]keyOnMap{'a': {code: 8}, 'A': {code: 8, shift: true}}; !maps.Equal(got, want) {
		t.Errorf("a map cut short within a key: %v; want only the whole key's %v", got, want)
	}
}

// TestKeysFor: every character of a text has its key, or the text is refused naming
// the first that has none, before any key is pressed; a character that needs Shift is
// refused on a map without a Shift key.
func TestKeysFor(t *testing.T) {
	k := keyboard{keys: map[rune]keyOnMap{'a': {code: 8}, 'A': {code: 8, shift: true}, '/': {code: 9}}, shift: 11}
	keys, err := k.keysFor("/aA")
	if err != nil || len(keys) != 3 || keys[2] != (keyOnMap{code: 8, shift: true}) {
		t.Errorf("keysFor(/aA) = %v, %v", keys, err)
	}
	for _, tc := range []struct {
		kb   keyboard
		text string
	}{
		{k, "/a\tA"},
		{k, "ab"},
		{keyboard{keys: k.keys}, "aA"},
	} {
		if keys, err := tc.kb.keysFor(tc.text); !errors.Is(err, errNoKey) || keys != nil {
			t.Errorf("keysFor(%q) = %v, %v; want errNoKey and no keys", tc.text, keys, err)
		}
	}
}

// TestKeysForBeyondASCII: each character on no key gets a spare key of its own, with
// its X11 keysym (Latin-1 its code, else 0x01000000 plus its code, emoji included); a
// character an earlier text left on a spare key keeps it; more distinct characters
// than spare keys, or a control character, are refused before any key is pressed.
func TestKeysForBeyondASCII(t *testing.T) {
	k := keyboard{keys: map[rune]keyOnMap{'a': {code: 8}}, shift: 11, spares: []xproto.Keycode{250, 249, 248}, perKey: 2,
		onSpare: map[xproto.Keysym]xproto.Keycode{0x01005f20: 249}}
	keys, err := k.keysFor("aé张🚀é")
	want := []keyOnMap{{code: 8}, {code: 250, sym: 0xe9}, {code: 249}, {code: 248, sym: 0x0101f680}, {code: 250}}
	if err != nil || !slices.Equal(keys, want) {
		t.Errorf("keysFor = %v, %v; want %v", keys, err, want)
	}
	if keys, err := k.keysFor("éü🚀ß"); !errors.Is(err, errNoKey) || keys != nil {
		t.Errorf("more characters than spare keys: keysFor = %v, %v; want errNoKey", keys, err)
	}
	if _, err := k.keysFor("a\u0085"); !errors.Is(err, errNoKey) {
		t.Errorf("a control character beyond ASCII: %v; want errNoKey", err)
	}
}

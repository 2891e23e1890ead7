package evidence

import "strings"

// harmlessKeys are the keys that cannot submit anything, on any page: they leave, move
// the caret or the focus, or select. Anything else (Return, Enter, Space on a focused
// button, a mnemonic, an app's own shortcut) may submit what a send page holds.
var harmlessKeys = set("escape", "esc", "tab", "shift+tab", "home", "end", "left", "right",
	"up", "down", "page_up", "page_down", "prior", "next", "shift+home", "shift+end",
	"ctrl+home", "ctrl+end", "backspace", "delete", "ctrl+a", "ctrl+l")

// pasteKeys paste the clipboard, which may hold a file: what follows may send it.
var pasteKeys = set("ctrl+v", "shift+insert", "ctrl+shift+v", "xf86paste")

// CouldSubmit says how an input could submit what a send page holds, or "" when it
// cannot. It judges the input by what it is, whatever the class of the step that sent
// it: a click (anywhere: the record keeps no window), a key that is not known to be
// harmless, typed text (kept as its length only, so it may hold a line break), or a typed
// path holding a line break.
func CouldSubmit(in Input) string {
	switch in.Kind {
	case "click":
		return "a click"
	case "key":
		if !harmlessKeys[normalKeys(in.Keys)] {
			return "the key " + in.Keys
		}
	case "type_text":
		return "typed text (kept as its length only: it may hold a line break)"
	case "type_path":
		if strings.ContainsAny(in.Path, "\r\n") {
			return "a typed path holding a line break"
		}
	}
	return ""
}

// pastes says whether a key input pastes the clipboard (which may hold a file) in any
// of its chords ("ctrl+a ctrl+v" pastes).
func pastes(in Input) bool {
	if in.Kind != "key" {
		return false
	}
	for _, chord := range strings.Fields(in.Keys) {
		if pasteKeys[normalKeys(chord)] {
			return true
		}
	}
	return false
}

// normalKeys is a key or chord as the tables spell it: lower case, "control" as "ctrl".
func normalKeys(k string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(k)), "control", "ctrl")
}

package driver

import (
	"path"
	"strings"
	"unicode"

	"golang.org/x/text/width"
)

// How a profile proves, before the send, that the send page holds exactly one item,
// ours (SendPageProof).
const (
	ProofName       = "name"       // the send page shows the file's name (and size)
	ProofDifference = "difference" // none before choose_file, exactly one after (ItemMark)
	ProofTypedPath  = "typed_path" // no send page: the chooser's typed path is checked, and choosing sends
)

// SendPageProof says how the profile proves, for a file of this name, that the send
// page holds exactly one item, ours; "" when it cannot (deliver then refuses the file
// before the claim).
func (p *Profile) SendPageProof(fileName string) string {
	if p.ChoosingSends() {
		return ProofTypedPath
	}
	if p.namesShown(fileName) {
		return ProofName
	}
	if p.ItemMark != "" {
		return ProofDifference
	}
	return ""
}

// textCells is how many character cells s takes on screen: two for a wide or
// full-width character (CJK, most emoji, and a character an emoji presentation
// selector U+FE0F makes an emoji: "❤️"), none for a combining mark, one for others.
func textCells(s string) int {
	n, last := 0, 0 // last: the cells of the character before
	for _, r := range s {
		switch kind := width.LookupRune(r).Kind(); {
		case r == '\ufe0f': // emoji presentation: a narrow character before it is drawn two cells wide
			if last == 1 {
				n++
			}
			last = 2
		case unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r) || r == '\u200d' || unicode.Is(unicode.Variation_Selector, r):
		case kind == width.EastAsianWide || kind == width.EastAsianFullwidth:
			n, last = n+2, 2
		default:
			n, last = n+1, 1
		}
	}
	return n
}

func (p *Profile) namesShown(fileName string) bool {
	if p.NameShownChars > 0 && textCells(path.Base(fileName)) > p.NameShownChars {
		return false
	}
	if len(p.NamesShownFor) == 0 {
		return true
	}
	base := strings.ToLower(path.Base(fileName))
	for _, pat := range p.NamesShownFor {
		if ok, _ := path.Match(strings.ToLower(pat), base); ok {
			return true
		}
	}
	return false
}

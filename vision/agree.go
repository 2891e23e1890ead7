package vision

import (
	"fmt"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// Verdict is what a cross-check of an app's own text (read from its accessibility
// tree) against OCR of the screen where that text shows found.
type Verdict string

const (
	// Agree: OCR reads the text, as far as OCR can tell characters apart.
	Agree Verdict = "agree"
	// Disagree: OCR reads something else there, or nothing (the text is blank or covered
	// on the screen). The app's word alone does not count.
	Disagree Verdict = "disagree"
	// OCRCannotRead: the text is in a script none of the OCR languages reads; the app's
	// word is the only source.
	OCRCannotRead Verdict = "ocr_cannot_read"
)

// CrossCheck is one cross-check: the app's text, what OCR read where it shows, and the
// verdict with its reason.
type CrossCheck struct {
	Exact   string  `json:"exact"`
	Read    string  `json:"read"`
	Verdict Verdict `json:"verdict"`
	Why     string  `json:"why,omitempty"`
}

// Check judges what OCR in langs read (read) where the app says exact shows. The rule,
// kept narrow on purpose, since a tolerance that accepts anything is no cross-check:
//
//   - White space is OCR's, not the text's: it is left out of both.
//   - Each character of exact must be read as itself, or as a character OCR draws the
//     same way: 1 l I | ! i; 0 O o D Q; 5 S s; 8 B; 2 Z z; c e; the letters whose capital
//     has the small letter's shape (c o s v w x z); a Cyrillic or Greek letter drawn as a
//     Latin one (В and B, о and o); the letter without its accent (ë as e); full-width
//     forms as their ASCII; dashes, quotes and a full stop read as a comma; and "m" read
//     as "rn" (or back), "w" as "vv", "d" as "cl".
//   - A symbol OCR does not read (an emoji, with its joiners and variation selectors)
//     may be read as at most two characters of anything, or as nothing.
//   - A read that ends in an ellipsis is a text the app cut short on screen: what shows
//     (three characters at least) must be the start of exact.
//
// Anything else (another letter of the same script, a character lost, added or moved)
// disagrees. Exact in a script the languages do not read is OCRCannotRead.
func Check(exact, read string, langs Languages) CrossCheck {
	c := CrossCheck{Exact: exact, Read: read}
	switch script := langs.Unreadable(exact); {
	case script != "":
		c.Verdict, c.Why = OCRCannotRead, fmt.Sprintf("the text is in %s, which the OCR languages %s do not read", script, langs)
	case strings.TrimSpace(read) == "":
		c.Verdict, c.Why = Disagree, "OCR read nothing where the text should show: blank, covered or off screen"
	case Agrees(exact, read):
		c.Verdict = Agree
	default:
		c.Verdict, c.Why = Disagree, fmt.Sprintf("OCR reads %q where the app says %q", read, exact)
	}
	return c
}

// CheckAmong is Check where the place OCR read may hold more than the text (a tab's
// icon and its close button, a row's other labels): the text agrees when OCR's read
// does, or a run of its words, whole words only ("Bob" in "Bob x", never in "Bobby").
func CheckAmong(exact string, words []string, langs Languages) CrossCheck {
	c := Check(exact, strings.Join(words, " "), langs)
	if c.Verdict != Disagree {
		return c
	}
	for i := range words {
		for j := i + 1; j <= len(words); j++ {
			if Agrees(exact, strings.Join(words[i:j], " ")) {
				c.Verdict, c.Why = Agree, ""
				return c
			}
		}
	}
	return c
}

// Agrees reports whether OCR's read can be exact, by Check's rule (languages aside).
func Agrees(exact, read string) bool {
	e := []rune(withoutSpace(norm.NFC.String(exact)))
	r := []rune(withoutSpace(norm.NFC.String(read)))
	cut := false
	for _, ell := range []string{"…", "..."} {
		if rs := string(r); strings.HasSuffix(rs, ell) && len(r) > len([]rune(ell)) {
			r, cut = []rune(strings.TrimSuffix(rs, ell)), true
			break
		}
	}
	if cut && len(r) < 3 {
		return false
	}
	m := matcher{exact: e, read: r, prefix: cut, seen: map[[2]int]bool{}}
	return len(e) > 0 && m.match(0, 0)
}

func withoutSpace(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}

// matcher walks exact and read together; seen holds the positions already found not
// to match (each pair is tried once, so a read costs at most len(exact)×len(read)).
type matcher struct {
	exact, read []rune
	prefix      bool // read may stop before exact ends (a text cut short)
	seen        map[[2]int]bool
}

func (m *matcher) match(i, j int) bool {
	if i == len(m.exact) {
		return j == len(m.read)
	}
	if j == len(m.read) && m.prefix {
		return true
	}
	if m.seen[[2]int{i, j}] {
		return false
	}
	m.seen[[2]int{i, j}] = true
	e := m.exact[i]
	if unreadSymbol(e) {
		for n := 0; n <= 2 && j+n <= len(m.read); n++ {
			if m.match(i+1, j+n) {
				return true
			}
		}
		return false
	}
	if j < len(m.read) && sameShape(e, m.read[j]) && m.match(i+1, j+1) {
		return true
	}
	// Two characters read as one, or one as two.
	for _, p := range pairs {
		if i+1 < len(m.exact) && string(m.exact[i:i+2]) == p[1] && j < len(m.read) && m.read[j] == []rune(p[0])[0] && m.match(i+2, j+1) {
			return true
		}
		if e == []rune(p[0])[0] && j+1 < len(m.read) && string(m.read[j:j+2]) == p[1] && m.match(i+1, j+2) {
			return true
		}
	}
	return false
}

// pairs are one character that OCR reads as two, and back.
var pairs = [][2]string{{"m", "rn"}, {"m", "nn"}, {"w", "vv"}, {"d", "cl"}}

// unreadSymbol: a character OCR reads as nothing useful (an emoji, a pictograph, the
// joiners and selectors that compose them).
func unreadSymbol(r rune) bool {
	return unicode.In(r, unicode.So, unicode.Sk, unicode.Cs, unicode.Co, unicode.Variation_Selector) || r == '\u200d'
}

// sameShape: OCR can read want as got.
func sameShape(want, got rune) bool {
	if want == got {
		return true
	}
	w, g := shapeOf(want), shapeOf(got)
	return w == g
}

// shapeOf maps a character to one of the class of characters drawn alike.
func shapeOf(r rune) rune {
	if r >= 0xFF01 && r <= 0xFF5E { // full-width forms
		r -= 0xFF01 - 0x21
	}
	if d := norm.NFD.String(string(r)); len([]rune(d)) > 1 && unicode.IsLetter([]rune(d)[0]) {
		r = []rune(d)[0] // the letter without its accent
	}
	if h, ok := homoglyphs[r]; ok {
		r = h
	}
	if s, ok := shapes[r]; ok {
		return s
	}
	return r
}

// homoglyphs are Cyrillic and Greek letters drawn as a Latin one.
var homoglyphs = map[rune]rune{
	'А': 'A', 'В': 'B', 'Е': 'E', 'К': 'K', 'М': 'M', 'Н': 'H', 'О': 'O', 'Р': 'P', 'С': 'C', 'Т': 'T', 'Х': 'X', 'Ѕ': 'S', 'І': 'I', 'Ј': 'J',
	'а': 'a', 'е': 'e', 'о': 'o', 'р': 'p', 'с': 'c', 'у': 'y', 'х': 'x', 'ѕ': 's', 'і': 'i', 'ј': 'j',
	'Α': 'A', 'Β': 'B', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H', 'Ι': 'I', 'Κ': 'K', 'Μ': 'M', 'Ν': 'N', 'Ο': 'O', 'Ρ': 'P', 'Τ': 'T', 'Υ': 'Y', 'Χ': 'X',
	'ο': 'o', 'ν': 'v',
}

// shapes folds each class of characters OCR confuses into one of them.
var shapes = func() map[rune]rune {
	classes := []string{
		"1lI|!i", "0OoDQ", "5Ss", "8B", "2Zz", "ceC", "vV", "wW", "xX", "uU",
		"-‐‑‒–—−", "'’‘`´", "\"“”„", ".,",
	}
	m := map[rune]rune{}
	for _, c := range classes {
		rs := []rune(c)
		for _, r := range rs {
			m[r] = rs[0]
		}
	}
	return m
}()

package evidence

import (
	"math"
	"strconv"
	"strings"
)

// ParseDisplayedSize reads a file size as a chat app displays it ("17 B", "17 bytes",
// "1.2 kB", "3,4 MiB") and returns the bytes and how far the true size may be from it
// given the digits shown. ok is false for text that is not a size.
func ParseDisplayedSize(s string) (bytes, tolerance float64, ok bool) {
	s = strings.TrimSpace(strings.ReplaceAll(s, "\u00a0", " "))
	i := strings.IndexFunc(s, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.' || r == ',') })
	if i <= 0 {
		return 0, 0, false
	}
	num, unit := strings.ReplaceAll(s[:i], ",", "."), strings.ToLower(strings.TrimSpace(s[i:]))
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, 0, false
	}
	decimals := 0
	if j := strings.IndexByte(num, '.'); j >= 0 {
		decimals = len(num) - j - 1
	}
	var mult float64
	switch unit {
	case "b", "byte", "bytes":
		mult = 1
	case "kb", "kib":
		mult = 1024
	case "mb", "mib":
		mult = 1 << 20
	case "gb", "gib":
		mult = 1 << 30
	default:
		return 0, 0, false
	}
	if unit == "kb" || unit == "mb" || unit == "gb" {
		mult = math.Pow(1000, float64(strings.Index("kmg", unit[:1])+1))
	}
	half := 0.5 * math.Pow(10, -float64(decimals)) * mult
	if mult == 1 {
		half = 0
	}
	return v * mult, half, true
}

// SizeMatches reports whether a displayed size can be the size of a file of n bytes.
// An empty display (the app shows no size) matches.
func SizeMatches(displayed string, n int64) bool {
	if displayed == "" {
		return true
	}
	v, tol, ok := ParseDisplayedSize(displayed)
	if !ok {
		return false
	}
	// Apps round either way (and some mix 1000 and 1024): allow the display's precision
	// in both unit systems.
	if math.Abs(v-float64(n)) <= tol {
		return true
	}
	if tol > 0 {
		alt := v / 1000 * 1024
		if strings.Contains(strings.ToLower(displayed), "i") {
			alt = v / 1024 * 1000
		}
		return math.Abs(alt-float64(n)) <= tol*1.03
	}
	return false
}

// NameMatches reports whether a file name read by OCR can be the expected name: equal
// once the characters OCR confuses are folded together (1 l I |, 0 O o, 5 S, 8 B,
// rn m). A name cut short or with any other difference does not match.
func NameMatches(read, expected string) bool {
	if read == expected {
		return true
	}
	return read != "" && foldConfusables(read) == foldConfusables(expected)
}

// PathMatches reports whether a path read back by OCR, character by character, can be
// the path typed: the same number of characters, each equal to the one typed or one OCR
// reads in its place (1 as l I | ! i, 0 as O o D Q, 5 as S s, 8 as B s S, 2 as Z z, c
// as e, and back). A character lost, added or moved never matches; unlike NameMatches no two
// characters read as one ("rn" for "m").
func PathMatches(read, typed string) bool {
	r, t := []rune(read), []rune(typed)
	if len(r) != len(t) {
		return false
	}
	for i := range r {
		if r[i] != t[i] && !ocrConfuses(r[i], t[i]) && !ocrConfuses(t[i], r[i]) {
			return false
		}
	}
	return true
}

// ocrConfuses says whether OCR reads character want as got.
func ocrConfuses(got, want rune) bool {
	switch want {
	case '1':
		return strings.ContainsRune("lI|!i", got)
	case '0':
		return strings.ContainsRune("OoDQ", got)
	case '5':
		return strings.ContainsRune("Ss", got)
	case '8':
		return strings.ContainsRune("BsS", got)
	case '2':
		return strings.ContainsRune("Zz", got)
	case 'c':
		return got == 'e'
	}
	return false
}

func foldConfusables(s string) string {
	// Fonts draw "fi" and "fl" as ligatures, which OCR reads as "fhi", "h" or splits
	// with a space; spaces inside a name are OCR's, never the font's, for this purpose.
	s = strings.NewReplacer(" ", "", "\ufb01", "fi", "\ufb02", "fl", "fhi", "fi", "fhl", "fl").Replace(s)
	s = strings.NewReplacer("fi", "hi", "fl", "hl").Replace(s) // the ligature also reads as "hi" alone
	s = strings.ReplaceAll(s, "rn", "m")
	return strings.Map(func(r rune) rune {
		switch r {
		case 'l', 'I', '|', '!', 'i':
			return '1'
		case 'O', 'o', 'Q', 'D':
			return '0'
		case 'S', 's':
			return '5'
		case 'B':
			return '8'
		case 'Z', 'z':
			return '2'
		}
		return r
	}, s)
}

package vision

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Languages are the OCR languages a read uses, in Tesseract's names ("eng",
// "chi_sim", "rus"): what the user writes is read only when its script is among them.
type Languages []string

// DefaultLanguages is English alone: what reads when nothing else is configured.
var DefaultLanguages = Languages{"eng"}

var languageName = regexp.MustCompile(`^[a-z]{3}(_[a-z]{3,5})?$`)

// ParseLanguages reads a language list as Tesseract writes it: names joined by "+"
// ("eng+chi_sim").
func ParseLanguages(s string) (Languages, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("no OCR language given: name at least one, as Tesseract does (eng, or eng+chi_sim)")
	}
	var out Languages
	for _, l := range strings.Split(s, "+") {
		if !languageName.MatchString(l) {
			return nil, fmt.Errorf("OCR language %q: a language is Tesseract's name for it, lower case (eng, chi_sim, rus), several joined by + (eng+chi_sim)", l)
		}
		for _, seen := range out {
			if seen == l {
				return nil, fmt.Errorf("OCR language %q is named twice in %q", l, s)
			}
		}
		out = append(out, l)
	}
	return out, nil
}

// String is the list as Tesseract takes it: "eng+chi_sim".
func (ls Languages) String() string { return strings.Join(ls, "+") }

// Package is the Debian package that installs Tesseract's data for lang.
func Package(lang string) string {
	return "tesseract-ocr-" + strings.ReplaceAll(lang, "_", "-")
}

// scriptLanguages says which of Tesseract's languages read each script other than
// Latin (which every language named here reads, since they all read Latin letters
// and digits too, as Tesseract's models do).
var scriptLanguages = []struct {
	script *unicode.RangeTable
	name   string
	langs  []string
}{
	{unicode.Han, "Han (Chinese characters)", []string{"chi_sim", "chi_tra", "chi_sim_vert", "chi_tra_vert", "jpn", "kor"}},
	{unicode.Hiragana, "Hiragana", []string{"jpn"}},
	{unicode.Katakana, "Katakana", []string{"jpn"}},
	{unicode.Hangul, "Hangul", []string{"kor"}},
	{unicode.Cyrillic, "Cyrillic", []string{"rus", "ukr", "bel", "bul", "srp", "mkd", "kaz", "kir", "mon", "tgk", "tat", "uzb_cyrl", "aze_cyrl"}},
	{unicode.Greek, "Greek", []string{"ell", "grc"}},
	{unicode.Arabic, "Arabic", []string{"ara", "fas", "urd", "pus", "snd", "uig"}},
	{unicode.Hebrew, "Hebrew", []string{"heb", "yid"}},
	{unicode.Devanagari, "Devanagari", []string{"hin", "mar", "nep", "san"}},
	{unicode.Thai, "Thai", []string{"tha"}},
}

// Unreadable names the first script in text that none of the languages reads ("" when
// OCR in ls can read every letter of it). Symbols such as emoji are no script: OCR
// reads none of them, and Readable's comparison leaves them out.
func (ls Languages) Unreadable(text string) string {
	for _, r := range text {
		for _, s := range scriptLanguages {
			if !unicode.Is(s.script, r) {
				continue
			}
			if !ls.anyOf(s.langs) {
				return s.name
			}
			break
		}
	}
	return ""
}

func (ls Languages) anyOf(langs []string) bool {
	for _, l := range ls {
		for _, m := range langs {
			if l == m {
				return true
			}
		}
	}
	return false
}

package vision

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestCheck(t *testing.T) {
	eng := Languages{"eng"}
	engZh := Languages{"eng", "chi_sim"}
	engRu := Languages{"eng", "rus"}
	for _, c := range []struct {
		exact, read string
		langs       Languages
		want        Verdict
	}{
		// What OCR gets wrong and the rule forgives.
		{"Bob", "Bob", eng, Agree},
		{"report-1796.txt", "report-l796.txt", eng, Agree},
		{"report-1796.txt", "rep0rt—1796,txt", eng, Agree},
		{"summary.txt", "surnrnary.txt", eng, Agree},
		{"Zoë 🚀 notes.txt", "Zoë @ notes.txt", eng, Agree},
		{"Zoë 🚀 notes.txt", "Zoe notes.txt", eng, Agree},
		{"Add Files…", "Add Files...", eng, Agree},
		{"a very long file name.txt", "a very long fi…", eng, Agree},
		{"张伟", "张伟", engZh, Agree},
		{"报告-第三季度.pdf", "报告－第三季度.pdf", engZh, Agree},
		{"Воb", "Bob", engRu, Agree}, // OCR cannot tell them apart: the tree decides
		// Wrong names of the same length and script: refused.
		{"Bob", "Rob", eng, Disagree},
		{"Alice", "Alise", eng, Disagree},
		{"report-1.txt", "report-7.txt", eng, Disagree},
		{"张伟", "张玮", engZh, Disagree},
		{"Зоя", "Зоб", engRu, Disagree},
		{"Zoë 🚀 notes.txt", "Zoa notes.txt", eng, Disagree},
		// Lost, added, moved characters.
		{"Bob", "Bo", eng, Disagree},
		{"Bob", "Bobb", eng, Disagree},
		{"ab.txt", "ba.txt", eng, Disagree},
		{"Bob", "", eng, Disagree},   // blank or covered: the node does not count
		{"Bob", "B…", eng, Disagree}, // too little shows to say
		{"a very long file name.txt", "a very short…", eng, Disagree},
		// A script the languages do not read.
		{"张伟", "", eng, OCRCannotRead},
		{"Воb", "Bob", eng, OCRCannotRead},
	} {
		got := Check(c.exact, c.read, c.langs)
		if got.Verdict != c.want {
			t.Errorf("Check(%q, %q, %s) = %s (%s), want %s", c.exact, c.read, c.langs, got.Verdict, got.Why, c.want)
		}
		if got.Verdict != Agree && got.Why == "" {
			t.Errorf("Check(%q, %q): %s says no reason", c.exact, c.read, got.Verdict)
		}
	}
}

// TestCheckAmong: the text may show among other words (a tab's close button, an icon
// read as a character), as whole words only.
func TestCheckAmong(t *testing.T) {
	eng, engZh := Languages{"eng"}, Languages{"eng", "chi_sim"}
	for _, c := range []struct {
		exact string
		read  []string
		langs Languages
		want  Verdict
	}{
		{"Bob", []string{"Bob", "x"}, eng, Agree},
		{"Bob", []string{"@", "Bob", "x", "|"}, eng, Agree},
		{"张伟", []string{"|", "会", "张", "伟"}, engZh, Agree},
		{"Bob Smith", []string{"Bob", "Smith", "x"}, eng, Agree},
		{"Bob", []string{"Bobby", "x"}, eng, Disagree},
		{"Bob", []string{"Rob", "x"}, eng, Disagree},
		{"张伟", []string{"张", "玮", "x"}, engZh, Disagree},
		{"Bob", nil, eng, Disagree},
		{"张伟", []string{"x"}, eng, OCRCannotRead},
	} {
		if got := CheckAmong(c.exact, c.read, c.langs); got.Verdict != c.want {
			t.Errorf("CheckAmong(%q, %q) = %s (%s); want %s", c.exact, c.read, got.Verdict, got.Why, c.want)
		}
	}
}

func TestParseLanguages(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"eng", "eng", ""},
		{"eng+chi_sim", "eng+chi_sim", ""},
		{"", "", "no OCR language"},
		{"eng+", "", `OCR language ""`},
		{"English", "", `"English"`},
		{"eng+eng", "", "named twice"},
		{"eng,rus", "", `"eng,rus"`},
	} {
		got, err := ParseLanguages(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseLanguages(%q) = %v, %v; want an error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got.String() != c.want {
			t.Errorf("ParseLanguages(%q) = %v, %v; want %s", c.in, got, err, c.want)
		}
	}
	if p := Package("chi_sim"); p != "tesseract-ocr-chi-sim" {
		t.Errorf("Package(chi_sim) = %s", p)
	}
}

// FuzzAgrees: a text always agrees with itself, and never with itself with one letter
// replaced by a letter of another shape (the same script or not).
func FuzzAgrees(f *testing.F) {
	for _, s := range []string{"Bob", "报告-第三季度.pdf", "Zoë 🚀 notes.txt", "Воb", "summary"} {
		f.Add(s, 0, 'x')
	}
	f.Fuzz(func(t *testing.T, s string, at int, with rune) {
		if !utf8.ValidString(s) || len(s) > 64 {
			return
		}
		if strings.TrimSpace(s) != "" && !Agrees(s, s) && hasLetter(s) {
			t.Fatalf("%q does not agree with itself", s)
		}
		rs := []rune(s)
		if len(rs) == 0 || !unicode.IsLetter(with) || !utf8.ValidRune(with) {
			return
		}
		at = (at%len(rs) + len(rs)) % len(rs)
		old := rs[at]
		if !unicode.IsLetter(old) || shapeOf(old) == shapeOf(with) || inPair(rs, at) || inPair([]rune{with}, 0) {
			return
		}
		rs[at] = with
		if Agrees(s, string(rs)) {
			t.Fatalf("%q agrees with %q (letter %d %q read as %q)", s, string(rs), at, old, with)
		}
	})
}

func hasLetter(s string) bool {
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return true
		}
	}
	return false
}

// inPair: the letter at i takes part in a two-for-one reading (rn for m), where a
// replaced letter can still agree.
func inPair(rs []rune, i int) bool {
	return strings.ContainsRune("mrnwvdcl", rs[i])
}

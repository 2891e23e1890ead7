package gate

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestNameCaps: a title or a destination id longer than its cap is refused where it is
// parsed (so before anything is claimed), and the refusal shows only a prefix of it and
// its length; one at the cap is taken.
func TestNameCaps(t *testing.T) {
	long := strings.Repeat("x", 100_000)
	for _, tc := range []struct {
		name  string
		parse func() error
		ok    bool
		says  string
	}{
		{"title at the cap", func() error { _, err := Title(strings.Repeat("é", MaxTitle)); return err }, true, ""},
		{"title one over", func() error { _, err := Title(strings.Repeat("é", MaxTitle+1)); return err }, false, "(257 characters)"},
		{"title of 100,000", func() error { _, err := Title(long); return err }, false, "is 100000 characters long; at most 256"},
		{"v1 title of 100,000", func() error { _, err := titleV1(long); return err }, false, "(100000 characters)"},
		{"xmpp id at the cap", func() error {
			_, err := ProviderID("xmpp:" + strings.Repeat("a", 1023) + "@" + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63))
			return err
		}, true, ""},
		{"xmpp id of 100,000", func() error { _, err := ProviderID("xmpp:bob@" + long); return err }, false, "at most 2047 are allowed"},
		{"matrix id of 100,000", func() error { _, err := ProviderID("matrix:@bob:" + long); return err }, false, "at most 2047 are allowed"},
		{"no namespace, 100,000", func() error { _, err := ProviderID(long); return err }, false, "must be NAMESPACE:ID"},
		{"unknown namespace of 100,000", func() error { _, err := ProviderID(long + ":bob"); return err }, false, "(100000 characters)"},
		{"key of 100,000", func() error { _, err := ParseKey("v2:title:" + long + ":" + strings.Repeat("0", 64)); return err }, false, "characters)"},
	} {
		err := tc.parse()
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v; want it taken", tc.name, err)
		case !tc.ok && err == nil:
			t.Errorf("%s: taken; want it refused", tc.name)
		case !tc.ok:
			if msg := err.Error(); len(msg) > 400 || !strings.Contains(msg, tc.says) || !isInvalid(err) {
				t.Errorf("%s: %d bytes: %.400s; want bad input under 400 bytes saying %q", tc.name, len(msg), msg, tc.says)
			}
		}
	}
}

func isInvalid(err error) bool { return errors.Is(err, ErrInvalid) }

// TestQuote: a short value whole, a long one as its first 40 characters (not bytes:
// never a cut rune) and its length.
func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Bob", `"Bob"`},
		{strings.Repeat("a", 40), `"` + strings.Repeat("a", 40) + `"`},
		{strings.Repeat("a", 41), `"` + strings.Repeat("a", 40) + `"… (41 characters)`},
		{strings.Repeat("日", 100), `"` + strings.Repeat("日", 40) + `"… (100 characters)`},
	} {
		got := Quote(tc.in)
		if got != tc.want || !utf8.ValidString(got) {
			t.Errorf("Quote(%.20q…) = %s; want %s", tc.in, got, tc.want)
		}
	}
}

package replay

import (
	"image"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/vision"
)

// TestReplaceTyped: the recorded path reads as this run's wherever OCR read it as the
// recording typed it (split into words, a cursor after it, OCR's 0/O folded); a reading
// that is not the recorded path is left alone.
func TestReplaceTyped(t *testing.T) {
	const recorded, shown = "/tmp/a/0f3c/x.txt", "/run/b/77aa/x.txt"
	for _, tc := range []struct {
		read, want string
	}{
		{"/tmp/a/0f3c/x.txt", shown},
		{"/tmp/a/ 0f3c/x.txt|", shown + "|"},
		{"Open /tmp/a/O f3c/x.txt", "Open " + shown},
		{"/tmp/a/0f3/x.txt", "/tmp/a/0f3/x.txt"},     // a character short: not the recorded path
		{"/tmp/a/0f3cc/x.txt", "/tmp/a/0f3cc/x.txt"}, // one more, not at the end
		{"Cancel Open", "Cancel Open"},
	} {
		var ws []vision.Word
		for i, s := range strings.Fields(tc.read) {
			ws = append(ws, vision.Word{Text: s, Box: image.Rect(10+i*100, 5, 90+i*100, 20), Line: 1})
		}
		var got []string
		for _, w := range replaceTyped(ws, recorded, shown) {
			got = append(got, w.Text)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%q reads as %q; want %q", tc.read, strings.Join(got, " "), tc.want)
		}
	}
	// "m" for "rn": a file name's match folds it, the live read-back does not, so the
	// replay does not replace it either.
	ws := []vision.Word{{Text: "/tmp/a/m/x.txt", Box: image.Rect(10, 5, 90, 20), Line: 1}}
	if got := replaceTyped(ws, "/tmp/a/rn/x.txt", shown); got[0].Text != "/tmp/a/m/x.txt" {
		t.Errorf("a misread the live check rejects was replaced: %q", got[0].Text)
	}
}

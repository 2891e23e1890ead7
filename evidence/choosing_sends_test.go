package evidence

import (
	"path/filepath"
	"testing"

	"github.com/sendonce/sendonce/gate"
)

// TestChoosingSends: an app whose choosing of the file sends it crosses choose_file and
// send for its one submit step, and what is read after that step is after the send: our
// new finished item held for the settle time confirms it; without the reads after it,
// the outcome is unknown, never not_sent.
func TestChoosingSends(t *testing.T) {
	upTo := []Record{
		items("before_send"), title("Bob"),
		step("open picker", Safe), result(3, ""),
		step("choose the file (it sends)", Submit), crossed("choose_file"), crossed("send"), result(5, ""),
	}
	for _, tc := range []struct {
		name string
		recs []Record
		want gate.Outcome
	}{
		{"seen after", append(append([]Record{}, upTo...), seen(report)...), gate.SentVerified},
		{"not read after", append(append([]Record{}, upTo...), final()...), gate.SendStatusUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "bundle")
			flow(true, tc.recs...)(t, dir)
			b, err := Verify(dir, VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := ClassifyBundle(b); got.Outcome != tc.want {
				t.Fatalf("%s; want %s\n%v", got.Outcome, tc.want, got.Reasons)
			}
		})
	}
}

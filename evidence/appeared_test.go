package evidence

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/gate"
)

// Issue 43, item 6: an item of ours that appears in the reads, new beside the chat as
// it was before anything could submit, is side-effect evidence whatever the phase,
// order, record or step class it comes with: it may make the outcome unknown or
// confirmed, never not_sent, and the classification lists it and says it counted.
// Each case below was classified not_sent before the change.

// unnamed is a finished item of ours whose name could not be read.
var unnamed = Item{Y: 400, Ours: true, Finished: true}

// dismissed is the way to a stop before any crossing, after the chat's first read:
// the gate asked at the picker, the picker opened and dismissed with Escape.
func dismissed(first int) []Record {
	return []Record{title("Bob"), checked("open_picker"), step("open picker", Safe), result(first+2, ""),
		withInputs(step("dismiss", Safe), KeyInput("Escape")), result(first+4, "")}
}

// carrying is rec with an observation of the chat showing items, whatever its kind.
func carrying(rec Record, phase string, it ...Item) Record {
	rec.Observed = items(phase, it...).Observed
	return rec
}

func onObservation(what string, it ...Item) Record {
	return Record{Kind: KindObserve, Observed: &Observation{What: what, DispatchID: testDispatch, Title: "Bob", Items: it}}
}

func appearedCases() []struct {
	name string
	recs []Record
	// seq is the record whose read must be listed as showing a new item of ours.
	seq int
} {
	return []struct {
		name string
		recs []Record
		seq  int
	}{
		// The chat's first read showed a peer's item named like the file; at the end the
		// view shows our item in its place (the peer's scrolled off the top). Counted by
		// name alone, one before and one after: nothing new.
		{"ours in the place of a peer's item", cat([]Record{items("before_send", theirs)}, dismissed(1), final(report)), 8},
		// An item of ours whose name could not be read is still an item of ours.
		{"ours with its name unread", cat([]Record{items("before_send")}, dismissed(1), final(unnamed)), 8},
		// A read before anything acted showed no item; the first before_send read, after
		// a step that could submit, shows ours: it is no baseline for the chat as it was.
		{"first before_send read after a step, an earlier read shows less", cat([]Record{items("final"), step("open the chat", Safe), result(2, ""), items("before_send", report)}, dismissed(4), final(report)), 4},
		// The first before_send read comes after the file's path was typed: the file may
		// be attached, so that read is no baseline.
		{"first before_send read after the path was typed", cat([]Record{title("Bob"), checked("open_picker"), step("open picker", Safe), result(3, ""),
			withInputs(step("type the path", Safe), TypedPath("/tmp/report.txt")), result(5, ""), items("before_send", report)}, final(report)), 7},
		// The first before_send read was made for another dispatch: it is no baseline for
		// this one.
		{"first read made for another dispatch", cat([]Record{step("open the chat", Safe), result(1, ""), itemsFor("0000another", "before_send", report)}, dismissed(3), final(report)), 3},
		// Our item shown in a read carried on a result (then withdrawn: the final read
		// shows nothing). A record's kind does not hide what it read.
		{"on a safe step's result, then withdrawn", cat([]Record{items("before_send")}, dismissed(1)[:3], []Record{carrying(result(4, ""), "after_send", report)}, dismissed(1)[4:], final()), 5},
		// The same carried on a step labelled safe.
		{"on a safe step's own record", cat([]Record{items("before_send")}, dismissed(1)[:5], []Record{carrying(step("dismiss again", Safe), "final", report), result(7, "")}, final()), 7},
		// Items read on an observation of a condition or of the title.
		{"on a condition's observation", cat([]Record{items("before_send")}, dismissed(1), []Record{onObservation("condition", report)}, final()), 8},
		{"on a title's observation", cat([]Record{items("before_send")}, dismissed(1), []Record{onObservation("conversation_title", report)}, final()), 8},
		// Read in the chat after the stop, after the final reads.
		{"after the final reads", cat([]Record{items("before_send")}, dismissed(1), final(), []Record{label("not_sent"), items("final", report)}), 11},
		// A first before_send read that showed ours, and a later one, still before the
		// file could be attached, that shows less: the chat as it was is the lesser,
		// wherever it comes, and the first read's item of ours is new beside it.
		{"a later read of the chat as it was shows less", cat([]Record{step("open the chat", Safe), result(1, ""), items("before_send", report), title("Bob"), items("before_send")}, dismissed(5)[1:], final(report)), 3},
		// The same, the item gone again by the end: shown once, it still counted.
		{"shown, then gone before a later read of the chat as it was", cat([]Record{step("open the chat", Safe), result(1, ""), items("before_send", older, report), title("Bob"), items("before_send", older)}, dismissed(5)[1:], final(older)), 3},
	}
}

func classifyRecs(recs []Record) Classification {
	recs = append([]Record(nil), recs...)
	for i := range recs {
		recs[i].Seq, recs[i].Mono = i+1, int64(i+1)*250e6
	}
	return Classify(Transcript{Manifest: testManifest("report.txt", content), Records: recs, Complete: true, Profile: testProfile})
}

// TestItemOfOursOnTheSendPage: an item the send page shows marked ours, whatever its
// name, may have been sent.
func TestItemOfOursOnTheSendPage(t *testing.T) {
	c := classifyRecs(cat([]Record{items("before_send")}, dismissed(1), []Record{items("final"), page("final", Item{Name: "other.txt", Ours: true})}))
	if c.Outcome != gate.SendStatusUnknown || !slices.ContainsFunc(c.Reasons, func(s string) bool { return strings.Contains(s, `marked ours ("other.txt" (ours))`) }) {
		t.Fatalf("%s; want send_status_unknown naming the item\n%s", c.Outcome, strings.Join(c.Reasons, "\n"))
	}
}

func TestNewItemOfOursNeverNotSent(t *testing.T) {
	for _, tc := range appearedCases() {
		t.Run(tc.name, func(t *testing.T) {
			c := classifyRecs(tc.recs)
			if c.Outcome != gate.SendStatusUnknown || c.FailClosed {
				t.Fatalf("%s (fail closed %v); want send_status_unknown\n%s", c.Outcome, c.FailClosed, strings.Join(c.Reasons, "\n"))
			}
			assertListed(t, c, tc.seq)
		})
	}
}

// assertListed: the classification names the read at seq as showing an item that
// appeared, and says it counted.
func assertListed(t *testing.T, c Classification, seq int) {
	t.Helper()
	found := false
	for _, a := range c.Appeared {
		if a.Record == seq && len(a.Items) > 0 {
			found = true
		}
	}
	if !found {
		t.Errorf("appeared lists %+v; want the read at record %d", c.Appeared, seq)
	}
	for _, r := range c.Reasons {
		if strings.HasPrefix(r, recordPrefix(seq)) && strings.Contains(r, "appeared") && strings.Contains(r, "counted") {
			return
		}
	}
	t.Errorf("no reason says record %d shows an item that appeared and counted:\n%s", seq, strings.Join(c.Reasons, "\n"))
}

func recordPrefix(seq int) string { return fmt.Sprintf("record %d: ", seq) }

// TestAppearedListedWhenAlreadyDecided: the first item of ours to appear is listed and
// counted even when a crossing had already made the outcome unknown, and when the reads
// then confirm it; reads that show the same item again add no entry.
func TestAppearedListedWhenAlreadyDecided(t *testing.T) {
	for _, tc := range []struct {
		name string
		recs []Record
		want gate.Outcome
		seq  int
	}{
		{"confirmed", delivered(seen(report)...), gate.SentVerified, 11},
		{"unknown after the crossing", delivered(items("after_send", report)), gate.SendStatusUnknown, 11},
		{"read out of order, before the send", cat(upToSend()[:7], []Record{items("before_send", report)}, upToSend()[7:], final(report)), gate.SendStatusUnknown, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := classifyRecs(tc.recs)
			if c.Outcome != tc.want {
				t.Fatalf("%s; want %s\n%s", c.Outcome, tc.want, strings.Join(c.Reasons, "\n"))
			}
			assertListed(t, c, tc.seq)
			if len(c.Appeared) != 1 {
				t.Errorf("appeared lists %d entries (%+v); want 1: the same item read again is no new one", len(c.Appeared), c.Appeared)
			}
		})
	}
}

// TestNothingOfOursAppearedStaysNotSent: the stops that show nothing new of ours still
// classify not_sent, and list nothing.
func TestNothingOfOursAppearedStaysNotSent(t *testing.T) {
	for _, tc := range []struct {
		name string
		recs []Record
	}{
		{"an older item of ours throughout", cat([]Record{items("before_send", older)}, dismissed(1), final(older))},
		{"an older item of ours, first read after the chat was opened", cat([]Record{step("open the chat", Safe), result(1, ""), items("before_send", older)}, dismissed(3), final(older))},
		{"a peer's item appears", cat([]Record{items("before_send", older)}, dismissed(1), final(older, Item{Name: "photo.jpg", Y: 500}))},
		{"read before anything acted, more than later", cat([]Record{items("final", older, report)}, []Record{items("before_send", older)}, dismissed(2), final(older))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := classifyRecs(tc.recs)
			if c.Outcome != gate.NotSent || len(c.Appeared) != 0 {
				t.Fatalf("%s, appeared %+v; want not_sent with nothing appeared\n%s", c.Outcome, c.Appeared, strings.Join(c.Reasons, "\n"))
			}
		})
	}
}

// TestReportListsAppeared: the report of a stop whose final read shows a new item of
// ours (its steps all labelled safe) names the item, the read and that it counted, in
// the list of items that appeared and on the read's row of the timeline.
func TestReportListsAppeared(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	flow(true, cat([]Record{items("before_send", theirs)}, dismissed(1), final(report))...)(t, dir)
	html := verifiedReport(t, dir)
	for _, want := range []string{
		"Outcome: SEND STATUS UNKNOWN",
		"<h2>Items that appeared</h2>",
		`<tr><td>8</td><td>final</td><td>&#34;report.txt&#34; 17 B (ours, finished)<br></td><td>record 1</td><td>side-effect evidence: the outcome cannot be not_sent</td></tr>`,
		`observed sent_items (final) in &#34;Bob&#34; [&#34;report.txt&#34; 17 B (ours, finished)]; APPEARED beyond the chat as it was: &#34;report.txt&#34; 17 B (ours, finished); counted as side-effect evidence`,
		`[&#34;report.txt&#34; 17 B (not drawn as ours)]`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the report lacks %s", want)
		}
	}
}

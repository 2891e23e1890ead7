package evidence

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/gate"
)

// A transcript case: a labelled attempt. The label is the folder the bundle lives in
// (its expected outcome, or fail_closed), never anything the classifier reads. Cases
// written to attack one of the classifier's principles name it.
type transcriptCase struct {
	label, name string
	build       func(t *testing.T, dir string) // writes the bundle
	principle   string                         // "", or the principle the case attacks
}

// The principles the attack transcripts test (see Classify).
const (
	monotone   = "monotone in side effects"
	proof      = "not_sent needs positive proof"
	confirming = "confirmation needs our own finished new item"
	vocabulary = "closed vocabulary"
	canDo      = "inputs judged by what they can do"
)

const corpusDir = "../testdata/transcripts"

var content = []byte("quarterly report\n")

// flow writes records through a recorder and seals the bundle when sealed is true.
func flow(sealed bool, recs ...Record) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		r, err := Create(dir, testManifest("report.txt", content), newStepClock())
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			mustAppend(t, r, rec)
		}
		if sealed {
			if _, err := r.Seal("recorded by the generator", nil, nil); err != nil {
				t.Fatal(err)
			}
		} else {
			r.Close()
		}
	}
}

// raw writes records as maps, chained but past the recorder's checks (for values the
// recorder would refuse), and seals nothing: a completed-looking bundle is sealed by
// hand with sealRaw.
func raw(recs ...map[string]any) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		flow(false)(t, dir)
		for i, rec := range recs {
			rec["wall"], rec["mono_ns"] = "2026-11-30T09:00:01Z", int64(i+1)*250e6
			rawAppend(t, dir, rec)
		}
		r, err := Reopen(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Seal("recorded by the generator", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func step(intent string, c Class) Record {
	return Record{Kind: KindStep, Intent: intent, Class: c, Target: &Target{Method: "shortcut"}, Inputs: []Input{KeyInput("ctrl+shift+u")}}
}
func result(seq int, errText string) Record {
	return Record{Kind: KindResult, Step: seq, Error: errText}
}
func title(t string) Record {
	return Record{Kind: KindObserve, Observed: &Observation{What: "conversation_title", DispatchID: testDispatch, Title: t}}
}
func items(phase string, it ...Item) Record {
	return Record{Kind: KindObserve, Observed: &Observation{What: "sent_items", Phase: phase, DispatchID: testDispatch, Title: "Bob", Items: it, AtBottom: true}}
}
func itemsFor(dispatch, phase string, it ...Item) Record {
	r := items(phase, it...)
	r.Observed.DispatchID = dispatch
	return r
}
func page(phase string, it ...Item) Record {
	return Record{Kind: KindObserve, Observed: &Observation{What: "send_page_items", Phase: phase, DispatchID: testDispatch, Items: it}}
}
func lookup(result, sha, recipient, dispatch string) Record {
	return Record{Kind: KindLookup, Lookup: &Lookup{Provider: "xmpp", DispatchID: dispatch, Result: result, ObjectID: "msg-1", SHA256: sha, Recipient: recipient, Authoritative: true}}
}
func label(l string) Record { return Record{Kind: KindLabel, Label: l} }
func crossed(b string) Record {
	return Record{Kind: KindGate, Gate: &GateUse{Action: "cross", Boundary: b, Token: 7, Decision: "crossed"}}
}
func withInputs(r Record, in ...Input) Record { r.Inputs = in; return r }

// The items a chat shows. report is a finished item of ours at the bottom; older is an
// earlier one of ours above it; theirs has our name and size but is the peer's;
// uploading is ours but still a transfer in progress.
var (
	report    = Item{Name: "report.txt", Size: "17 B", Y: 400, Ours: true, Finished: true}
	older     = Item{Name: "report.txt", Size: "17 B", Y: 200, Ours: true, Finished: true}
	theirs    = Item{Name: "report.txt", Size: "17 B", Y: 400}
	uploading = Item{Name: "report.txt", Size: "17 B", Y: 400, Ours: true}
)

// upToSend is the way up to the press of send, as the runner records it, with the
// chat showing before the items given.
func upToSend(before ...Item) []Record {
	return []Record{
		items("before_send", before...), // 1: the first read of the chat
		title("Bob"),                    // 2
		step("open picker", Safe), result(3, ""),
		crossed("choose_file"), step("choose file", MaySubmit), result(6, ""), // 5-7
		crossed("send"), step("press send", Submit), result(9, ""), // 8-10
	}
}

// delivered is upToSend with nothing of ours before, then extra.
func delivered(extra ...Record) []Record { return append(upToSend(), extra...) }

// seen is two reads after the send 500ms apart (the settle time is 400ms), each
// showing the items given.
func seen(it ...Item) []Record {
	return []Record{items("after_send", it...), title("Bob"), items("after_send", it...)}
}

// final is the runner's last look after a stop: the chat and the send page.
func final(chat ...Item) []Record { return []Record{items("final", chat...), page("final")} }

// stopped is a stop before any crossing, as the runner records it: the gate asked at
// the picker, the picker opened and dismissed with Escape, then the final reads.
func stopped(extra ...Record) []Record {
	recs := []Record{items("before_send"), title("Bob"), checked("open_picker"), step("open picker", Safe), result(4, ""),
		withInputs(step("dismiss", Safe), KeyInput("Escape")), result(6, "")}
	return append(recs, extra...)
}

func checked(b string) Record {
	return Record{Kind: KindGate, Gate: &GateUse{Action: "check", Boundary: b, Token: 7, Decision: "ok"}}
}

func cat(parts ...[]Record) []Record {
	var out []Record
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func corpus() []transcriptCase {
	sha := testManifest("report.txt", content).ContentSHA256
	other := strings.Repeat("ab", 32)
	return append(baseCorpus(sha, other), attackCorpus(sha)...)
}

// baseCorpus is the corpus as it stood before the evidence issue, updated to the
// records the runner writes now (a first read of the chat, final reads after a stop,
// two reads after the send).
func baseCorpus(sha, other string) []transcriptCase {
	return []transcriptCase{
		// not_sent: complete, and nothing that can submit began.
		{label: "not_sent", name: "nothing-happened", build: flow(true)},
		{label: "not_sent", name: "opened-picker-only", build: flow(true, stopped(final()...)...)},
		{label: "not_sent", name: "wrong-title-stopped", build: flow(true, title("Bobby"))},
		{label: "not_sent", name: "label-claims-sent", build: flow(true, stopped(append(final(), label("sent_verified"))...)...)},
		{label: "not_sent", name: "leftover-page-dismissed", build: flow(true, step("dismiss leftover send page", Safe), result(1, ""), items("before_send", older), title("Bob"), items("final", older), page("final"))},
		{label: "not_sent", name: "gate-refused-at-picker", build: flow(true, title("Bob"), Record{Kind: KindGate, Gate: &GateUse{Action: "check", Boundary: "open_picker", Decision: "refused", Reason: "lease expired"}})},
		// Stopped before anything acted (the app published no tree, and the profile
		// requires one): the chat already held an item of ours with the file's name, from
		// an earlier delivery. Nothing this attempt did can have put it there.
		{label: "not_sent", name: "stopped-before-any-step-chat-holds-an-older-one", build: flow(true, final(report)...)},
		{label: "not_sent", name: "picker-failed-to-open", build: flow(true, cat([]Record{items("before_send"), title("Bob"), step("open picker", Safe), result(3, "the picker did not appear")}, final())...)},

		// sent_verified: confirmation bound to this dispatch.
		{label: "sent_verified", name: "text-file", build: flow(true, delivered(seen(report)...)...)},
		{label: "sent_verified", name: "older-same-name-and-a-new-one", build: flow(true, cat(upToSend(older), seen(older, report))...)},
		{label: "sent_verified", name: "image-confirmed-by-provider", build: flow(true, delivered(items("after_send"), lookup("found", sha, "title:Bob", testDispatch))...)},
		{label: "sent_verified", name: "size-shown-rounded", build: flow(true, delivered(seen(Item{Name: "report.txt", Size: "0.0 kB", Y: 400, Ours: true, Finished: true})...)...)},
		{label: "sent_verified", name: "label-says-unknown", build: flow(true, delivered(append(seen(report), label("send_status_unknown"))...)...)},
		{label: "sent_verified", name: "screen-failed-provider-found", build: flow(true, delivered(result(10, "timeout waiting for the sent item"), lookup("found", sha, "", testDispatch))...)},
		{label: "sent_verified", name: "size-not-shown", build: flow(true, delivered(seen(Item{Name: "report.txt", Y: 400, Ours: true, Finished: true})...)...)},

		// send_status_unknown: may have sent, nothing confirms.
		{label: "send_status_unknown", name: "incident-item-without-name", build: flow(true, delivered(seen(Item{Y: 400, Ours: true, Finished: true})...)...)},
		{label: "send_status_unknown", name: "older-same-name-only", build: flow(true, cat(upToSend(older), seen(older))...)},
		{label: "send_status_unknown", name: "crash-after-choose-file", build: flow(false, delivered()[:6]...)},
		{label: "send_status_unknown", name: "crash-after-send-pressed", build: flow(false, delivered()[:9]...)},
		{label: "send_status_unknown", name: "timeout-looking-for-item", build: flow(true, delivered(result(10, "timeout"))...)},
		{label: "send_status_unknown", name: "label-not-sent-after-send", build: flow(true, delivered(label("not_sent"))...)},
		{label: "send_status_unknown", name: "proof-borrowed-from-another-dispatch", build: flow(true, delivered(itemsFor("0000another", "after_send", report), title("Bob"), itemsFor("0000another", "after_send", report))...)},
		{label: "send_status_unknown", name: "lookup-for-another-dispatch", build: flow(true, delivered(lookup("found", sha, "", "0000another"))...)},
		{label: "send_status_unknown", name: "provider-authoritative-absence", build: flow(true, delivered(lookup("absent", "", "", testDispatch))...)},
		{label: "send_status_unknown", name: "provider-cant-tell", build: flow(true, delivered(lookup("cant_tell", "", "", testDispatch))...)},
		{label: "send_status_unknown", name: "crossing-without-step", build: flow(true, title("Bob"), crossed("choose_file"))},
		{label: "send_status_unknown", name: "new-item-wrong-size", build: flow(true, delivered(seen(Item{Name: "report.txt", Size: "5 MB", Y: 400, Ours: true, Finished: true})...)...)},
		{label: "send_status_unknown", name: "no-observation-before-send", build: flow(true, cat(upToSend()[1:], seen(report))...)},
		{label: "send_status_unknown", name: "picker-accepted-then-stopped", build: flow(true, delivered()[:7]...)},
		{label: "send_status_unknown", name: "name-shown-differently", build: flow(true, delivered(seen(Item{Name: "report.t…", Size: "17 B", Y: 400, Ours: true, Finished: true})...)...)},
		{label: "send_status_unknown", name: "size-unreadable-after-send", build: flow(true, delivered(Record{Kind: KindObserve, Observed: &Observation{What: "sent_items", Phase: "after_send", DispatchID: testDispatch, Title: "Bob", SizesShown: true, AtBottom: true, Items: []Item{{Name: "report.txt", Y: 400, Ours: true, Finished: true}}}})...)},
		{label: "send_status_unknown", name: "observation-before-the-send-step", build: flow(true, cat(upToSend()[:7], seen(report), []Record{crossed("send"), step("press send", Submit)})...)},
		// Before the evidence issue this was sent_rejected: a screen read of another
		// title. A title misread by OCR would then brand a delivery as sent to the wrong
		// person; only the provider can say that.
		{label: "send_status_unknown", name: "new-item-in-another-conversation", build: flow(true, delivered(Record{Kind: KindObserve, Observed: &Observation{What: "sent_items", Phase: "after_send", DispatchID: testDispatch, Title: "Bobby", AtBottom: true, Items: []Item{report}}})...)},

		// sent_rejected: delivered, but the wrong bytes or the wrong recipient.
		{label: "sent_rejected", name: "provider-has-other-bytes", build: flow(true, delivered(lookup("found", other, "", testDispatch))...)},
		{label: "sent_rejected", name: "provider-delivered-elsewhere", build: flow(true, delivered(lookup("found", sha, "xmpp:eve@localhost", testDispatch))...)},

		// fail_closed: nothing here can be trusted, so it grants nothing.
		{label: "fail_closed", name: "unsealed-safe-steps-only", build: flow(false, title("Bob"), step("open picker", Safe))},
		{label: "fail_closed", name: "edited-step", build: func(t *testing.T, dir string) {
			flow(true, title("Bob"), step("open picker", Safe))(t, dir)
			editFile(t, filepath.Join(dir, "steps.jsonl"), `"open picker"`, `"open pickup"`)
		}},
		{label: "fail_closed", name: "truncated-log", build: func(t *testing.T, dir string) {
			flow(false, delivered()...)(t, dir)
			b, _ := os.ReadFile(filepath.Join(dir, "steps.jsonl"))
			os.WriteFile(filepath.Join(dir, "steps.jsonl"), b[:len(b)-40], 0o600)
		}},
		{label: "fail_closed", name: "unknown-version", build: func(t *testing.T, dir string) {
			flow(true)(t, dir)
			editFile(t, filepath.Join(dir, "manifest.json"), Format, "sendonce-evidence/v9")
		}},
		{label: "fail_closed", name: "unknown-kind", build: func(t *testing.T, dir string) {
			flow(false, title("Bob"))(t, dir)
			rawAppend(t, dir, map[string]any{"kind": "teleport", "wall": "2026-11-30T09:00:01Z", "mono_ns": 1})
		}},
		{label: "fail_closed", name: "unknown-class", build: func(t *testing.T, dir string) {
			flow(false, title("Bob"))(t, dir)
			rawAppend(t, dir, map[string]any{"kind": "step", "intent": "press send", "class": "harmless", "wall": "2026-11-30T09:00:01Z", "mono_ns": 1})
		}},
		{label: "fail_closed", name: "reordered", build: func(t *testing.T, dir string) {
			flow(false, delivered()...)(t, dir)
			p := filepath.Join(dir, "steps.jsonl")
			b, _ := os.ReadFile(p)
			lines := strings.SplitAfter(string(b), "\n")
			lines[2], lines[3] = lines[3], lines[2]
			os.WriteFile(p, []byte(strings.Join(lines, "")), 0o600)
		}},
	}
}

// attackCorpus is written against the principles, by reading them, not the code: each
// case says in its comment what it tries and why its label is right.
func attackCorpus(sha string) []transcriptCase {
	click := ClickInput(640, 700)
	enter := KeyInput("Return")
	return []transcriptCase{
		// Monotone in side effects.

		// A key press recorded on an observation: no step announced it, so nothing says
		// it was harmless. It may have pressed send.
		{label: "send_status_unknown", name: "input-on-an-observation", principle: monotone, build: flow(true, cat(stopped(withInputs(title("Bob"), enter)), final())...)},
		// The same on a gate record.
		{label: "send_status_unknown", name: "input-on-a-gate-record", principle: monotone, build: flow(true, cat(stopped(withInputs(Record{Kind: KindGate, Gate: &GateUse{Action: "check", Boundary: "open_picker", Decision: "ok"}}, enter)), final())...)},
		// The same on the executor's own label.
		{label: "send_status_unknown", name: "input-on-a-label", principle: monotone, build: flow(true, cat(stopped(withInputs(label("not_sent"), click)), final())...)},
		// A click in a result that ends no step at all.
		{label: "send_status_unknown", name: "click-in-a-result-of-no-step", principle: monotone, build: flow(true, cat(stopped(withInputs(result(0, ""), click)), final())...)},
		// A click in a result that claims to end a step written only later.
		{label: "send_status_unknown", name: "click-in-a-result-of-a-later-step", principle: monotone, build: flow(true, cat([]Record{items("before_send"), title("Bob"), withInputs(result(4, ""), click), step("open picker", Safe)}, final())...)},
		// The send page held our file before any crossing (a leftover page, or a
		// profile whose "open picker" already chose it): pressing anything may send it.
		{label: "send_status_unknown", name: "send-page-holds-our-file-before-crossing", principle: monotone, build: flow(true, cat(stopped(page("", report)), final())...)},
		// The final read of the send page shows our file: the page was not dismissed.
		{label: "send_status_unknown", name: "final-send-page-holds-our-file", principle: monotone, build: flow(true, stopped(items("final"), page("final", report))...)},
		// No crossing, no may_submit step, but the final read shows a new item of ours:
		// a mislabelled profile step sent it.
		{label: "send_status_unknown", name: "new-item-after-safe-steps-only", principle: monotone, build: flow(true, stopped(final(report)...)...)},
		// A profile labelled its send click "safe": the labels never outrank the screen.
		{label: "send_status_unknown", name: "send-click-labelled-safe", principle: monotone, build: flow(true, cat([]Record{items("before_send"), title("Bob"), withInputs(step("press send", Safe), click), result(3, "")}, final(report))...)},
		// A class on a record that is not a step still says what it may have done.
		{label: "send_status_unknown", name: "submit-class-on-a-result", principle: monotone, build: flow(true, cat(stopped(Record{Kind: KindResult, Step: 4, Class: Submit}), final())...)},
		// The new item was read in an observation labelled for another dispatch: proof
		// for another attempt never confirms, but a side effect is a side effect.
		{label: "send_status_unknown", name: "new-item-read-for-another-dispatch", principle: monotone, build: flow(true, cat(stopped(itemsFor("0000another", "final", report)), final())...)},
		// Input after the first crossing, on steps all labelled safe.
		{label: "send_status_unknown", name: "safe-inputs-after-a-crossing", principle: monotone, build: flow(true, cat([]Record{items("before_send"), title("Bob"), crossed("choose_file"), step("choose file", Safe), result(4, "")}, final())...)},
		// A wrong title still stops as not_sent: the safe inputs that opened the
		// conversation do not count, and the final reads show nothing new.
		{label: "not_sent", name: "wrong-title-after-safe-inputs", principle: monotone, build: flow(true, cat([]Record{step("open start chat", Safe), result(1, ""), items("before_send", older), title("Bobby")}, final(older))...)},

		// not_sent needs positive proof.

		// Stopped after safe inputs, but nothing read the screen at the end.
		{label: "send_status_unknown", name: "no-final-read", principle: proof, build: flow(true, stopped()...)},
		// Only the chat was read at the end, not the send page.
		{label: "send_status_unknown", name: "final-chat-read-only", principle: proof, build: flow(true, stopped(items("final"))...)},
		// Only the send page was read at the end, not the chat.
		{label: "send_status_unknown", name: "final-page-read-only", principle: proof, build: flow(true, stopped(page("final"))...)},
		// The final reads came before the last action: they prove nothing about it.
		{label: "send_status_unknown", name: "final-read-before-the-last-action", principle: proof, build: flow(true, cat([]Record{items("before_send"), title("Bob")}, final(), []Record{step("dismiss", Safe), result(5, "")})...)},
		// A final read with the phase missing is no final read.
		{label: "send_status_unknown", name: "final-reads-in-before-phase", principle: proof, build: flow(true, stopped(items("before_send"), page("before_send"))...)},
		// Final reads, complete, nothing of ours: not_sent (the proof the principle asks).
		{label: "not_sent", name: "stopped-with-final-reads", principle: proof, build: flow(true, stopped(final()...)...)},
		// The same but unsealed: a crash may have cut what came after.
		{label: "fail_closed", name: "stopped-with-final-reads-unsealed", principle: proof, build: flow(false, stopped(final()...)...)},

		// Confirmation needs our own finished new item.

		// The peer sent a file of the same name and size: not ours.
		{label: "send_status_unknown", name: "peer-item-same-name-and-size", principle: confirming, build: flow(true, delivered(seen(theirs)...)...)},
		// Ours, but still uploading: apps remove a progress row on failure too.
		{label: "send_status_unknown", name: "item-still-uploading", principle: confirming, build: flow(true, delivered(seen(uploading)...)...)},
		// Read once: never held.
		{label: "send_status_unknown", name: "read-once", principle: confirming, build: flow(true, delivered(items("after_send", report))...)},
		// Two reads 250ms apart, under the 400ms settle time.
		{label: "send_status_unknown", name: "two-reads-too-close", principle: confirming, build: flow(true, delivered(items("after_send", report), items("after_send", report))...)},
		// Shown, gone, shown again: not held in every read.
		{label: "send_status_unknown", name: "item-withdrawn-between-reads", principle: confirming, build: flow(true, delivered(items("after_send", report), items("after_send"), items("after_send", report))...)},
		// The view was scrolled up after the send: what shows is not the end.
		{label: "send_status_unknown", name: "view-scrolled-up-after-send", principle: confirming, build: flow(true, delivered(scrolled(items("after_send", older, report)), title("Bob"), scrolled(items("after_send", older, report)))...)},
		// The view was scrolled up before the send: the count before is not the count.
		{label: "send_status_unknown", name: "view-scrolled-up-before-send", principle: confirming, build: flow(true, cat([]Record{scrolled(items("before_send"))}, upToSend()[1:], seen(report))...)},
		// The new item of ours is not the lowest: a peer item named like it lies below.
		{label: "send_status_unknown", name: "our-item-not-the-newest", principle: confirming, build: flow(true, delivered(seen(Item{Name: "report.txt", Size: "17 B", Y: 300, Ours: true, Finished: true}, Item{Name: "report.txt", Size: "17 B", Y: 500})...)...)},
		// Before the send our older item's size was misread ("77 B"); after, it reads
		// "17 B". A size read differently never adds an item.
		{label: "send_status_unknown", name: "re-read-size-adds-nothing", principle: confirming, build: flow(true, cat(upToSend(Item{Name: "report.txt", Size: "77 B", Y: 400, Ours: true, Finished: true}), seen(report))...)},
		// A history load brought an older item of ours into view above: more items, but
		// the lowest one is the old one re-read with a wrong size.
		{label: "send_status_unknown", name: "history-loaded-above", principle: confirming, build: flow(true, cat(upToSend(report), seen(Item{Name: "report.txt", Size: "17 B", Y: 100, Ours: true, Finished: true}, Item{Name: "report.txt", Size: "71 B", Y: 400, Ours: true, Finished: true}))...)},
		// The after reads show the item under another title.
		{label: "send_status_unknown", name: "reads-in-another-conversation", principle: confirming, build: flow(true, delivered(inTitle("Bobby", items("after_send", report)), title("Bobby"), inTitle("Bobby", items("after_send", report)))...)},
		// The same transcript with the reads held: it confirms (the attacks above fail
		// only on what they change).
		{label: "sent_verified", name: "held-for-the-settle-time", principle: confirming, build: flow(true, delivered(items("after_send", report), title("Bob"), title("Bob"), items("after_send", report))...)},
		// A bundle that records no profile has no settle time: no screen confirms it.
		{label: "send_status_unknown", name: "no-recorded-profile", principle: confirming, build: func(t *testing.T, dir string) {
			m := testManifest("report.txt", content)
			m.Profile = nil
			r, err := Create(dir, m, newStepClock())
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range delivered(seen(report)...) {
				mustAppend(t, r, rec)
			}
			r.Seal("recorded by the generator", nil, nil)
		}},
		// The provider still confirms what the screen cannot.
		{label: "sent_verified", name: "peer-item-but-provider-found", principle: confirming, build: flow(true, delivered(append(seen(theirs), lookup("found", sha, "", testDispatch))...)...)},

		// Inputs are judged by what they can do, whatever their step's class (issue 30:
		// each of these but the last was not_sent before).

		// The file's path typed and accepted, then send clicked, all under safe labels;
		// the final reads show nothing (the app may still be uploading).
		{label: "send_status_unknown", name: "send-click-labelled-safe-after-a-typed-path", principle: canDo, build: flow(true, cat([]Record{items("before_send"), title("Bob"), withInputs(step("choose file", Safe), TypedPath("/tmp/report.txt"), enter), result(3, ""), withInputs(step("press send", Safe)), withInputs(result(5, ""), click)}, final())...)},
		// The chooser's Return under a safe label: the app may send on choosing.
		{label: "send_status_unknown", name: "chooser-accepted-under-a-safe-label", principle: canDo, build: flow(true, cat([]Record{items("before_send"), title("Bob"), withInputs(step("choose file", Safe), TypedPath("/tmp/report.txt")), result(3, ""), withInputs(step("accept", Safe), enter), result(5, ""), withInputs(step("dismiss", Safe), KeyInput("Escape")), result(7, "")}, final())...)},
		// Text typed after the path: kept as its length only, it may hold a line break.
		{label: "send_status_unknown", name: "text-typed-after-a-typed-path", principle: canDo, build: flow(true, cat([]Record{items("before_send"), title("Bob"), withInputs(step("choose file", Safe), TypedPath("/tmp/report.txt"), TypedText("a caption\n")), result(3, "")}, final())...)},
		// A paste may attach a copied file; the Return after it may send it.
		{label: "send_status_unknown", name: "return-after-a-paste", principle: canDo, build: flow(true, cat([]Record{items("before_send"), title("Bob"), withInputs(step("paste", Safe), KeyInput("ctrl+v"), enter), result(3, "")}, final())...)},
		// The gate was asked at send, then a safe step clicked: the file is on the page.
		{label: "send_status_unknown", name: "safe-click-after-the-gate-asked-at-send", principle: canDo, build: flow(true, cat([]Record{items("before_send"), title("Bob"), Record{Kind: KindGate, Gate: &GateUse{Action: "check", Boundary: "send", Token: 7, Decision: "ok"}}, step("look", Safe), withInputs(result(4, ""), click)}, final())...)},
		// A gate record of a crossing with a decision the runner never writes for one.
		{label: "send_status_unknown", name: "crossing-with-an-unexpected-decision", principle: canDo, build: flow(true, cat([]Record{items("before_send"), title("Bob"), Record{Kind: KindGate, Gate: &GateUse{Action: "cross", Boundary: "send", Token: 7, Decision: "ok"}}}, final())...)},
		// No gate record says where the picker is (a transcript the runner did not
		// write): a click after the title may choose the file, and the clicks after it
		// may send it, whatever their steps' classes.
		{label: "send_status_unknown", name: "file-chosen-by-clicks-without-a-gate", principle: canDo, build: flow(true, cat([]Record{items("before_send"), title("Bob"),
			step("open chooser", Safe), withInputs(result(3, ""), click), withInputs(step("choose file", MaySubmit)), withInputs(result(5, ""), ClickInput(300, 300), ClickInput(300, 300)),
			withInputs(step("press send", Submit)), withInputs(result(7, ""), click)}, final())...)},
		// A path typed as text, then ctrl+Return.
		{label: "send_status_unknown", name: "path-typed-as-text", principle: canDo, build: flow(true, cat([]Record{items("before_send"), title("Bob"), checked("open_picker"),
			withInputs(step("type the path", Safe), TypedText("/tmp/report.txt")), result(4, ""), withInputs(step("send", Submit), KeyInput("ctrl+Return")), result(6, "")}, final())...)},
		// Pastes spelled otherwise, or in a sequence.
		{label: "send_status_unknown", name: "paste-spelled-control", principle: canDo, build: flow(true, cat([]Record{items("before_send"), title("Bob"), checked("open_picker"),
			withInputs(step("paste", Safe), KeyInput("Control+v"), enter), result(4, "")}, final())...)},
		{label: "send_status_unknown", name: "paste-in-a-key-sequence", principle: canDo, build: flow(true, cat([]Record{items("before_send"), title("Bob"), checked("open_picker"),
			withInputs(step("paste", Safe), KeyInput("ctrl+a ctrl+v"), enter), result(4, "")}, final())...)},
		// The typed path read back wrong (select all, End), then Escape: nothing that
		// could submit was sent after the path, so this stop is still not_sent.
		{label: "not_sent", name: "typed-path-read-back-wrong", principle: canDo, build: flow(true, cat([]Record{items("before_send"), title("Bob"), withInputs(step("type the path", Safe), TypedPath("/tmp/report.txt")), result(3, ""), withInputs(step("read the path back", Safe), KeyInput("ctrl+a"), KeyInput("End")), result(5, "the field holds another path"), withInputs(step("dismiss", Safe), KeyInput("Escape")), result(7, "")}, final())...)},

		// Closed vocabulary: each of these would read as "nothing happened" if an
		// unknown value fell through.
		{label: "fail_closed", name: "unknown-gate-decision", principle: vocabulary, build: raw(map[string]any{"kind": "gate", "gate": map[string]any{"action": "cross", "boundary": "send", "decision": "maybe"}})},
		{label: "fail_closed", name: "unknown-gate-action", principle: vocabulary, build: raw(map[string]any{"kind": "gate", "gate": map[string]any{"action": "bypass", "boundary": "send", "decision": "ok"}})},
		{label: "fail_closed", name: "unknown-boundary", principle: vocabulary, build: raw(map[string]any{"kind": "gate", "gate": map[string]any{"action": "cross", "boundary": "archive", "decision": "crossed"}})},
		{label: "fail_closed", name: "unknown-observation-phase", principle: vocabulary, build: raw(map[string]any{"kind": "observe", "observed": map[string]any{"what": "sent_items", "phase": "during_send", "dispatch_id": testDispatch, "items": []any{map[string]any{"name": "report.txt"}}}})},
		{label: "fail_closed", name: "sent-items-without-phase", principle: vocabulary, build: raw(map[string]any{"kind": "observe", "observed": map[string]any{"what": "sent_items", "dispatch_id": testDispatch, "items": []any{map[string]any{"name": "report.txt"}}}})},
		{label: "fail_closed", name: "unknown-input-kind", principle: vocabulary, build: raw(map[string]any{"kind": "result", "step": 0, "inputs": []any{map[string]any{"kind": "voice"}}})},
		{label: "fail_closed", name: "unknown-label", principle: vocabulary, build: raw(map[string]any{"kind": "label", "label": "delivered"})},
		{label: "fail_closed", name: "unknown-class-on-a-result", principle: vocabulary, build: raw(map[string]any{"kind": "result", "step": 0, "class": "harmless"})},
		{label: "fail_closed", name: "gate-record-without-decision", principle: vocabulary, build: raw(map[string]any{"kind": "gate"})},
	}
}

func scrolled(r Record) Record          { r.Observed.AtBottom = false; return r }
func inTitle(t string, r Record) Record { r.Observed.Title = t; return r }

func editFile(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), old) {
		t.Fatalf("edit %s: %v (or %q not found)", path, err, old)
	}
	os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o600)
}

// classifyPath is what 'sendonce classify' does with a bundle folder.
func classifyPath(dir string) Classification {
	b, err := Verify(dir, VerifyOptions{})
	if err != nil {
		return FailClosed(err)
	}
	return ClassifyBundle(b)
}

// TestCorpus classifies every labelled transcript under testdata/transcripts and
// compares with its label and its golden output. -update regenerates both.
func TestCorpus(t *testing.T) {
	cases := corpus()
	if *update {
		os.RemoveAll(corpusDir)
		for _, c := range cases {
			c.build(t, filepath.Join(corpusDir, c.label, c.name))
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(corpusDir, "*", "*"))
	var bundles []string
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			bundles = append(bundles, d)
		}
	}
	sort.Strings(bundles)
	if len(bundles) != len(cases) {
		t.Fatalf("%d transcripts on disk, %d cases: want the same number (go test ./evidence -update)", len(bundles), len(cases))
	}
	for _, dir := range bundles {
		lbl, name := filepath.Base(filepath.Dir(dir)), filepath.Base(dir)
		t.Run(lbl+"/"+name, func(t *testing.T) {
			c := classifyPath(dir)
			if !labelled(c, lbl) {
				t.Fatalf("got %s (fail closed %v: %v); labelled %s", c.Outcome, c.FailClosed, c.Reasons, lbl)
			}
			out, _ := json.MarshalIndent(c, "", "  ")
			goldenCompare(t, dir+".golden", append(out, '\n'))
		})
	}
}

func labelled(c Classification, lbl string) bool {
	if lbl == "fail_closed" {
		return c.FailClosed && c.Outcome == gate.SendStatusUnknown
	}
	return string(c.Outcome) == lbl && !c.FailClosed
}

// TestAttacksAgainstTheOldClassifier: the attack transcripts number at least 30, and for
// each principle at least one of them was classified wrongly by the classifier as it
// stood before the evidence issue (kept in classify_before_test.go). go test -v lists
// old and new outcome per transcript.
func TestAttacksAgainstTheOldClassifier(t *testing.T) {
	wrongBefore := map[string]int{}
	n := 0
	for _, c := range corpus() {
		if c.principle == "" {
			continue
		}
		n++
		dir := filepath.Join(corpusDir, c.label, c.name)
		b, err := Verify(dir, VerifyOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		tr := Transcript{Manifest: b.Manifest, Records: b.Records, Complete: b.Sealed(), Profile: b.Profile}
		before, now := classifyBefore(tr), Classify(tr)
		if !labelled(now, c.label) {
			t.Errorf("%s: classified %s now; labelled %s", c.name, now.Outcome, c.label)
		}
		mark := "same"
		if !labelled(before, c.label) {
			wrongBefore[c.principle]++
			mark = "WRONG before"
		}
		t.Logf("%-22s %-42s before %-20s now %-20s %s", c.principle, c.name, show(before), show(now), mark)
	}
	if n < 30 {
		t.Errorf("%d attack transcripts; the issue asks for at least 30", n)
	}
	for _, p := range []string{monotone, proof, confirming, vocabulary, canDo} {
		if wrongBefore[p] == 0 {
			t.Errorf("no attack transcript on %q was classified wrongly before: the attacks do not attack", p)
		}
	}
}

func show(c Classification) string {
	if c.FailClosed {
		return "fail_closed"
	}
	return string(c.Outcome)
}

// FuzzMaySubmitNeverTowardNotSent: inserting a may_submit or submit step anywhere in a
// transcript never makes its outcome not_sent (mode even); nor does inserting a read that
// shows one item of ours more than any read of the transcript (mode odd: issue 43, item
// 6), anywhere after something acted (or carried on a step, which acts), in any phase,
// for this dispatch or another, on an observation, a result or a step, with the steps'
// classes kept or all made safe; the classification then lists an item that appeared.
func FuzzMaySubmitNeverTowardNotSent(f *testing.F) {
	for i := range corpus() {
		f.Add(uint8(i), uint8(3), uint8(0), false, uint8(0))
		f.Add(uint8(i), uint8(5), uint8(i), true, uint8(2*i+1))
	}
	cases := corpus()
	f.Fuzz(func(t *testing.T, which, at, cls uint8, complete bool, mode uint8) {
		c := cases[int(which)%len(cases)]
		dir := filepath.Join(t.TempDir(), "b")
		c.build(t, dir)
		b, err := Verify(dir, VerifyOptions{})
		if err != nil {
			return // fail-closed cases: nothing to insert into
		}
		recs := append([]Record(nil), b.Records...)
		pos := int(at) % (len(recs) + 1)
		var ins Record
		what := ""
		if mode%2 == 0 {
			class := []Class{MaySubmit, Submit}[cls%2]
			ins = Record{Kind: KindStep, Intent: "inserted", Class: class}
			what = fmt.Sprintf("a %s step", class)
		} else {
			ins, pos = newOfOursRead(recs, pos, cls, mode)
			what = fmt.Sprintf("a read of one more item of ours (%s record, phase %s, dispatch %s)", ins.Kind, ins.Observed.Phase, ins.Observed.DispatchID)
		}
		recs = append(recs[:pos], append([]Record{ins}, recs[pos:]...)...)
		for i := range recs {
			recs[i].Seq = i + 1
			if mode%2 == 1 && mode&16 != 0 && recs[i].Kind == KindStep {
				recs[i].Class = Safe
			}
		}
		got := Classify(Transcript{Manifest: b.Manifest, Records: recs, Complete: complete})
		if got.Outcome == gate.NotSent {
			t.Fatalf("%s with %s at %d classified not_sent: %v", c.name, what, pos+1, got.Reasons)
		}
		if mode%2 == 1 && !got.FailClosed && len(got.Appeared) == 0 {
			t.Fatalf("%s with %s at %d: no item listed as appeared: %v", c.name, what, pos+1, got.Reasons)
		}
	})
}

// newOfOursRead is a read that shows one item of ours more than any read of recs, and
// where to insert it: after the first record that acted, or anywhere when a step
// carries it (a step acts). A before_send read of this dispatch with no such read
// before it would be the chat as it was itself: it is made a final read.
func newOfOursRead(recs []Record, pos int, cls, mode uint8) (Record, int) {
	most := 0
	for _, r := range recs {
		if r.Observed != nil {
			most = max(most, ours(r.Observed.Items))
		}
	}
	var its []Item
	for i := 0; i <= most; i++ {
		its = append(its, Item{Name: []string{"report.txt", "", "other.txt", "report.t…"}[(int(mode)>>1+i)%4], Size: "17 B", Y: 100 + 50*i, Ours: true, Finished: mode&32 == 0})
	}
	rd := items([]string{"before_send", "after_send", "final"}[(mode>>3)%3], its...)
	if mode&64 != 0 {
		rd.Observed.DispatchID = "0000another"
	}
	firstAct := slices.IndexFunc(recs, func(r Record) bool { return r.Kind == KindStep || len(r.Inputs) > 0 })
	carrier := int(cls) % 3
	if firstAct < 0 {
		carrier = 2
	}
	if carrier != 2 {
		pos = firstAct + 1 + pos%(len(recs)-firstAct)
	}
	o := rd.Observed
	if carrier == 0 && o.Phase == "before_send" && o.DispatchID == testDispatch &&
		!slices.ContainsFunc(recs[:pos], func(r Record) bool {
			return r.Observed != nil && r.Observed.What == "sent_items" && r.Observed.Phase == "before_send" && r.Observed.DispatchID == testDispatch
		}) {
		o.Phase = "final"
	}
	switch carrier {
	case 0:
		return rd, pos
	case 1:
		r := result(firstAct+1, "")
		r.Observed = o
		return r, pos
	}
	r := step("look", Safe)
	r.Observed = o
	return r, pos
}

// FuzzVerify feeds arbitrary bytes as steps.jsonl: Verify never panics, and whatever it
// accepts classifies without panicking.
func FuzzVerify(f *testing.F) {
	f.Add([]byte(`{"seq":1,"prev":"x","kind":"step","class":"safe","wall":"2026-11-30T09:00:00Z","mono_ns":0}` + "\n"))
	f.Fuzz(func(t *testing.T, steps []byte) {
		dir := filepath.Join(t.TempDir(), "b")
		r, err := Create(dir, testManifest("report.txt", content), newStepClock())
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		os.WriteFile(filepath.Join(dir, "steps.jsonl"), steps, 0o600)
		if b, err := Verify(dir, VerifyOptions{}); err == nil {
			ClassifyBundle(b)
		}
	})
}

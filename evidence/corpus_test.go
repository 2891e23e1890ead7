package evidence

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/gate"
)

// A transcript case: a labelled attempt. The label is the folder the bundle lives in
// (its expected outcome, or fail_closed), never anything the classifier reads.
type transcriptCase struct {
	label, name string
	build       func(t *testing.T, dir string) // writes the bundle
}

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
	return Record{Kind: KindObserve, Observed: &Observation{What: "sent_items", Phase: phase, DispatchID: testDispatch, Title: "Bob", Items: it}}
}
func itemsFor(dispatch, phase string, it ...Item) Record {
	r := items(phase, it...)
	r.Observed.DispatchID = dispatch
	return r
}
func lookup(result, sha, recipient, dispatch string) Record {
	return Record{Kind: KindLookup, Lookup: &Lookup{Provider: "xmpp", DispatchID: dispatch, Result: result, ObjectID: "msg-1", SHA256: sha, Recipient: recipient, Authoritative: true}}
}
func label(l string) Record { return Record{Kind: KindLabel, Label: l} }
func crossed(b string) Record {
	return Record{Kind: KindGate, Gate: &GateUse{Action: "cross", Boundary: b, Token: 7, Decision: "crossed"}}
}

var report = Item{Name: "report.txt", Size: "17 B"}

// delivered is the usual way up to the press of send.
func delivered(extra ...Record) []Record {
	recs := []Record{
		title("Bob"),
		step("open picker", Safe), result(2, ""),
		crossed("choose_file"), step("choose file", MaySubmit), result(5, ""),
		items("before_send"),
		crossed("send"), step("press send", Submit), result(9, ""),
	}
	return append(recs, extra...)
}

func corpus() []transcriptCase {
	sha := testManifest("report.txt", content).ContentSHA256
	other := strings.Repeat("ab", 32)
	return []transcriptCase{
		// not_sent: complete, and nothing that can submit began.
		{"not_sent", "nothing-happened", flow(true)},
		{"not_sent", "opened-picker-only", flow(true, title("Bob"), step("open picker", Safe), result(2, ""))},
		{"not_sent", "wrong-title-stopped", flow(true, title("Bobby"))},
		{"not_sent", "label-claims-sent", flow(true, title("Bob"), step("open picker", Safe), label("sent_verified"))},
		{"not_sent", "leftover-page-dismissed", flow(true, step("dismiss leftover send page", Safe), result(1, ""), items("before_send", report), title("Bob"))},
		{"not_sent", "gate-refused-at-picker", flow(true, title("Bob"), Record{Kind: KindGate, Gate: &GateUse{Action: "check", Boundary: "open_picker", Decision: "refused", Reason: "lease expired"}})},
		{"not_sent", "picker-failed-to-open", flow(true, title("Bob"), step("open picker", Safe), result(2, "the picker did not appear"))},

		// sent_verified: confirmation bound to this dispatch.
		{"sent_verified", "text-file", flow(true, delivered(items("after_send", report))...)},
		{"sent_verified", "older-same-name-and-a-new-one", flow(true, append(delivered()[:6], items("before_send", report), crossed("send"), step("press send", Submit), result(9, ""), items("after_send", report, report))...)},
		{"sent_verified", "image-confirmed-by-provider", flow(true, delivered(items("after_send"), lookup("found", sha, "title:Bob", testDispatch))...)},
		{"sent_verified", "size-shown-rounded", flow(true, delivered(items("after_send", Item{Name: "report.txt", Size: "0.0 kB"}))...)},
		{"sent_verified", "label-says-unknown", flow(true, delivered(items("after_send", report), label("send_status_unknown"))...)},
		{"sent_verified", "screen-failed-provider-found", flow(true, delivered(result(10, "timeout waiting for the sent item"), lookup("found", sha, "", testDispatch))...)},
		{"sent_verified", "size-not-shown", flow(true, delivered(items("after_send", Item{Name: "report.txt"}))...)},

		// send_status_unknown: may have sent, nothing confirms.
		{"send_status_unknown", "incident-item-without-name", flow(true, delivered(items("after_send", Item{Name: "", Size: ""}))...)},
		{"send_status_unknown", "older-same-name-only", flow(true, append(delivered()[:6], items("before_send", report), crossed("send"), step("press send", Submit), result(9, ""), items("after_send", report))...)},
		{"send_status_unknown", "crash-after-choose-file", flow(false, delivered()[:5]...)},
		{"send_status_unknown", "crash-after-send-pressed", flow(false, delivered()[:9]...)},
		{"send_status_unknown", "timeout-looking-for-item", flow(true, delivered(result(10, "timeout"))...)},
		{"send_status_unknown", "label-not-sent-after-send", flow(true, delivered(label("not_sent"))...)},
		{"send_status_unknown", "proof-borrowed-from-another-dispatch", flow(true, delivered(itemsFor("0000another", "after_send", report))...)},
		{"send_status_unknown", "lookup-for-another-dispatch", flow(true, delivered(lookup("found", sha, "", "0000another"))...)},
		{"send_status_unknown", "provider-authoritative-absence", flow(true, delivered(lookup("absent", "", "", testDispatch))...)},
		{"send_status_unknown", "provider-cant-tell", flow(true, delivered(lookup("cant_tell", "", "", testDispatch))...)},
		{"send_status_unknown", "crossing-without-step", flow(true, title("Bob"), crossed("choose_file"))},
		{"send_status_unknown", "new-item-wrong-size", flow(true, delivered(items("after_send", Item{Name: "report.txt", Size: "5 MB"}))...)},
		{"send_status_unknown", "no-observation-before-send", flow(true, append(delivered()[:6], crossed("send"), step("press send", Submit), items("after_send", report))...)},
		{"send_status_unknown", "picker-accepted-then-stopped", flow(true, delivered()[:6]...)},
		{"send_status_unknown", "name-shown-differently", flow(true, delivered(items("after_send", Item{Name: "report.t…", Size: "17 B"}))...)},
		{"send_status_unknown", "size-unreadable-after-send", flow(true, delivered(Record{Kind: KindObserve, Observed: &Observation{What: "sent_items", Phase: "after_send", DispatchID: testDispatch, Title: "Bob", SizesShown: true, Items: []Item{{Name: "report.txt"}}}})...)},
		{"send_status_unknown", "observation-before-the-send-step", flow(true, append(delivered()[:6], items("before_send"), items("after_send", report), crossed("send"), step("press send", Submit))...)},

		// sent_rejected: delivered, but the wrong bytes or the wrong recipient.
		{"sent_rejected", "provider-has-other-bytes", flow(true, delivered(lookup("found", other, "", testDispatch))...)},
		{"sent_rejected", "provider-delivered-elsewhere", flow(true, delivered(lookup("found", sha, "xmpp:eve@localhost", testDispatch))...)},
		{"sent_rejected", "new-item-in-another-conversation", flow(true, delivered(Record{Kind: KindObserve, Observed: &Observation{What: "sent_items", Phase: "after_send", DispatchID: testDispatch, Title: "Bobby", Items: []Item{report}}})...)},

		// fail_closed: nothing here can be trusted, so it grants nothing.
		{"fail_closed", "unsealed-safe-steps-only", flow(false, title("Bob"), step("open picker", Safe))},
		{"fail_closed", "edited-step", func(t *testing.T, dir string) {
			flow(true, title("Bob"), step("open picker", Safe))(t, dir)
			editFile(t, filepath.Join(dir, "steps.jsonl"), `"open picker"`, `"open pickup"`)
		}},
		{"fail_closed", "truncated-log", func(t *testing.T, dir string) {
			flow(false, delivered()...)(t, dir)
			b, _ := os.ReadFile(filepath.Join(dir, "steps.jsonl"))
			os.WriteFile(filepath.Join(dir, "steps.jsonl"), b[:len(b)-40], 0o600)
		}},
		{"fail_closed", "unknown-version", func(t *testing.T, dir string) {
			flow(true)(t, dir)
			editFile(t, filepath.Join(dir, "manifest.json"), Format, "sendonce-evidence/v9")
		}},
		{"fail_closed", "unknown-kind", func(t *testing.T, dir string) {
			flow(false, title("Bob"))(t, dir)
			rawAppend(t, dir, map[string]any{"kind": "teleport", "wall": "2026-11-30T09:00:01Z", "mono_ns": 1})
		}},
		{"fail_closed", "unknown-class", func(t *testing.T, dir string) {
			flow(false, title("Bob"))(t, dir)
			rawAppend(t, dir, map[string]any{"kind": "step", "intent": "press send", "class": "harmless", "wall": "2026-11-30T09:00:01Z", "mono_ns": 1})
		}},
		{"fail_closed", "reordered", func(t *testing.T, dir string) {
			flow(false, delivered()...)(t, dir)
			p := filepath.Join(dir, "steps.jsonl")
			b, _ := os.ReadFile(p)
			lines := strings.SplitAfter(string(b), "\n")
			lines[2], lines[3] = lines[3], lines[2]
			os.WriteFile(p, []byte(strings.Join(lines, "")), 0o600)
		}},
	}
}

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
	if len(bundles) < 30 || len(bundles) != len(cases) {
		t.Fatalf("%d transcripts on disk, %d cases: want the same number, at least 30 (go test ./evidence -update)", len(bundles), len(cases))
	}
	for _, dir := range bundles {
		lbl, name := filepath.Base(filepath.Dir(dir)), filepath.Base(dir)
		t.Run(lbl+"/"+name, func(t *testing.T) {
			c := classifyPath(dir)
			want := lbl
			if lbl == "fail_closed" {
				if !c.FailClosed || c.Outcome != gate.SendStatusUnknown {
					t.Fatalf("got %+v; want a fail-closed send_status_unknown", c)
				}
			} else if string(c.Outcome) != want || c.FailClosed {
				t.Fatalf("got %s (%v); labelled %s", c.Outcome, c.Reasons, want)
			}
			out, _ := json.MarshalIndent(c, "", "  ")
			goldenCompare(t, dir+".golden", append(out, '\n'))
		})
	}
}

// FuzzMaySubmitNeverTowardNotSent: inserting a may_submit or submit step anywhere in a
// transcript never makes its outcome not_sent.
func FuzzMaySubmitNeverTowardNotSent(f *testing.F) {
	for i := range corpus() {
		f.Add(uint8(i), uint8(3), uint8(0), false)
	}
	cases := corpus()
	f.Fuzz(func(t *testing.T, which, at, cls uint8, complete bool) {
		c := cases[int(which)%len(cases)]
		dir := filepath.Join(t.TempDir(), "b")
		c.build(t, dir)
		b, err := Verify(dir, VerifyOptions{})
		if err != nil {
			return // fail-closed cases: nothing to insert into
		}
		recs := append([]Record(nil), b.Records...)
		pos := int(at) % (len(recs) + 1)
		class := []Class{MaySubmit, Submit}[cls%2]
		ins := Record{Kind: KindStep, Intent: "inserted", Class: class}
		recs = append(recs[:pos], append([]Record{ins}, recs[pos:]...)...)
		for i := range recs {
			recs[i].Seq = i + 1
		}
		got := Classify(Transcript{Manifest: b.Manifest, Records: recs, Complete: complete})
		if got.Outcome == gate.NotSent {
			t.Fatalf("%s with a %s step at %d classified not_sent: %v", c.name, class, pos, got.Reasons)
		}
	})
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

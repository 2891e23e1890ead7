package evidence

import (
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/gate"
)

// A transcript generator for structure-aware fuzzing: it reads the fuzzer's bytes as
// choices, and builds well-formed transcripts the way the runner writes them (a stop
// anywhere, reads that vary in every attribute the classifier reads, provider lookups,
// labels), so the fuzzer explores the classifier, not the JSON parser.
type choices struct {
	b []byte
	i int
}

// pick returns a choice in [0, n), 0 when the bytes run out.
func (c *choices) pick(n int) int {
	if c.i >= len(c.b) {
		return 0
	}
	v := int(c.b[c.i])
	c.i++
	return v % n
}

// chance is true with probability about pct/100 (false when the bytes run out).
func (c *choices) chance(pct int) bool { return c.i < len(c.b) && c.pick(100) < pct }

type generated struct {
	records  []Record
	complete bool
}

func (g *generated) add(r Record) int {
	r.Seq = len(g.records) + 1
	r.Mono = int64(r.Seq) * 250e6
	g.records = append(g.records, r)
	return r.Seq
}

// item varies one sent item: most are a finished item of ours with the right name and
// size, the rest differ in one attribute.
func (c *choices) item(y int) Item {
	it := Item{Name: "report.txt", Size: "17 B", Y: y, Ours: true, Finished: true}
	switch c.pick(16) {
	case 1:
		it.Ours = false
	case 2:
		it.Finished = false
	case 3:
		it.Size = []string{"", "5 MB", "77 B"}[c.pick(3)]
	case 4:
		it.Name = []string{"report.t…", "other.txt", ""}[c.pick(3)]
	}
	return it
}

func (c *choices) read(phase string, older []Item, fresh bool, y int) Record {
	its := append([]Item(nil), older...)
	if fresh {
		its = append(its, c.item(y))
	}
	r := items(phase, its...)
	if c.chance(8) {
		r.Observed.AtBottom = false
	}
	if c.chance(5) {
		r.Observed.Title = "Bobby"
	}
	return r
}

func generate(b []byte) generated {
	c := &choices{b: b}
	g := generated{complete: !c.chance(5)}
	var older []Item
	for i := 0; i < c.pick(3); i++ {
		older = append(older, Item{Name: "report.txt", Size: "17 B", Y: 100 + 50*i, Ours: true, Finished: true})
	}
	finals := func() {
		if c.chance(90) {
			g.add(c.read("final", older, c.chance(5), 500))
		}
		if c.chance(90) {
			g.add(page("final"))
		}
	}
	if c.chance(95) {
		g.add(c.read("before_send", older, false, 0))
	}
	g.add(title([]string{"Bob", "Bob", "Bob", "Bobby"}[c.pick(4)]))
	// The runner asks the gate at each boundary (the picker too) and records each
	// crossing after its step; a transcript written elsewhere may hold no gate record,
	// and its classes may be anything.
	gated := !c.chance(15)
	if g.records[len(g.records)-1].Observed.Title != "Bob" || c.chance(25) {
		// Stopped before any crossing: maybe the picker opened, then dismissed with
		// Escape; then the final reads.
		if c.chance(60) {
			if gated {
				g.add(checked("open_picker"))
			}
			s := g.add(step("open picker", Safe))
			g.add(result(s, ""))
			s = g.add(withInputs(step("dismiss", Safe), KeyInput("Escape")))
			g.add(result(s, ""))
		}
		finals()
		c.extras(&g)
		return g
	}
	if gated {
		g.add(checked("open_picker"))
	}
	s := g.add(step("open picker", Safe))
	g.add(result(s, ""))
	if gated {
		g.add(checked("choose_file"))
		g.add(crossed("choose_file"))
	}
	s = g.add(withInputs(step("choose file", c.class(MaySubmit)), c.chooseInputs()...))
	g.add(result(s, ""))
	if c.chance(10) {
		// Stopped after choosing: dismissed, then the final reads.
		d := g.add(withInputs(step("dismiss", Safe), KeyInput("Escape")))
		g.add(result(d, ""))
		finals()
		c.extras(&g)
		return g
	}
	if gated {
		g.add(checked("send"))
		g.add(crossed("send"))
	}
	s = g.add(withInputs(step("press send", c.class(Submit))))
	g.add(withInputs(result(s, ""), ClickInput(640, 700)))
	fresh := c.chance(85)
	for n := 1 + c.pick(3); n > 0; n-- {
		g.add(c.read("after_send", older, fresh && !c.chance(5), 500))
		for k := c.pick(4); k > 0; k-- {
			g.add(title("Bob"))
		}
	}
	if !gated && c.chance(50) {
		finals() // a transcript without a gate may read "nothing" at the end
	}
	c.extras(&g)
	return g
}

// class is the class a step is labelled with: mostly the one the runner gives it.
func (c *choices) class(usual Class) Class {
	if c.chance(30) {
		return []Class{Safe, MaySubmit, Submit}[c.pick(3)]
	}
	return usual
}

// chooseInputs are the inputs that choose the file: a typed path and Return, a typed
// path alone, a click in a file list, or Return.
func (c *choices) chooseInputs() []Input {
	switch c.pick(4) {
	case 1:
		return []Input{TypedPath("/tmp/report.txt")}
	case 2:
		return []Input{ClickInput(300, 300)}
	case 3:
		return []Input{KeyInput("Return")}
	}
	return []Input{TypedPath("/tmp/report.txt"), KeyInput("ctrl+a"), KeyInput("End"), KeyInput("Return")}
}

// extras adds what may come at the end of any transcript: a provider lookup, a label.
func (c *choices) extras(g *generated) {
	if c.chance(15) {
		l := lookup([]string{"found", "absent", "cant_tell"}[c.pick(3)], testManifest("report.txt", content).ContentSHA256, "", testDispatch)
		if c.chance(20) {
			l.Lookup.SHA256 = "ab"
		}
		g.add(l)
	}
	if c.chance(10) {
		g.add(label([]string{"not_sent", "sent_verified", "send_status_unknown"}[c.pick(3)]))
	}
}

func (g generated) classify(recs []Record) Classification {
	for i := range recs {
		recs[i].Seq = i + 1
	}
	return Classify(Transcript{Manifest: testManifest("report.txt", content), Records: recs, Complete: g.complete, Profile: testProfile})
}

// sideEffects are records that each show a possible side effect.
func sideEffects() []Record {
	return []Record{
		{Kind: KindStep, Intent: "inserted", Class: MaySubmit}, // inputs recorded nowhere
		{Kind: KindStep, Intent: "inserted", Class: Submit},
		withInputs(step("inserted", Safe), TypedPath("/tmp/report.txt"), KeyInput("Return")),
		withInputs(Record{Kind: KindGate, Gate: &GateUse{Action: "cross", Boundary: "send", Decision: "ok"}}),
		crossed("send"),
		withInputs(title("Bob"), KeyInput("Return")),
		withInputs(Record{Kind: KindResult}, ClickInput(1, 1)),
		page("", report),
		items("final", report, report, report, report),
		lookup("found", testManifest("report.txt", content).ContentSHA256, "", testDispatch),
	}
}

// checkProperties checks the classifier's fuzzed properties on one transcript: adding
// side-effect evidence anywhere never yields not_sent; removing every after-send read and
// provider confirmation never keeps sent_verified; and relabelling a step that sent
// input from may_submit or submit to safe never moves the outcome to not_sent or
// sent_verified (monotone in labels: an input is judged by what it can do).
func checkProperties(t *testing.T, b []byte) gate.Outcome {
	g := generate(b)
	base := g.classify(append([]Record(nil), g.records...))
	c := &choices{b: b, i: len(b) / 2}
	se := sideEffects()[c.pick(len(sideEffects()))]
	at := c.pick(len(g.records) + 1)
	with := append(append(append([]Record(nil), g.records[:at]...), se), g.records[at:]...)
	// A read of the chat before anything acted shows the chat as it was before the
	// attempt (every input is written ahead, on its step): it is no side effect, and
	// never moves an outcome to not_sent either.
	beforeAnyAct := se.Observed != nil && se.Observed.What == "sent_items" && !slices.ContainsFunc(g.records[:at], func(r Record) bool { return r.Kind == KindStep || len(r.Inputs) > 0 })
	if got := g.classify(with); got.Outcome == gate.NotSent && (!beforeAnyAct || base.Outcome != gate.NotSent) {
		t.Fatalf("adding %s %q at %d moved %s to not_sent: %v", se.Kind, se.Intent, at+1, base.Outcome, got.Reasons)
	}
	var without []Record
	for _, r := range g.records {
		if r.Observed != nil && r.Observed.Phase == "after_send" || r.Lookup != nil && r.Lookup.Result == "found" {
			continue
		}
		without = append(without, r)
	}
	if got := g.classify(without); got.Outcome == gate.SentVerified {
		t.Fatalf("sent_verified with every after-send read and provider confirmation removed: %v", got.Reasons)
	}
	checkAppeared(t, g, &choices{b: b, i: len(b) / 3})
	withInput := stepsWithInputs(g.records)
	for i, r := range g.records {
		if r.Kind != KindStep || r.Class == Safe || !withInput[r.Seq] {
			continue
		}
		relabelled := append([]Record(nil), g.records...)
		relabelled[i].Class = Safe
		got := g.classify(relabelled)
		if (got.Outcome == gate.NotSent || got.Outcome == gate.SentVerified) && got.Outcome != base.Outcome {
			t.Fatalf("relabelling %s step %q (record %d) as safe moved %s to %s: %v", r.Class, r.Intent, r.Seq, base.Outcome, got.Outcome, got.Reasons)
		}
	}
	return base.Outcome
}

// newOfOurs is the property of issue 43, item 6: a read that shows the chat as it was
// and one item of ours more, inserted anywhere after something acted (or carried on a
// step, which acts), in any phase, for this dispatch or another, on an observation, a
// result or a step, with every step's class kept or made safe, never leaves the outcome
// not_sent, and the classification lists an item that appeared and says it counted.
// The generator's chat as it was shows older; a transcript with no first read of the
// chat has none, and a before_send read of this dispatch made while nothing could
// submit is then the chat as it was itself (nothing is new beside it): that one read
// is moved to the final phase.
func checkAppeared(t *testing.T, g generated, c *choices) {
	recs := append([]Record(nil), g.records...)
	var older []Item
	hasAsWas := len(recs) > 0 && recs[0].Observed != nil && recs[0].Observed.Phase == "before_send"
	if hasAsWas {
		older = recs[0].Observed.Items
	}
	fresh := Item{Name: []string{"report.txt", "", "other.txt", "report.t…"}[c.pick(4)], Size: []string{"17 B", "", "5 MB"}[c.pick(3)],
		Y: 500 + c.pick(100), Ours: true, Finished: c.chance(50)}
	if c.chance(10) {
		fresh.Y = c.pick(500) // not the lowest
	}
	rd := items([]string{"before_send", "after_send", "final"}[c.pick(3)], append(append([]Item(nil), older...), fresh)...)
	if c.chance(15) {
		rd.Observed.DispatchID = "0000another"
	}
	firstAct := slices.IndexFunc(recs, func(r Record) bool { return r.Kind == KindStep || len(r.Inputs) > 0 })
	carrier := c.pick(3)
	if firstAct < 0 {
		carrier = 2 // nothing acted: the step that carries the read acts
	}
	var ins Record
	switch carrier {
	case 0:
		ins = rd
	case 1:
		ins = result(firstAct+1, "")
		ins.Observed = rd.Observed
	default:
		ins = step("look", Safe)
		ins.Observed = rd.Observed
	}
	at := firstAct + 1 + c.pick(len(recs)-firstAct)
	if carrier == 2 {
		at = c.pick(len(recs) + 1)
	}
	if !hasAsWas && carrier == 0 && rd.Observed.Phase == "before_send" && rd.Observed.DispatchID == testDispatch {
		rd.Observed.Phase = "final"
	}
	ins.Mono = 0
	if at > 0 {
		ins.Mono = recs[at-1].Mono // no time passes: it holds nothing longer
	}
	recs = append(recs[:at], append([]Record{ins}, recs[at:]...)...)
	relabel := c.chance(50)
	if relabel {
		for i := range recs {
			if recs[i].Kind == KindStep {
				recs[i].Class = Safe
			}
		}
	}
	got := g.classify(recs)
	if got.Outcome == gate.NotSent {
		t.Fatalf("a new item of ours %+v read in phase %s for %s on a %s record at %d (classes made safe: %v) classified not_sent: %v",
			fresh, rd.Observed.Phase, rd.Observed.DispatchID, ins.Kind, at+1, relabel, got.Reasons)
	}
	if len(got.Appeared) == 0 || !slices.ContainsFunc(got.Reasons, func(s string) bool { return strings.Contains(s, "appeared") && strings.Contains(s, "counted") }) {
		t.Fatalf("a new item of ours %+v at %d: the classification does not list it as counted: appeared %+v, reasons %v", fresh, at+1, got.Appeared, got.Reasons)
	}
}

// FuzzClassifierProperties runs the properties on transcripts built from the fuzzer's
// bytes.
func FuzzClassifierProperties(f *testing.F) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 20; i++ {
		b := make([]byte, 48)
		rng.Read(b)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkProperties(t, b) })
}

// TestGeneratedTranscripts runs the properties on 5,000 generated transcripts and
// prints the share of each outcome: each of not_sent, send_status_unknown and
// sent_verified must be at least 10%, or the generator explores too little.
func TestGeneratedTranscripts(t *testing.T) {
	rng := rand.New(rand.NewSource(20261201))
	const n = 5000
	count := map[gate.Outcome]int{}
	for i := 0; i < n; i++ {
		b := make([]byte, 16+rng.Intn(64))
		rng.Read(b)
		count[checkProperties(t, b)]++
	}
	for _, o := range []gate.Outcome{gate.NotSent, gate.SendStatusUnknown, gate.SentVerified, gate.SentRejected} {
		share := float64(count[o]) / n
		t.Logf("%-20s %5.1f%% (%d of %d generated transcripts)", o, 100*share, count[o], n)
		if o != gate.SentRejected && share < 0.10 {
			t.Errorf("%s is %.1f%% of generated transcripts; want at least 10%%", o, 100*share)
		}
	}
}

package evidence

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sendonce/sendonce/gate"
)

// Classification is an attempt's outcome as its evidence supports it, and why.
type Classification struct {
	Outcome gate.Outcome `json:"outcome"`
	Reasons []string     `json:"reasons"`
	// FailClosed is set when the transcript could not be trusted or was incomplete: the
	// outcome is then send_status_unknown, which grants nothing.
	FailClosed bool `json:"fail_closed,omitempty"`
	// Appeared lists each read that first showed an item beyond the chat as it was: an
	// item of ours, or one named like the file. Each counted as side-effect evidence.
	Appeared []Appeared `json:"appeared,omitempty"`
}

// Appeared is a read that showed items beyond the chat as it was before anything could
// submit: more items of ours (the app's mark of our own side, whatever their names), or
// more named like the file (whoever's side they seem to be on). It counts as side-effect
// evidence whatever the read's phase, its place in the transcript, the kind of record
// that carries it or the class of any step: the outcome is then send_status_unknown, or
// sent_verified where a confirmation holds, never not_sent. A read that shows the same
// items again adds no entry.
type Appeared struct {
	Record int    `json:"record"`          // the read that showed them
	Phase  string `json:"phase,omitempty"` // that read's phase
	// Items are the newest (lowest on screen) items of ours, then named like the file,
	// as many as the read shows beyond the chat as it was.
	Items []Item `json:"items"`
	// Baseline is the read of the chat as it was that they were compared with; 0 when
	// there was none, and every item of ours or named like the file is new.
	Baseline int `json:"baseline,omitempty"`
	// Counted says what the items did to the outcome.
	Counted string `json:"counted"`
}

// appearedCounted is what every Appeared entry says it did.
const appearedCounted = "side-effect evidence: the outcome cannot be not_sent"

// Transcript is what the classifier reads: the attempt and its records, whether the
// record is complete (sealed, or closed by the process that wrote it), and the text of
// the profile that drove the app, as the bundle recorded it.
type Transcript struct {
	Manifest Manifest
	Records  []Record
	Complete bool
	Profile  []byte
}

// FailClosed is the classification of a transcript that cannot be trusted.
func FailClosed(err error) Classification {
	return Classification{Outcome: gate.SendStatusUnknown, FailClosed: true,
		Reasons: []string{fmt.Sprintf("fail closed: %v; nothing it says can free the key", err)}}
}

// Rules are what the classifier takes from the recorded profile.
type Rules struct {
	// Settle is how far apart two reads of a sent item must be for the item to count
	// as held: an item shown once may still be withdrawn.
	Settle time.Duration
	// SizesShown: the app shows every item's size, so a sent item counts only with its
	// size read and matching.
	SizesShown bool
	// PeerMark: the profile's mark of our side (confirm.mark "peer_producible") is one a
	// peer can produce, so no screen confirms a delivery: only the provider can. A
	// profile recorded before the field existed is read as "app_only", its meaning then.
	PeerMark bool
}

// ParseRules reads the classifier's rules from a profile's text. A profile without a
// settle time cannot confirm anything by screen (nil rules, no error).
func ParseRules(profile []byte) (*Rules, error) {
	if len(profile) == 0 {
		return nil, nil
	}
	var p struct {
		SizesShown bool `json:"sizes_shown"`
		Confirm    *struct {
			Settle string `json:"settle"`
			Mark   string `json:"mark"`
		} `json:"confirm"`
	}
	if err := json.Unmarshal(profile, &p); err != nil {
		return nil, fmt.Errorf("the recorded profile is unreadable: %v", err)
	}
	if p.Confirm == nil || p.Confirm.Settle == "" {
		return nil, nil
	}
	d, err := time.ParseDuration(p.Confirm.Settle)
	if err != nil || d <= 0 {
		return nil, fmt.Errorf("the recorded profile's confirm.settle %q is not a positive duration", p.Confirm.Settle)
	}
	switch p.Confirm.Mark {
	case "", "app_only", "peer_producible":
	default:
		return nil, fmt.Errorf("the recorded profile's confirm.mark %q is neither app_only nor peer_producible", p.Confirm.Mark)
	}
	return &Rules{Settle: d, SizesShown: p.SizesShown, PeerMark: p.Confirm.Mark == "peer_producible"}, nil
}

// The closed vocabulary: every enumerated value the classifier reads. Anything else
// fails closed, never falls through as "nothing happened".
var (
	gateActions   = set("claim", "check", "cross", "renew", "record")
	gateDecisions = set("ok", "refused", "crossed")
	boundaries    = set("", string(gate.OpenPicker), string(gate.ChooseFile), string(gate.Send))
	observed      = set("sent_items", "conversation_title", "send_page_items", "send_page_marks", "condition", "accessibility_tree")
	phases        = set("", "before_send", "after_send", "final")
	lookupResults = set("found", "absent", "cant_tell")
	inputKinds    = set("key", "click", "move", "type_text", "type_path")
	labels        = set(string(gate.NotSent), string(gate.SentVerified), string(gate.SendStatusUnknown), string(gate.SentRejected))
)

func set(vs ...string) map[string]bool {
	m := map[string]bool{}
	for _, v := range vs {
		m[v] = true
	}
	return m
}

// checkVocabulary names the first value outside the closed vocabulary.
func checkVocabulary(r Record) error {
	bad := func(what, v string) error { return fmt.Errorf("record %d has unknown %s %q", r.Seq, what, v) }
	if !knownKind(r.Kind) {
		return bad("kind", string(r.Kind))
	}
	if r.Class != "" && !knownClass(r.Class) || r.Kind == KindStep && r.Class == "" {
		return bad("boundary class", string(r.Class))
	}
	for _, in := range r.Inputs {
		if !inputKinds[in.Kind] {
			return bad("input kind", in.Kind)
		}
	}
	switch {
	case r.Kind == KindGate && r.Gate == nil:
		return fmt.Errorf("record %d is a gate record with no decision", r.Seq)
	case r.Kind == KindObserve && r.Observed == nil:
		return fmt.Errorf("record %d observes nothing", r.Seq)
	case r.Kind == KindLookup && r.Lookup == nil:
		return fmt.Errorf("record %d is a lookup with no answer", r.Seq)
	}
	if g := r.Gate; g != nil {
		switch {
		case !gateActions[g.Action]:
			return bad("gate action", g.Action)
		case !gateDecisions[g.Decision]:
			return bad("gate decision", g.Decision)
		case !boundaries[g.Boundary]:
			return bad("boundary", g.Boundary)
		}
	}
	if o := r.Observed; o != nil {
		switch {
		case !observed[o.What]:
			return bad("observation", o.What)
		case !phases[o.Phase]:
			return bad("observation phase", o.Phase)
		case o.What == "sent_items" && o.Phase == "":
			return fmt.Errorf("record %d reads sent items in no phase", r.Seq)
		}
	}
	if l := r.Lookup; l != nil && !lookupResults[l.Result] {
		return bad("lookup result", l.Result)
	}
	if r.Kind == KindLabel && !labels[r.Label] {
		return bad("label", r.Label)
	}
	return nil
}

// Classify decides an attempt's outcome from its records, deterministically, by these
// principles:
//
//   - Monotone in side effects. Whatever shows that something may have been sent keeps
//     the outcome away from not_sent, whatever a record's kind or a step's class says:
//     a crossing, any input after it, input on a record that announces no step, a send
//     page holding our file, and a new item in the chat: more items of ours (whatever
//     their names) or more named like the file than the chat as it was, in a read after
//     something acted, whatever its phase or order and whatever record carries it
//     (Appeared lists each). The chat as it was is the fewest this dispatch's before_send
//     reads showed while nothing could submit yet (no side effect, the file not yet
//     possibly attached) and any read before anything acted (every input is written
//     ahead on its step, so a read before any shows the chat as it was); a read before
//     anything acted lowers it but never sets it, and with no such before_send read
//     every item of ours or named like the file is new.
//   - Inputs are judged by what they can do, whatever their step's class. Once the file
//     may be attached, every input that could submit (CouldSubmit: a click, Return or
//     any key not known to be harmless, typed text) is a possible crossing, and no later
//     read of "nothing" makes it not_sent. The file may be attached from the input after
//     a typed path or a paste; after typed text once the picker may be open (the title
//     was read, or the gate asked at open_picker); at once when the gate was asked at
//     choose_file or send; and, in a transcript where the gate was never asked at the
//     picker (the runner always asks it, right after the title), from the input after
//     any that could submit once the title was read (a chooser driven by clicks alone).
//     A class counts only for a step whose inputs are recorded nowhere (a may_submit or
//     submit step that began): relabelling a step whose inputs are recorded from submit
//     to safe never moves an outcome toward not_sent or sent_verified. Input before the
//     file may be attached does not count: a wrong title, or a typed path read back
//     wrong and dismissed with Escape, still stops as not_sent.
//   - not_sent needs positive proof: a complete transcript, no side effect, and, when
//     anything was done on screen, a final read of the chat and of the send page after
//     the last action.
//   - Confirmation by screen needs a real before/after comparison for this dispatch:
//     items that are ours and finished (as the recorded profile's marks showed them),
//     more of them than any read before the gate's crossing of send, the lowest item of
//     the conversation named like ours, the view at its end in every read, and two such
//     reads at least the recorded profile's settle time apart. Confirmation by provider
//     needs this dispatch's object with the content's SHA-256.
//   - sent_rejected needs the provider's word: this dispatch's object with other bytes
//     or another recipient. A screen never rejects (a misread title is not proof).
//   - Closed vocabulary: an unknown kind, class, action, decision, boundary, phase,
//     result or label fails closed, and a gate record of a crossing whose decision is
//     neither "crossed" nor "refused" is a possible crossing.
//
// Labels the transcript carries about itself never decide.
func Classify(t Transcript) Classification {
	m := t.Manifest
	if !knownFormat(m.Format) {
		return FailClosed(fmt.Errorf("unknown transcript format %q", m.Format))
	}
	if m.DispatchID == "" {
		return FailClosed(fmt.Errorf("the transcript names no dispatch id, so no proof can be bound to it"))
	}
	rules, err := ParseRules(t.Profile)
	if err != nil {
		return FailClosed(err)
	}
	for i, r := range t.Records {
		if r.Seq != i+1 {
			return FailClosed(fmt.Errorf("record %d is out of sequence", i+1))
		}
		if err := checkVocabulary(r); err != nil {
			return FailClosed(err)
		}
	}
	// The chat as it was is known only once every read is: a read before it in the
	// transcript, or after it, may show less. A first pass finds it; the second judges.
	with := stepsWithInputs(t.Records)
	scan := &judge{m: m, rules: rules, steps: map[int]Record{}, withInputs: with, scanning: true}
	for _, r := range t.Records {
		scan.read(r)
	}
	j := &judge{m: m, rules: rules, steps: map[int]Record{}, withInputs: with, asWas: scan.asWas}
	if j.asWas.set && j.asWas.preSet {
		j.asWas.lowerTo(j.asWas.pre, j.asWas.preSeq)
	}
	for _, r := range t.Records {
		j.read(r)
	}
	j.confirmByScreen()
	return j.decide(t.Complete)
}

// judge reads a transcript's records in order.
type judge struct {
	m     Manifest
	rules *Rules
	c     Classification
	steps map[int]Record // step records by seq
	// withInputs are the steps whose inputs are recorded, on the step or its result:
	// their class does not count, their inputs do.
	withInputs map[int]bool

	sideEffect bool
	crossedAt  int  // the first possible crossing (0: none)
	attachedAt int  // the first record from which the file may be attached (0: not yet)
	attachNext bool // what was input may have attached the file: from the next input on
	titleRead  bool // the conversation's title was read: the picker may be opened next
	pickerGate bool // the gate was asked at a boundary: the runner wrote this transcript
	sendAt     int  // the gate's first crossing of send
	lastAct    int  // the last record that acted or may have: a step, or input
	// scanning: this pass only finds the chat as it was (asWas), and judges no read of
	// the chat.
	scanning bool
	asWas    chatAsWas
	// shown is the most items beyond the chat as it was that Appeared lists so far.
	shown     chatCount
	finalChat int // the last final read of the chat
	finalPage int // the last final read of the send page
	before    []readAt
	after     []readAt
	confirmed bool
	rejected  bool
}

// stepsWithInputs finds the steps whose inputs are recorded: on the step record, or on
// a result that ends it.
func stepsWithInputs(recs []Record) map[int]bool {
	with := map[int]bool{}
	for _, r := range recs {
		switch {
		case r.Kind == KindStep && len(r.Inputs) > 0:
			with[r.Seq] = true
		case r.Kind == KindResult && len(r.Inputs) > 0 && r.Step < r.Seq:
			with[r.Step] = true
		}
	}
	return with
}

type readAt struct {
	seq  int
	mono int64
	o    *Observation
}

func (j *judge) why(seq int, format string, args ...any) {
	j.c.Reasons = append(j.c.Reasons, fmt.Sprintf("record %d: ", seq)+fmt.Sprintf(format, args...))
}

// effect marks a possible side effect; the first one is named.
func (j *judge) effect(seq int, format string, args ...any) {
	if !j.sideEffect {
		j.why(seq, format, args...)
	}
	j.sideEffect = true
}

// crossing marks a possible crossing: a side effect, named if it is the first.
func (j *judge) crossing(seq int, format string, args ...any) {
	j.effect(seq, format, args...)
	if j.crossedAt == 0 {
		j.crossedAt = seq
	}
}

func (j *judge) read(r Record) {
	if r.Kind == KindStep || len(r.Inputs) > 0 {
		j.lastAct = r.Seq
	}
	if r.Class == MaySubmit || r.Class == Submit {
		switch {
		case r.Kind != KindStep:
			j.crossing(r.Seq, "%s record is %s: something may have been sent", r.Kind, r.Class)
		case !j.withInputs[r.Seq]:
			j.crossing(r.Seq, "step %q is %s and its inputs are recorded nowhere: something may have been sent", r.Intent, r.Class)
		}
	}
	for _, in := range r.Inputs {
		j.input(r, in)
	}
	if r.Kind == KindStep {
		j.steps[r.Seq] = r
	}
	if r.Observed != nil {
		// What was read counts whatever record carries it: a result or a step that
		// read the chat shows what an observation would.
		j.observe(r)
	}
	switch r.Kind {
	case KindGate:
		j.gate(r)
	case KindLookup:
		j.lookup(r)
	case KindLabel:
		j.why(r.Seq, "the executor's own label %q is ignored: side-effect evidence decides", r.Label)
	case KindResult:
		if r.Error != "" {
			j.why(r.Seq, "step %d ended with an error: %s", r.Step, r.Error)
		}
	}
}

// input judges one input event by what it can do, whatever its step's class.
func (j *judge) input(r Record, in Input) {
	if j.attachNext && j.attachedAt == 0 {
		j.attachedAt = r.Seq
	}
	switch {
	case j.crossedAt != 0:
		j.effect(r.Seq, "input sent after the first possible crossing (record %d)", j.crossedAt)
	case r.Kind != KindStep && r.Kind != KindResult:
		j.crossing(r.Seq, "input sent on a %s record, which announces no step: it may have submitted", r.Kind)
	case r.Kind == KindResult && !j.stepBefore(r):
		j.crossing(r.Seq, "input sent in the result of record %d, which is no step before it", r.Step)
	case j.attachedAt != 0 && CouldSubmit(in) != "":
		j.crossing(r.Seq, "%s after the file may have been attached (record %d) could submit it, whatever its step's class", CouldSubmit(in), j.attachedAt)
	}
	pickerMayBeOpen := j.titleRead || j.pickerGate
	switch {
	case in.Kind == "type_path", pastes(in):
		j.attachNext = true // a chooser, or the page, may take what was typed or pasted
	case in.Kind == "type_text" && pickerMayBeOpen:
		j.attachNext = true // a path may be typed as text too
	case j.titleRead && !j.pickerGate && CouldSubmit(in) != "":
		j.attachNext = true // no gate says where the picker is: a click may choose the file
	}
}

func (j *judge) stepBefore(r Record) bool {
	_, ok := j.steps[r.Step]
	return ok && r.Step < r.Seq
}

// gate reads a gate record. Asking at choose_file or send means the file may be
// attached from here on; a crossing, or a crossing action with a decision that is
// neither "crossed" nor "refused", is a possible crossing.
func (j *judge) gate(r Record) {
	g := r.Gate
	if g.Boundary != "" {
		j.pickerGate = true
	}
	if (g.Boundary == string(gate.ChooseFile) || g.Boundary == string(gate.Send)) && j.attachedAt == 0 {
		j.attachedAt = r.Seq
	}
	switch {
	case g.Decision == "crossed":
		j.crossing(r.Seq, "the gate recorded a crossing of %s", g.Boundary)
		if g.Boundary == string(gate.Send) && j.sendAt == 0 {
			j.sendAt = r.Seq
		}
	case g.Action == "cross" && g.Decision != "refused":
		j.crossing(r.Seq, "a gate record of crossing %s with decision %q, neither crossed nor refused: counted as a possible crossing", g.Boundary, g.Decision)
	}
}

func (j *judge) observe(r Record) {
	o := r.Observed
	onPage := o.What == "send_page_items" || o.What == "send_page_marks"
	if !onPage && (o.What == "sent_items" || len(o.Items) > 0) {
		j.chat(r) // items outside the send page are the chat's, whatever the observation
	}
	switch o.What {
	case "conversation_title":
		j.titleRead = true
	case "send_page_marks":
		// Items the send page does not name: at the end, any one of them may be ours.
		if o.Phase == "final" && o.Marks != nil && *o.Marks > 0 {
			j.effect(r.Seq, "the send page holds %d item(s) it does not name: one may have been sent", *o.Marks)
		}
	}
	if onPage {
		if n := j.named(o.Items); n > 0 {
			j.effect(r.Seq, "the send page holds %d item(s) named %q: it may have been sent", n, j.m.FileName)
		}
		if n := ours(o.Items); n > 0 {
			j.effect(r.Seq, "the send page holds %d item(s) marked ours (%s): one may have been sent", n, describeItems(o.Items))
		}
		if o.What == "send_page_items" && o.Phase == "final" && r.Kind == KindObserve {
			j.finalPage = r.Seq
		}
	}
	if o.What != "sent_items" || r.Kind != KindObserve {
		return // only the runner's own reads of the chat prove or confirm anything
	}
	if o.Phase == "final" {
		j.finalChat = r.Seq
	}
	if o.DispatchID != j.m.DispatchID {
		j.why(r.Seq, "sent items observed for dispatch %q, not this one (%s): proof borrowed from another attempt does not count", o.DispatchID, j.m.DispatchID)
		return
	}
	ra := readAt{seq: r.Seq, mono: r.Mono, o: o}
	switch {
	case o.Phase == "before_send" && j.sendAt == 0:
		j.before = append(j.before, ra)
	case o.Phase == "after_send" && j.sendAt != 0:
		j.after = append(j.after, ra)
	case o.Phase != "final":
		j.why(r.Seq, "sent items observed in phase %q out of order with the send step: ignored for confirmation", o.Phase)
	}
}

// chatCount is what a read of the chat showed: its items of ours, and those named like
// the file.
type chatCount struct{ ours, named int }

func lower(a, b chatCount) chatCount { return chatCount{min(a.ours, b.ours), min(a.named, b.named)} }

// chatAsWas is the chat as it was before anything could submit: the fewest items this
// dispatch's before_send reads showed while nothing could submit yet (no side effect
// but what reads of the chat show, the file not yet possibly attached), wherever they
// are in the transcript, lowered by any read before anything acted (pre), which never
// sets it alone.
type chatAsWas struct {
	set    bool
	first  int // the first such before_send read: reads before it are compared with none
	base   chatCount
	seq    int // the read that showed the fewest
	pre    chatCount
	preSet bool
	preSeq int
}

func (a *chatAsWas) lowerTo(c chatCount, seq int) {
	if c.ours < a.base.ours || c.named < a.base.named {
		a.base, a.seq = lower(a.base, c), seq
	}
}

// chat judges a read of the chat against the chat as it was (see Classify): a read after
// something acted that shows more items of ours, or more named like the file, is side-
// effect evidence, whatever its phase, its order, its record or any step's class. The
// first pass (scanning) only finds the chat as it was.
func (j *judge) chat(r Record) {
	o := r.Observed
	now := chatCount{ours: ours(o.Items), named: j.named(o.Items)}
	if j.scanning {
		a := &j.asWas
		if r.Kind == KindObserve && o.What == "sent_items" && o.Phase == "before_send" && o.DispatchID == j.m.DispatchID &&
			!j.sideEffect && j.attachedAt == 0 && !j.attachNext {
			if !a.set {
				a.set, a.first, a.base, a.seq = true, r.Seq, now, r.Seq
			}
			a.lowerTo(now, r.Seq)
		}
		if j.lastAct == 0 {
			if !a.preSet {
				a.pre, a.preSet, a.preSeq = now, true, r.Seq
			} else if now.ours < a.pre.ours || now.named < a.pre.named {
				a.pre, a.preSeq = lower(a.pre, now), r.Seq
			}
		}
		return
	}
	switch {
	case j.lastAct == 0:
		// Nothing has acted yet (every input is written ahead, on its step): what the
		// chat shows is no doing of this attempt.
	case j.asWas.set && r.Seq >= j.asWas.first:
		j.compare(r, now, j.asWas.base, j.asWas.seq)
	default:
		// No read of the chat as it was comes before this one: everything is new.
		j.compare(r, now, chatCount{}, 0)
	}
}

// compare counts what a read shows beyond the chat as it was (the read at baseSeq, 0 for
// none): a side effect, listed with the items the first time that many appear.
func (j *judge) compare(r Record, now, was chatCount, baseSeq int) {
	newOurs, newNamed := now.ours-was.ours, now.named-was.named
	if newOurs <= 0 && newNamed <= 0 {
		return
	}
	j.sideEffect = true
	if newOurs <= j.shown.ours && newNamed <= j.shown.named {
		return // the same items read again
	}
	j.shown = chatCount{max(j.shown.ours, newOurs), max(j.shown.named, newNamed)}
	o := r.Observed
	// The newest items of ours, and the newest named like the file, as many of each as
	// are new: one item may be both.
	idx := append(newest(o.Items, newOurs, func(it Item) bool { return it.Ours }),
		newest(o.Items, newNamed, func(it Item) bool { return NameMatches(it.Name, j.m.FileName) })...)
	slices.Sort(idx)
	var its []Item
	for _, i := range slices.Compact(idx) {
		its = append(its, o.Items[i])
	}
	j.c.Appeared = append(j.c.Appeared, Appeared{Record: r.Seq, Phase: o.Phase, Items: its, Baseline: baseSeq, Counted: appearedCounted})
	as := "with no read of the chat as it was (each counts as new)"
	if baseSeq != 0 {
		as = fmt.Sprintf("beyond the %d and %d of the chat as it was (record %d)", was.ours, was.named, baseSeq)
	}
	where := "the chat"
	if r.Kind != KindObserve || o.What != "sent_items" {
		where = fmt.Sprintf("the %s record's %s", r.Kind, strings.ReplaceAll(o.What, "_", " "))
	}
	if o.Phase != "" {
		where += " (" + o.Phase + ")"
	}
	j.why(r.Seq, "%s shows %d item(s) of ours and %d named %q, %s, so an item appeared: %s; it counted as %s, whatever the read's phase, order or step",
		where, now.ours, now.named, j.m.FileName, as, describeItems(its), appearedCounted)
}

// ours counts the items drawn as our side, whatever their names.
func ours(items []Item) int {
	n := 0
	for _, it := range items {
		if it.Ours {
			n++
		}
	}
	return n
}

// newest is the n lowest items on screen (the newest) of those pick holds for, by
// their indexes.
func newest(items []Item, n int, pick func(Item) bool) []int {
	var idx []int
	for i, it := range items {
		if pick(it) {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return items[idx[a]].Y > items[idx[b]].Y })
	return idx[:max(0, min(n, len(idx)))]
}

// describeItems names items as a reason shows them.
func describeItems(items []Item) string {
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = describeItem(it)
	}
	return strings.Join(parts, "; ")
}

// describeItem is an item in plain words: its name, size and what the screen showed.
func describeItem(it Item) string {
	s := fmt.Sprintf("%q", it.Name)
	if it.Name == "" {
		s = "an item whose name could not be read"
	}
	if it.Size != "" {
		s += " " + it.Size
	}
	var marks []string
	if it.Ours {
		marks = append(marks, "ours")
	} else {
		marks = append(marks, "not drawn as ours")
	}
	if it.Finished {
		marks = append(marks, "finished")
	}
	return s + " (" + strings.Join(marks, ", ") + ")"
}

func (j *judge) lookup(r Record) {
	l, m := r.Lookup, j.m
	if l.DispatchID != m.DispatchID {
		j.why(r.Seq, "a %s lookup for dispatch %q, not this one: ignored", l.Provider, l.DispatchID)
		return
	}
	switch l.Result {
	case "found":
		switch {
		case l.SHA256 != m.ContentSHA256:
			j.rejected = true
			j.why(r.Seq, "%s holds object %s for this dispatch with SHA-256 %.12s…, not the content's %.12s…: wrong bytes", l.Provider, l.ObjectID, l.SHA256, m.ContentSHA256)
		case l.Recipient != "" && l.Recipient != m.Identity:
			j.rejected = true
			j.why(r.Seq, "%s delivered object %s to %s, not %s: wrong recipient", l.Provider, l.ObjectID, l.Recipient, m.Identity)
		default:
			j.confirmed = true
			j.why(r.Seq, "%s holds object %s for this dispatch with the content's SHA-256: confirmed", l.Provider, l.ObjectID)
		}
		j.effect(r.Seq, "%s holds an object for this dispatch", l.Provider)
	case "absent":
		j.why(r.Seq, "%s reports no such object (authoritative: %v); absence never frees a key by itself", l.Provider, l.Authoritative)
	case "cant_tell":
		j.why(r.Seq, "%s could not tell", l.Provider)
	}
}

// named counts the items whose name reads as the file's, whatever else they show.
func (j *judge) named(items []Item) int {
	n := 0
	for _, it := range items {
		if NameMatches(it.Name, j.m.FileName) {
			n++
		}
	}
	return n
}

// mayBeOurs counts, before the send, the items that could be this file: named like it,
// its size unread or matching.
func (j *judge) mayBeOurs(items []Item) int {
	n := 0
	for _, it := range items {
		if NameMatches(it.Name, j.m.FileName) && SizeMatches(it.Size, j.m.Size) {
			n++
		}
	}
	return n
}

// oursFinished counts, after the send, the items that show everything a sent item of
// ours shows: our side, finished, the file's name, and its size when the app shows sizes.
func (j *judge) oursFinished(o *Observation) int {
	needSize := o.SizesShown || j.rules.SizesShown
	n := 0
	for _, it := range o.Items {
		if it.Ours && it.Finished && NameMatches(it.Name, j.m.FileName) && SizeMatches(it.Size, j.m.Size) && (it.Size != "" || !needSize) {
			n++
		}
	}
	return n
}

// lowestIsOurs: of the items named like the file, the lowest on screen (the newest, with
// the view at its end) is one of ours and finished.
func (j *judge) lowestIsOurs(o *Observation) bool {
	var low *Item
	for i, it := range o.Items {
		if NameMatches(it.Name, j.m.FileName) && (low == nil || it.Y > low.Y) {
			low = &o.Items[i]
		}
	}
	return low != nil && low.Ours && low.Finished
}

// confirmByScreen looks for two reads after the send, at least the settle time apart,
// that each show a new finished item of ours in the expected conversation.
func (j *judge) confirmByScreen() {
	if len(j.after) == 0 {
		return
	}
	last := j.after[len(j.after)-1].seq
	switch {
	case j.rules == nil:
		j.why(last, "the transcript records no profile with a settle time, so no screen can confirm it (only the provider can)")
		return
	case j.rules.PeerMark:
		j.why(last, "the profile's mark of our side (confirm.mark peer_producible) is one a peer can produce, so no screen confirms a delivery (only the provider can)")
		return
	case len(j.before) == 0:
		j.why(last, "sent items were read after the send but never before it, so no item can be shown to be new")
		return
	}
	baseline, names := 0, 0
	for _, b := range j.before {
		if !b.o.AtBottom {
			j.why(b.seq, "the view was not at the end of the conversation before the send: what was new cannot be told")
			return
		}
		baseline, names = max(baseline, j.mayBeOurs(b.o.Items)), max(names, j.named(b.o.Items))
	}
	// A read shows a new item when it is in the expected conversation with the view at
	// its end, more items are named like ours than before the send (a size read
	// differently never adds one), more of them are finished items of ours than could
	// have been ours before, and the lowest of them is one.
	var run []readAt
	for _, a := range j.after {
		o, n := a.o, j.oursFinished(a.o)
		shows := false
		switch {
		case j.m.Title == "" || o.Title != j.m.Title:
			j.why(a.seq, "the conversation read %q, not %q: this read confirms nothing", o.Title, j.m.Title)
		case !o.AtBottom:
			j.why(a.seq, "the view was not at the end of the conversation: this read confirms nothing")
		case j.named(o.Items) <= names:
			if j.named(o.Items) > 0 {
				j.why(a.seq, "%d item(s) named %q, as many as before the send: nothing new", j.named(o.Items), j.m.FileName)
			} else {
				j.why(a.seq, "no item named %q could be read after the send", j.m.FileName)
			}
		case n <= baseline:
			j.why(a.seq, "%d finished item(s) of ours named %q with a matching size, and up to %d before the send: nothing new of ours", n, j.m.FileName, baseline)
		case !j.lowestIsOurs(o):
			j.why(a.seq, "the lowest item named %q is not a finished item of ours: the new one is not the newest", j.m.FileName)
		default:
			shows = true
		}
		if !shows {
			run = nil
			continue
		}
		run = append(run, a)
		if d := time.Duration(a.mono - run[0].mono); d >= j.rules.Settle {
			j.confirmed = true
			j.why(a.seq, "after the send, %d finished item(s) of ours named %q with a matching size, at most %d before, held in every read from record %d to %d (at least the settle time %v apart): a new sent item confirms this dispatch",
				n, j.m.FileName, baseline, run[0].seq, a.seq, j.rules.Settle)
			return
		}
	}
	if len(run) > 0 {
		j.why(run[len(run)-1].seq, "a new finished item of ours was read, but not held for the settle time %v", j.rules.Settle)
	}
}

func (j *judge) decide(complete bool) Classification {
	c := j.c
	switch {
	case j.rejected:
		c.Outcome = gate.SentRejected
	case j.confirmed:
		c.Outcome = gate.SentVerified
	case j.sideEffect:
		c.Outcome = gate.SendStatusUnknown
		c.Reasons = append(c.Reasons, "no confirmation bound to this dispatch: the result is unknown and the key stays consumed")
	case !complete:
		c = FailClosed(fmt.Errorf("the transcript is incomplete (not sealed), so it cannot prove that nothing was sent"))
		c.Reasons, c.Appeared = append(c.Reasons, j.c.Reasons...), j.c.Appeared
	case j.lastAct != 0 && (j.finalChat < j.lastAct || j.finalPage < j.lastAct):
		c.Outcome = gate.SendStatusUnknown
		c.Reasons = append(c.Reasons, fmt.Sprintf("something was done on screen (record %d), and no final read of the chat and the send page after it shows that nothing of ours arrived: not_sent needs that proof", j.lastAct))
	default:
		c.Outcome = gate.NotSent
		if j.lastAct == 0 {
			c.Reasons = append(c.Reasons, "the transcript is complete and nothing was done on screen: nothing was sent")
		} else {
			c.Reasons = append(c.Reasons, fmt.Sprintf("the transcript is complete, nothing that could submit began, and the final reads (records %d and %d) show nothing of ours: nothing was sent", j.finalChat, j.finalPage))
		}
	}
	return c
}

// ClassifyBundle classifies a verified bundle: sealed means complete. It reads the
// profile the bundle recorded.
func ClassifyBundle(b *Bundle) Classification {
	return Classify(Transcript{Manifest: b.Manifest, Records: b.Records, Complete: b.Sealed(), Profile: b.Profile})
}

package evidence

import (
	"fmt"

	"github.com/sendonce/sendonce/gate"
)

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

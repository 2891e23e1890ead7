package evidence

import (
	"fmt"

	"github.com/sendonce/sendonce/gate"
)

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

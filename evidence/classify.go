package evidence

import (
	"encoding/json"
	"fmt"
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

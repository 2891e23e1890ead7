package evidence

// This file keeps the classifier as it was before the evidence issue (commit 961a7d4),
// only renamed, so that the attack transcripts can show which of them it got wrong.
// It is test code: nothing outside the tests calls it.

import (
	"fmt"

	"github.com/sendonce/sendonce/gate"
)

func classifyBefore(t Transcript) Classification {
	m := t.Manifest
	var c Classification
	why := func(seq int, format string, args ...any) {
		c.Reasons = append(c.Reasons, fmt.Sprintf("record %d: ", seq)+fmt.Sprintf(format, args...))
	}
	if m.Format != FormatV1 && m.Format != FormatV2 {
		return FailClosed(fmt.Errorf("unknown transcript format %q", m.Format))
	}
	if m.DispatchID == "" {
		return FailClosed(fmt.Errorf("the transcript names no dispatch id, so no proof can be bound to it"))
	}

	mayHaveSubmitted := false
	sendSeq := 0 // the first submit step
	var beforeSend *Observation
	confirmed, rejected := false, false
	for i, r := range t.Records {
		if r.Seq != i+1 {
			return FailClosed(fmt.Errorf("record %d is out of sequence", i+1))
		}
		switch r.Kind {
		case KindStep:
			switch r.Class {
			case MaySubmit, Submit:
				if !mayHaveSubmitted {
					why(r.Seq, "%q is %s and began: something may have been sent", r.Intent, r.Class)
				}
				mayHaveSubmitted = true
				if r.Class == Submit && sendSeq == 0 {
					sendSeq = r.Seq
				}
			case Safe:
			default:
				return FailClosed(fmt.Errorf("record %d has unknown boundary class %q", r.Seq, r.Class))
			}
		case KindGate:
			if r.Gate != nil && r.Gate.Decision == "crossed" {
				if !mayHaveSubmitted {
					why(r.Seq, "the gate recorded a crossing of %s", r.Gate.Boundary)
				}
				mayHaveSubmitted = true
			}
		case KindObserve:
			o := r.Observed
			if o == nil || o.What != "sent_items" && o.What != "conversation_title" && o.What != "send_page_items" {
				if o == nil {
					return FailClosed(fmt.Errorf("record %d observes nothing", r.Seq))
				}
				return FailClosed(fmt.Errorf("record %d observes unknown %q", r.Seq, o.What))
			}
			if o.What != "sent_items" {
				continue
			}
			if o.DispatchID != m.DispatchID {
				why(r.Seq, "sent items observed for dispatch %q, not this one (%s): proof borrowed from another attempt does not count", o.DispatchID, m.DispatchID)
				continue
			}
			switch {
			case o.Phase == "before_send" && (sendSeq == 0 || r.Seq < sendSeq):
				beforeSend = o
			case o.Phase == "after_send" && sendSeq != 0 && r.Seq > sendSeq:
				if beforeSend == nil {
					why(r.Seq, "sent items were read after the send but never before it, so no item can be shown to be new")
					continue
				}
				// Before the send an item whose size could not be read counts (it may be
				// ours); after it, only an item with everything shown matching does.
				before, after := countMatchingBefore(beforeSend.Items, m, false), countMatchingBefore(o.Items, m, o.SizesShown)
				switch {
				case after > before && m.Title != "" && o.Title != "" && o.Title != m.Title:
					rejected = true
					why(r.Seq, "a new item %q appeared in the conversation titled %q, not %q: delivered to the wrong recipient", m.FileName, o.Title, m.Title)
				case after > before:
					confirmed = true
					why(r.Seq, "after the send, %d item(s) named %q with a matching size, %d before: a new sent item confirms this dispatch", after, m.FileName, before)
				case after > 0:
					why(r.Seq, "an item named %q is there, but it was there before the send: an older item proves nothing", m.FileName)
				default:
					why(r.Seq, "no new item named %q could be read after the send", m.FileName)
				}
			default:
				why(r.Seq, "sent items observed in phase %q out of order with the send step: ignored", o.Phase)
			}
		case KindLookup:
			l := r.Lookup
			if l == nil {
				return FailClosed(fmt.Errorf("record %d is a lookup with no answer", r.Seq))
			}
			if l.DispatchID != m.DispatchID {
				why(r.Seq, "a %s lookup for dispatch %q, not this one: ignored", l.Provider, l.DispatchID)
				continue
			}
			switch l.Result {
			case "found":
				switch {
				case l.SHA256 != m.ContentSHA256:
					rejected = true
					why(r.Seq, "%s holds object %s for this dispatch with SHA-256 %.12s…, not the content's %.12s…: wrong bytes", l.Provider, l.ObjectID, l.SHA256, m.ContentSHA256)
				case l.Recipient != "" && l.Recipient != m.Identity:
					rejected = true
					why(r.Seq, "%s delivered object %s to %s, not %s: wrong recipient", l.Provider, l.ObjectID, l.Recipient, m.Identity)
				default:
					confirmed = true
					why(r.Seq, "%s holds object %s for this dispatch with the content's SHA-256: confirmed", l.Provider, l.ObjectID)
				}
			case "absent":
				why(r.Seq, "%s reports no such object (authoritative: %v); absence never frees a key by itself", l.Provider, l.Authoritative)
			case "cant_tell":
				why(r.Seq, "%s could not tell", l.Provider)
			default:
				return FailClosed(fmt.Errorf("record %d has unknown lookup result %q", r.Seq, l.Result))
			}
		case KindLabel:
			why(r.Seq, "the executor's own label %q is ignored: side-effect evidence decides", r.Label)
		case KindResult:
			if r.Error != "" {
				why(r.Seq, "step %d ended with an error: %s", r.Step, r.Error)
			}
		default:
			return FailClosed(fmt.Errorf("record %d has unknown kind %q", r.Seq, r.Kind))
		}
	}

	switch {
	case rejected:
		c.Outcome = gate.SentRejected
	case confirmed:
		c.Outcome = gate.SentVerified
	case mayHaveSubmitted:
		c.Outcome = gate.SendStatusUnknown
		c.Reasons = append(c.Reasons, "no confirmation bound to this dispatch: the result is unknown and the key stays consumed")
	case !t.Complete:
		c = FailClosed(fmt.Errorf("the transcript is incomplete (not sealed), so it cannot prove that nothing was sent"))
		c.Reasons = append(c.Reasons, "no may_submit or submit step was recorded before it ends")
	default:
		c.Outcome = gate.NotSent
		c.Reasons = append(c.Reasons, "the transcript is complete and no may_submit or submit step began: nothing was sent")
	}
	return c
}

func countMatchingBefore(items []Item, m Manifest, needSize bool) int {
	n := 0
	for _, it := range items {
		if NameMatches(it.Name, m.FileName) && SizeMatches(it.Size, m.Size) && (it.Size != "" || !needSize) {
			n++
		}
	}
	return n
}

package evidence

import "time"

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

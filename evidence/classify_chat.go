package evidence

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

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

package driver

import (
	"fmt"
	"strings"
)

// ProfileSummary is what `sendonce profile check` prints of a valid profile: how it
// crosses the gate's boundaries, and what it relies on to prove a delivery.
type ProfileSummary struct {
	App     string         `json:"app"`
	Source  string         `json:"source"`
	Process string         `json:"process"`
	Window  string         `json:"window_title,omitempty"`
	Phases  []PhaseSummary `json:"phases"`
	// OneItemOurs is what proves, before the send, that the send page holds exactly one
	// item and that it is ours.
	OneItemOurs string `json:"one_item_ours"`
	// Confirms is what confirms a delivery on the screen ("" when only the provider can).
	Confirms string `json:"confirms"`
	// ScreenCannot says why the screen cannot confirm when the profile reads sent items
	// but marks our side by something a peer can produce.
	ScreenCannot string `json:"screen_cannot_confirm,omitempty"`
}

// PhaseSummary is one phase: its steps, and which one crosses a boundary.
type PhaseSummary struct {
	Name    string `json:"name"`
	Steps   int    `json:"steps"`
	Crosses string `json:"crosses,omitempty"` // "STEP crosses BOUNDARY (class)"
	// Conditional steps run only when their text shows.
	Conditional int `json:"conditional,omitempty"`
}

// Summary describes a valid profile.
func (p *Profile) Summary() ProfileSummary {
	s := ProfileSummary{App: p.App, Source: p.Source, Process: p.Process, Window: p.WindowTitle}
	for _, ph := range []struct {
		name  string
		steps []Step
	}{{"clean", p.Clean}, {"open_conversation", p.OpenConversation}, {"open_picker", p.OpenPicker},
		{"choose_file", p.ChooseFile}, {"send", p.Send}, {"dismiss", p.Dismiss}} {
		ps := PhaseSummary{Name: ph.name, Steps: len(ph.steps)}
		for _, st := range ph.steps {
			if st.Crosses != "" {
				ps.Crosses = fmt.Sprintf("%q crosses %s (%s)", st.Name, st.Crosses, st.Class)
			}
			if st.If != nil {
				ps.Conditional++
			}
		}
		s.Phases = append(s.Phases, ps)
	}
	if p.ChoosingSends() {
		s.OneItemOurs = "nothing can be checked before the send: choosing the file sends it (the send page is never shown)"
	} else {
		s.OneItemOurs = fmt.Sprintf("the send page, read by OCR in %s, lists exactly one item named like the file, and at most one size, the file's", p.SendPage.Region)
		if len(p.NamesShownFor) > 0 {
			s.OneItemOurs = fmt.Sprintf("for files named %s: %s; for any other file: ", strings.Join(p.NamesShownFor, ", "), s.OneItemOurs)
			if p.ItemMark != "" {
				s.OneItemOurs += fmt.Sprintf("by difference, no item mark (%s) on the send page when choose_file begins and exactly one when it ends", p.ItemMark)
			} else {
				s.OneItemOurs += "NOTHING can prove it (no item_mark): deliver refuses such a file before the claim"
			}
		}
		if p.NameShownChars > 0 {
			s.OneItemOurs += fmt.Sprintf("; a name of more than %d character cells (a CJK character or an emoji takes two) shows cut, and ", p.NameShownChars)
			if p.ItemMark != "" {
				s.OneItemOurs += "is proven by difference (item_mark)"
			} else {
				s.OneItemOurs += "nothing can prove it: deliver refuses such a file before the claim"
			}
		}
	}
	switch c := p.Confirm; {
	case c.ScreenConfirms():
		s.Confirms = fmt.Sprintf("in the chat (%s), more finished items named like ours than before the send, the newest one's author drawn in rgb(%d,%d,%d) (our side's colour, which only the app draws), the view at its end, held for %s",
			p.Chat.Region, c.AuthorColor[0], c.AuthorColor[1], c.AuthorColor[2], c.Settle.Duration)
	case c != nil:
		s.ScreenCannot = fmt.Sprintf("our side's mark, rgb(%d,%d,%d), is one a peer can produce (confirm.mark %s): a delivery is sent_verified only when the provider confirms it (deliver --dest-id with --provider-config), else it ends send_status_unknown for reconcile",
			c.AuthorColor[0], c.AuthorColor[1], c.AuthorColor[2], c.Mark)
	}
	return s
}

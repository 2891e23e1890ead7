package driver

import (
	"fmt"
	"image"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/vision"
)

// validate checks what a profile must hold; each error names the profile, the field
// or step, and what to change.
func (p *Profile) validate() error {
	if p.App == "" || p.Process == "" && len(p.Processes) == 0 && p.ProcessPattern == "" {
		return fmt.Errorf("profile: app and process (or processes, or process_pattern) are required")
	}
	for field, re := range map[string]string{"process_pattern": p.ProcessPattern, "window_title_pattern": p.WindowTitlePattern} {
		if _, err := regexp.Compile(`^(?:` + re + `)$`); err != nil {
			return fmt.Errorf("profile %s: %s: %v", p.App, field, err)
		}
	}
	if err := p.Timings.validate(p.App); err != nil {
		return err
	}
	if _, err := regexp.Compile(p.ItemMark); err != nil {
		return fmt.Errorf("profile %s: item_mark: %v", p.App, err)
	}
	if p.NameShownChars < 0 {
		return fmt.Errorf("profile %s: name_shown_chars %d: it is the longest name the send page shows whole, in character cells (0 or absent: any)", p.App, p.NameShownChars)
	}
	for _, pat := range p.NamesShownFor {
		if _, err := path.Match(pat, ""); err != nil {
			return fmt.Errorf("profile %s: names_shown_for %q: %v", p.App, pat, err)
		}
	}
	if p.Confirm != nil {
		if err := p.Confirm.validate(p.App); err != nil {
			return err
		}
		if p.Confirm.EndBlank.From != nil {
			return fmt.Errorf("profile %s: confirm.end_blank cannot be placed from an anchor (it is read as pixels, not text)", p.App)
		}
	}
	if p.SendPageMark != nil && p.SendPageMark.Region.From != nil {
		return fmt.Errorf("profile %s: send_page_mark.region cannot be placed from an anchor (the mark is the anchor)", p.App)
	}
	for name, rd := range map[string]Read{"title": p.Title, "chat": p.Chat, "send_page": p.SendPage} {
		if err := rd.Region.checkFrom(fmt.Sprintf("profile %s: %s", p.App, name)); err != nil {
			return err
		}
		if name != "chat" && len(rd.AltPreps) > 0 {
			return fmt.Errorf("profile %s: %s.alt_preps: only the chat is read again with other preparations (remove them)", p.App, name)
		}
		if err := rd.Node.check(fmt.Sprintf("profile %s: %s.node", p.App, name)); err != nil {
			return err
		}
	}
	if p.Tree != "" && p.Tree != TreeRequired {
		return fmt.Errorf("profile %s: tree: %q; it is \"required\" or absent (OCR reads where the app publishes no tree)", p.App, p.Tree)
	}
	switch {
	case p.RegionsIn != "" && p.RegionsIn != RegionsInPage:
		return fmt.Errorf("profile %s: regions_in: %q; it is \"page\" (a web page's regions) or absent (the window's)", p.App, p.RegionsIn)
	case p.RegionsIn == RegionsInPage && p.Tree != TreeRequired:
		return fmt.Errorf("profile %s: regions_in \"page\" places the regions by the app's tree: set tree to \"required\"", p.App)
	}
	if p.OCRLanguages != "" {
		if _, err := vision.ParseLanguages(p.OCRLanguages); err != nil {
			return fmt.Errorf("profile %s: ocr_languages: %v", p.App, err)
		}
	}
	chooseWant, sendWant := map[evidence.Class]int{evidence.MaySubmit: 1}, map[evidence.Class]int{evidence.Submit: 1}
	if p.ChoosingSends() {
		if len(p.Send) > 0 {
			return fmt.Errorf("profile %s: choose_file's step crosses choose_file and send, so the send phase must be empty", p.App)
		}
		chooseWant, sendWant = map[evidence.Class]int{evidence.Submit: 1}, nil
	}
	phases := []struct {
		name  string
		steps []Step
		want  map[evidence.Class]int // exact count of crossing classes
	}{
		{"clean", p.Clean, nil},
		{"open_conversation", p.OpenConversation, nil},
		{"open_picker", p.OpenPicker, nil},
		{"choose_file", p.ChooseFile, chooseWant},
		{"send", p.Send, sendWant},
		{"dismiss", p.Dismiss, nil},
	}
	for _, ph := range phases {
		count := map[evidence.Class]int{}
		// Once the file may be attached (its path typed, or choose_file's crossing) and
		// on the send page (send), a safe step could send it: it may not submit by
		// another name.
		chosen := ph.name == "send"
		for i, s := range ph.steps {
			where := fmt.Sprintf("profile %s: %s step %d (%s)", p.App, ph.name, i+1, s.Name)
			if chosen && s.Class == evidence.Safe {
				if why := couldSubmit(s); why != "" {
					return fmt.Errorf("%s: a safe step %s once the file is chosen, and that could send it: make it the phase's crossing step, or drop it", where, why)
				}
			}
			if s.Class != evidence.Safe || s.Do == "type_path" {
				chosen = true
			}
			if err := s.Region.checkFrom(where); err != nil {
				return err
			}
			if err := s.Node.check(where); err != nil {
				return err
			}
			if searchesForClick(s) && p.chatShows(ph.name) && p.overlapsChat(s) {
				return fmt.Errorf("%s: %s searches the chat region for %q while the conversation shows: a peer's message quoting that label could be clicked; narrow its region to the control (or, if the send page covers the chat, say send_page_covers_chat)", where, s.Do, s.Text)
			}
			input, ok := stepKind(s.Do)
			switch {
			case !ok:
				return fmt.Errorf("%s: unknown step kind %q", where, s.Do)
			case s.Class != evidence.Safe && s.Class != evidence.MaySubmit && s.Class != evidence.Submit:
				return fmt.Errorf("%s: class must be safe, may_submit or submit", where)
			case s.Class != evidence.Safe && !input:
				return fmt.Errorf("%s: a %s step must send input", where, s.Class)
			case s.Crosses == choosingSends && (ph.name != "choose_file" || s.Class != evidence.Submit):
				return fmt.Errorf("%s: only a submit step of choose_file crosses %q (an app whose choosing of the file sends it)", where, choosingSends)
			case s.Class != evidence.Safe && s.Crosses != ph.name && s.Crosses != choosingSends:
				return fmt.Errorf("%s: a %s step must say \"crosses\": %q", where, s.Class, ph.name)
			case s.Class == evidence.Safe && s.Crosses != "":
				return fmt.Errorf("%s: a safe step crosses nothing", where)
			case s.If != nil && s.Class != evidence.Safe:
				return fmt.Errorf("%s: a %s step may not be conditional (if): a boundary is crossed every time, or the profile is wrong", where, s.Class)
			case s.If != nil && s.If.Text == "":
				return fmt.Errorf("%s: if.text is required", where)
			case s.WholeLine && (s.Do != "wait_text" || s.Suffix || s.Exact):
				return fmt.Errorf("%s: whole_line is for wait_text steps, without suffix or exact", where)
			case s.Do == "read_field" && (s.Text == "" || s.Window == "" || s.Class != evidence.Safe):
				return fmt.Errorf("%s: a read_field step is safe and names the text the field must hold and the dialog (window) it is in", where)
			case (s.Do == "wait_node" || s.Do == "wait_node_gone" || s.Do == "click_node") && s.Node == nil:
				return fmt.Errorf("%s: a %s step needs a node", where, s.Do)
			case s.Node != nil && !nodeSteps[s.Do]:
				return fmt.Errorf("%s: node is for wait_node, wait_node_gone and click_node steps, and for wait_text, click_text, wait_gone, click_offset and hover_offset (read from the tree where there is one, by OCR or the offset where not)", where)
			case s.Do == "wait_color" && (s.Color == nil || s.Region == nil || s.Region.From != nil || s.Region.Centred):
				return fmt.Errorf("%s: a wait_color step needs a color and a region of fixed place (a part of the window no message can paint)", where)
			case s.Do == "wait_color" && p.chatShows(ph.name) && p.overlapsChat(s):
				return fmt.Errorf("%s: wait_color reads the chat region while the conversation shows: a peer's image could show that colour; read a part of the window no message can paint", where)
			case s.Do != "wait_color" && (s.Color != nil || s.ColorTolerance != 0):
				return fmt.Errorf("%s: color and color_tolerance are for wait_color steps only", where)
			case s.ColorTolerance < 0 || s.ColorTolerance > 442:
				return fmt.Errorf("%s: color_tolerance %v: it is a distance in RGB, 0 to 442", where, s.ColorTolerance)
			case s.AfterChange && s.Do != "wait_text":
				return fmt.Errorf("%s: after_change is for wait_text steps only", where)
			case s.AfterChange && !inputBefore(ph.steps[:i]):
				return fmt.Errorf("%s: after_change needs an input step before it in the phase (the change is the input's)", where)
			case ph.name == "dismiss" && s.Do != "escape_window" && s.Do != "escape_text" && !(s.Do == "key" && strings.EqualFold(s.Keys, "escape")):
				return fmt.Errorf("%s: dismiss uses Escape only, never a click near a send control", where)
			case ph.name == "clean" && (s.Do == "click_text" || s.Do == "click_offset" || s.Do == "click_node"):
				return fmt.Errorf("%s: clean dismisses leftovers with Escape only, never a click", where)
			}
			count[s.Class]++
		}
		if ph.want == nil {
			if count[evidence.MaySubmit]+count[evidence.Submit] > 0 {
				return fmt.Errorf("profile %s: phase %s may not hold may_submit or submit steps", p.App, ph.name)
			}
			continue
		}
		for c, n := range ph.want {
			if count[c] != n || count[evidence.MaySubmit]+count[evidence.Submit] != n {
				return fmt.Errorf("profile %s: phase %s must hold exactly %d %s step(s) and no other crossing step", p.App, ph.name, n, c)
			}
		}
	}
	if len(p.ChooseFile) == 0 || len(p.Send) == 0 && !p.ChoosingSends() {
		return fmt.Errorf("profile %s: choose_file and send are required", p.App)
	}
	return nil
}

func (t Timings) validate(app string) error {
	for name, d := range map[string]Duration{"step_timeout": t.StepTimeout, "title_deadline": t.TitleDeadline,
		"escape_settle": t.EscapeSettle, "window_close": t.WindowClose, "focus_settle": t.FocusSettle} {
		if d.Duration < 0 || d.Duration > 10*time.Minute {
			return fmt.Errorf("profile %s: timings.%s %v is out of range (0 for the default, at most 10m)", app, name, d.Duration)
		}
	}
	return nil
}

// checkFrom validates a region's anchor: a text, a positive size, no anchor of its own.
func (r *Region) checkFrom(where string) error {
	switch {
	case r == nil || r.From == nil:
		return nil
	case r.From.Text == "":
		return fmt.Errorf("%s: region.from.text is required", where)
	case r.W <= 0 || r.H <= 0:
		return fmt.Errorf("%s: a region from an anchor needs a positive w and h", where)
	case r.From.Region.From != nil:
		return fmt.Errorf("%s: region.from.region may not have an anchor of its own", where)
	}
	return nil
}

// nodeSteps are the step kinds that may name a node: the tree's own, and those whose
// OCR the tree replaces where there is one.
var nodeSteps = map[string]bool{"wait_node": true, "wait_node_gone": true, "click_node": true, "wait_text": true, "click_text": true, "wait_gone": true,
	"click_offset": true, "hover_offset": true}

// chatShows says whether the conversation (the chat region, in the window the steps
// work in) can show during a phase: not before an app's conversation window is entered,
// not behind a send page that covers it.
func (p *Profile) chatShows(phase string) bool {
	switch phase {
	case "clean", "open_conversation":
		return p.ConversationWindow == ""
	case "choose_file", "send":
		return !p.SendPageCoversChat
	}
	return true
}

// searchesForClick says whether a step finds text on screen in order to put the pointer
// on it (in the working window, not in a dialog of its own).
func searchesForClick(s Step) bool {
	return (s.Do == "click_text" || s.Do == "hover_text") && s.Window == ""
}

// referenceWindows are the window sizes at which a profile's regions are checked for
// overlap with the chat: a region that overlaps it at any of them is refused.
var referenceWindows = []image.Rectangle{image.Rect(0, 0, 1280, 800), image.Rect(0, 0, 1024, 768), image.Rect(0, 0, 1920, 1080)}

// overlapsChat says whether a step's search region overlaps the chat region at one of
// the reference window sizes (a region placed from an anchor is checked at run time).
func (p *Profile) overlapsChat(s Step) bool {
	if p.Chat.Window != "" || p.Chat.Region.From != nil || s.Region != nil && s.Region.From != nil {
		return false
	}
	for _, w := range referenceWindows {
		search := w
		if s.Region != nil {
			search = s.Region.In(w)
		}
		if search.Overlaps(p.Chat.Region.In(w)) {
			return true
		}
	}
	return false
}

// couldSubmit says how a step could submit what the send page holds, or "": a key
// that evidence.CouldSubmit does not know to be harmless (Return, Enter, Space, an app's
// shortcut), typed text with a line break, or a click that is not inside a named dialog.
// The classifier judges recorded keys and typed text the same way, whatever the class.
func couldSubmit(s Step) string {
	switch {
	case s.Do == "key" && evidence.CouldSubmit(evidence.KeyInput(s.Keys)) != "":
		return "presses " + s.Keys
	case (s.Do == "type_text" || s.Do == "type_path") && strings.ContainsAny(s.Text, "\r\n"):
		return "types a line break"
	case s.Do == "click_offset", s.Do == "click_text" && s.Window == "":
		return "clicks outside a named dialog"
	}
	return ""
}

// inputBefore says whether one of steps sends input.
func inputBefore(steps []Step) bool {
	for _, s := range steps {
		if input, _ := stepKind(s.Do); input {
			return true
		}
	}
	return false
}

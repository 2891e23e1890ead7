package driver

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Profiles finds a chat app's profile by its name: NAME.json in each of Dirs, in
// order, then the built-ins. A profile in a folder shadows a built-in of the same name;
// a user adds an app by writing a file, not Go code.
type Profiles struct {
	Dirs []string
}

// profileName is what an app's name may be: it names a file.
var profileName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// Load finds the profile named app.
func (ps Profiles) Load(app string) (*Profile, error) {
	if !profileName.MatchString(app) {
		return nil, fmt.Errorf("%q is not a profile name (lower-case letters, digits, - and _): give --profile FILE for a profile file", app)
	}
	for _, dir := range ps.Dirs {
		path := filepath.Join(dir, app+".json")
		p, err := LoadProfileFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if p.App != app {
			return nil, fmt.Errorf("%s: the file is named %s.json, but its app is %q: name it %s.json", path, app, p.App, p.App)
		}
		return p, nil
	}
	b, err := builtinProfiles.ReadFile("profiles/" + app + ".json")
	if err != nil {
		return nil, fmt.Errorf("no profile %q in %s or built in (known: %s)", app, ps.where(), strings.Join(ps.names(), ", "))
	}
	p, err := ParseProfile(b)
	if err != nil {
		return nil, err
	}
	p.Source = "built-in"
	return p, nil
}

func (ps Profiles) where() string {
	if len(ps.Dirs) == 0 {
		return "no profiles folder"
	}
	return strings.Join(ps.Dirs, ", ")
}

func (ps Profiles) names() []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range ps.List() {
		if !seen[e.App] && e.Error == "" {
			seen[e.App] = true
			out = append(out, e.App)
		}
	}
	sort.Strings(out)
	return out
}

// LoadProfileFile reads a profile file, validated exactly as a built-in is.
func LoadProfileFile(path string) (*Profile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := ParseProfile(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p.Source = path
	return p, nil
}

// ProfileEntry is one profile as `sendonce profile list` shows it.
type ProfileEntry struct {
	App    string `json:"app"`
	Source string `json:"source"` // the file, or "built-in"
	// Shadows: this file hides the built-in profile of the same name. ShadowedBy: an
	// earlier folder's file (or, for a built-in, a folder's) is used instead of this one.
	Shadows    bool   `json:"shadows_builtin,omitempty"`
	ShadowedBy string `json:"shadowed_by,omitempty"`
	Error      string `json:"error,omitempty"` // the file does not validate: it is never used
}

// List is every profile the folders and the built-ins hold, in the order Load looks.
func (ps Profiles) List() []ProfileEntry {
	builtin := map[string]bool{}
	for _, app := range builtinApps() {
		builtin[app] = true
	}
	used := map[string]string{} // app -> the source Load would use
	var out []ProfileEntry
	for _, dir := range ps.Dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		sort.Strings(files)
		for _, f := range files {
			app := strings.TrimSuffix(filepath.Base(f), ".json")
			e := ProfileEntry{App: app, Source: f}
			p, err := LoadProfileFile(f)
			switch {
			case err != nil:
				e.Error = err.Error()
			case p.App != app:
				e.Error = fmt.Sprintf("the file is named %s.json, but its app is %q", app, p.App)
			case used[app] != "":
				e.ShadowedBy = used[app]
			default:
				used[app], e.Shadows = f, builtin[app]
			}
			out = append(out, e)
		}
	}
	for _, app := range builtinApps() {
		out = append(out, ProfileEntry{App: app, Source: "built-in", ShadowedBy: used[app]})
	}
	return out
}

// builtinApps lists the built-in profiles.
func builtinApps() []string {
	entries, _ := builtinProfiles.ReadDir("profiles")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".json"))
	}
	return out
}

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

// String is a region as a profile writes it.
func (r Region) String() string { return fmt.Sprintf("x %d, y %d, w %d, h %d", r.X, r.Y, r.W, r.H) }

package driver

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

//go:embed profiles/*.json
var builtinProfiles embed.FS

// LoadProfile reads a built-in profile by app name.
func LoadProfile(app string) (*Profile, error) { return Profiles{}.Load(app) }

// KnownApps lists the built-in profiles.
func KnownApps() []string { return builtinApps() }

// ParseProfile reads and validates a profile.
func ParseProfile(b []byte) (*Profile, error) {
	var p Profile
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	p.Text = b
	return &p, p.validate()
}

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

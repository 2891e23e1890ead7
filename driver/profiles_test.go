package driver

import (
	"context"
	"errors"
	"image"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// minimal is the smallest valid profile, for an app named app.
func minimal(app string) string {
	return `{"app":"` + app + `","process":"` + app + `",
	 "choose_file":[{"name":"c","do":"key","keys":"Return","class":"may_submit","crosses":"choose_file"}],
	 "send":[{"name":"s","do":"key","keys":"Return","class":"submit","crosses":"send"}]}`
}

// TestProfilesFromFolders: a profile is a file in a folder, looked up before the
// built-ins: it adds an app, or shadows a built-in of the same name; an invalid or
// misnamed file is never used, and says why.
func TestProfilesFromFolders(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	builtin := KnownApps()[0]
	write := func(dir, name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	mine := write(first, "mychat.json", minimal("mychat"))
	shadow := write(first, builtin+".json", minimal(builtin))
	write(second, "mychat.json", minimal("mychat")) // hidden by the first folder's
	write(first, "broken.json", `{"app":"broken","process":"broken"}`)
	write(first, "misnamed.json", minimal("othername"))
	ps := Profiles{Dirs: []string{first, second}}

	p, err := ps.Load("mychat")
	if err != nil || p.Source != mine {
		t.Fatalf("mychat: %v from %q; want it from %s", err, p.Source, mine)
	}
	if p, err := ps.Load(builtin); err != nil || p.Source != shadow {
		t.Fatalf("%s: %v; want the folder's file to shadow the built-in", builtin, err)
	}
	if p, err := (Profiles{}).Load(builtin); err != nil || p.Source != "built-in" {
		t.Fatalf("%s with no folder: %v; want the built-in", builtin, err)
	}
	for name, want := range map[string]string{
		"broken":   "phase choose_file must hold exactly 1 may_submit step",
		"misnamed": `its app is "othername"`,
		"../x":     "not a profile name",
		"absent":   "no profile",
	} {
		if _, err := ps.Load(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error saying %q", name, err, want)
		}
	}

	got := map[string]ProfileEntry{}
	for _, e := range ps.List() {
		if e.Source == "built-in" && e.App != builtin {
			continue // the other built-ins
		}
		got[e.Source] = e
	}
	switch {
	case !got[shadow].Shadows:
		t.Errorf("list: %s does not say it shadows the built-in: %+v", shadow, got[shadow])
	case got["built-in"].ShadowedBy != shadow:
		t.Errorf("list: the built-in %s does not say %s is used instead: %+v", builtin, shadow, got["built-in"])
	case got[filepath.Join(second, "mychat.json")].ShadowedBy != mine:
		t.Errorf("list: the second folder's mychat does not say the first's is used")
	case got[filepath.Join(first, "broken.json")].Error == "" || got[filepath.Join(first, "misnamed.json")].Error == "":
		t.Errorf("list: the broken and misnamed files are not flagged: %+v", got)
	}
}

// TestProfileErrorsNameWhere: a profile's error names the phase, the step and the field.
func TestProfileErrorsNameWhere(t *testing.T) {
	bad := strings.Replace(minimal("x"), `"class":"submit"`, `"class":"harmless"`, 1)
	_, err := ParseProfile([]byte(bad))
	for _, want := range []string{"send step 1", "(s)", "class"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v; want it to name %q", err, want)
		}
	}
}

// TestSafeStepsThatCouldSend: once the file is chosen, and on the send page, a step
// labelled safe may not press Return or Enter, type a line break, or click outside a
// named dialog: each could send the file under a safe label. Before the file is chosen,
// and inside a named dialog, they may.
func TestSafeStepsThatCouldSend(t *testing.T) {
	profile := func(chooseBefore, chooseAfter, sendBefore string) string {
		return `{"app":"x","process":"x",
		 "choose_file":[{"name":"pick","do":"key","keys":"Return","class":"safe"}` + chooseBefore + `,
		   {"name":"c","do":"key","keys":"Return","class":"may_submit","crosses":"choose_file"}` + chooseAfter + `],
		 "send":[` + sendBefore + `{"name":"s","do":"key","keys":"Return","class":"submit","crosses":"send"}]}`
	}
	for name, tc := range map[string]struct {
		typed, after, before string
		want                 string
	}{
		"Return after the file is chosen": {after: `,{"name":"confirm","do":"key","keys":"KP_Enter","class":"safe"}`, want: "presses KP_Enter"},
		"a click on the send page":        {before: `{"name":"focus","do":"click_text","text":"Send","class":"safe"},`, want: "clicks outside a named dialog"},
		"a click at an offset":            {before: `{"name":"focus","do":"click_offset","offset":{"X":5,"Y":5},"class":"safe"},`, want: "clicks outside a named dialog"},
		"a typed line break":              {before: `{"name":"caption","do":"type_text","text":"hi\n","class":"safe"},`, want: "types a line break"},
		"ctrl+Return in send":             {before: `{"name":"x","do":"key","keys":"ctrl+Return","class":"safe"},`, want: "presses ctrl+Return"},
		"a click inside a named dialog":   {before: `{"name":"ok","do":"click_text","text":"OK","window":"Warning","class":"safe"},`},
		"a wait on the send page":         {before: `{"name":"w","do":"wait_text","text":"x","class":"safe"},`},
		"an app's shortcut in send":       {before: `{"name":"x","do":"key","keys":"ctrl+shift+u","class":"safe"},`, want: "presses ctrl+shift+u"},
		"Escape in send":                  {before: `{"name":"x","do":"key","keys":"Escape","class":"safe"},`},
		"select all after the typed path": {after: `,{"name":"sel","do":"key","keys":"ctrl+a","class":"safe"}`},
		"Return after the typed path":     {typed: `,{"name":"t","do":"type_path","class":"safe"},{"name":"ok","do":"key","keys":"Return","class":"safe"}`, want: "presses Return"},
	} {
		_, err := ParseProfile([]byte(profile(tc.typed, tc.after, tc.before)))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v; want it accepted", name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want it refused: %q", name, err, tc.want)
		}
	}
}

// windowsOnly is a desktop that lists windows and does nothing else. The keyboard focus
// is in the window of ID focus, or else, as a window manager would have it, in the
// newest viewable one.
type windowsOnly struct {
	ws    []Window
	focus uint32
}

func (d windowsOnly) Windows(context.Context) ([]Window, error)                   { return d.ws, nil }
func (windowsOnly) Activate(context.Context, Window) error                        { return nil }
func (windowsOnly) Click(context.Context, image.Point) error                      { return nil }
func (windowsOnly) Key(context.Context, string) error                             { return nil }
func (windowsOnly) Type(context.Context, string) error                            { return nil }
func (windowsOnly) Move(context.Context, image.Point) error                       { return nil }
func (windowsOnly) Capture(context.Context, image.Rectangle) (*image.RGBA, error) { return nil, nil }
func (windowsOnly) Bounds() image.Rectangle                                       { return image.Rect(0, 0, 1280, 800) }
func (windowsOnly) FieldText(context.Context, Window) (string, error) {
	return "", errors.New("windowsOnly has no fields")
}
func (d windowsOnly) Focused(context.Context) (Window, error) {
	for i := len(d.ws) - 1; i >= 0; i-- {
		if (d.focus == 0 && d.ws[i].Viewable) || d.ws[i].ID == d.focus {
			return d.ws[i], nil
		}
	}
	return Window{}, nil
}

// TestWindowMatching: a profile finds its app's window by a list of process names or a
// pattern, and by a title pattern; anything else is not its window.
func TestWindowMatching(t *testing.T) {
	desk := windowsOnly{ws: []Window{
		{ID: 1, Process: "psi-plus", Title: "Psi+ (alice)", Viewable: true},
		{ID: 2, Process: "gajim", Title: "Gajim", Viewable: true},
		{ID: 3, Process: "psi-plus", Title: "Psi+ (alice)", Viewable: false},
	}}
	for name, tc := range map[string]struct {
		profile string
		want    uint32 // 0: not found
	}{
		"a list of names":       {`"processes":["psi","psi-plus"],"window_title_pattern":"Psi\\+ \\(.*\\)"`, 1},
		"a pattern":             {`"process_pattern":"psi(-plus)?","window_title_pattern":"Psi\\+.*"`, 1},
		"the name alone":        {`"process":"gajim","window_title":"Gajim"`, 2},
		"a pattern is whole":    {`"process_pattern":"psi","window_title_pattern":"Psi\\+.*"`, 0},
		"a title that differs":  {`"process":"gajim","window_title":"Gajim Settings"`, 0},
		"a title pattern wrong": {`"processes":["psi-plus"],"window_title_pattern":"Psi"`, 0},
	} {
		text := strings.Replace(minimal("x"), `"process":"x",`, tc.profile+",", 1)
		p, err := ParseProfile([]byte(text))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		w, err := FindWindow(context.Background(), desk, p)
		switch {
		case tc.want == 0 && !errors.Is(err, ErrWindow):
			t.Errorf("%s: found window %d; want none", name, w.ID)
		case tc.want != 0 && (err != nil || w.ID != tc.want):
			t.Errorf("%s: window %d, %v; want window %d", name, w.ID, err, tc.want)
		}
	}
	if _, err := ParseProfile([]byte(strings.Replace(minimal("x"), `"process":"x",`, `"process_pattern":"psi(",`, 1))); err == nil || !strings.Contains(err.Error(), "process_pattern") {
		t.Errorf("a pattern that does not compile: %v", err)
	}
}

// TestTimings: a profile's timings replace the runner's defaults; zero keeps each one,
// and a negative or huge value is refused.
func TestTimings(t *testing.T) {
	var none Timings
	if none.titleDeadline() != 4*time.Second || none.stepTimeout() != 10*time.Second || none.escapeSettle() != 400*time.Millisecond ||
		none.windowClose() != 3*time.Second {
		t.Fatalf("the defaults changed: %v %v %v %v", none.titleDeadline(), none.stepTimeout(), none.escapeSettle(), none.windowClose())
	}
	text := strings.Replace(minimal("x"), `"process":"x",`, `"process":"x","timings":{"title_deadline":"9s","step_timeout":"30s"},`, 1)
	p, err := ParseProfile([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Profile: p}
	if p.Timings.titleDeadline() != 9*time.Second || r.timeout(Step{}) != 30*time.Second || r.timeout(Step{Timeout: Duration{time.Second}}) != time.Second {
		t.Fatalf("the profile's timings are not used: %v, %v", p.Timings.titleDeadline(), r.timeout(Step{}))
	}
	for _, bad := range []string{`"-1s"`, `"11m"`} {
		text := strings.Replace(minimal("x"), `"process":"x",`, `"process":"x","timings":{"escape_settle":`+bad+`},`, 1)
		if _, err := ParseProfile([]byte(text)); err == nil || !strings.Contains(err.Error(), "timings.escape_settle") {
			t.Errorf("escape_settle %s: %v; want it refused", bad, err)
		}
	}
}

// TestConditionalCrossingRefused: only a safe step may be conditional; a crossing runs
// every time.
func TestConditionalCrossingRefused(t *testing.T) {
	text := strings.Replace(minimal("x"), `"class":"submit","crosses":"send"`, `"class":"submit","crosses":"send","if":{"text":"Send"}`, 1)
	if _, err := ParseProfile([]byte(text)); err == nil || !strings.Contains(err.Error(), "may not be conditional") {
		t.Fatalf("a conditional send: %v; want it refused", err)
	}
	text = strings.Replace(minimal("x"), `"send":[`, `"send":[{"name":"maybe","do":"wait_text","text":"x","class":"safe","if":{"text":"Uploading"}},`, 1)
	if _, err := ParseProfile([]byte(text)); err != nil {
		t.Fatalf("a conditional safe wait: %v; want it accepted", err)
	}
}

// TestChoosingSendsProfile: an app whose choosing of the file sends it: one submit step
// of choose_file crosses "choose_file,send", and the send phase is empty. Anything else
// that says so is refused.
func TestChoosingSendsProfile(t *testing.T) {
	ok := `{"app":"x","process":"x",
	 "choose_file":[{"name":"pick and send","do":"key","keys":"Return","class":"submit","crosses":"choose_file,send"},
	   {"name":"wait","do":"wait_text","text":"x","class":"safe"}]}`
	p, err := ParseProfile([]byte(ok))
	if err != nil || !p.ChoosingSends() {
		t.Fatalf("%v; want a valid profile whose choosing sends", err)
	}
	for name, text := range map[string]string{
		"a send phase beside it": strings.Replace(ok, `]}`, `],"send":[{"name":"s","do":"key","keys":"Return","class":"submit","crosses":"send"}]}`, 1),
		"as may_submit":          strings.Replace(ok, `"class":"submit","crosses":"choose_file,send"`, `"class":"may_submit","crosses":"choose_file,send"`, 1),
		"in the send phase": `{"app":"x","process":"x",
		 "choose_file":[{"name":"c","do":"key","keys":"Return","class":"may_submit","crosses":"choose_file"}],
		 "send":[{"name":"s","do":"key","keys":"Return","class":"submit","crosses":"choose_file,send"}]}`,
		"a safe Return after it": strings.Replace(ok, `{"name":"wait","do":"wait_text","text":"x","class":"safe"}`, `{"name":"again","do":"key","keys":"Return","class":"safe"}`, 1),
	} {
		if _, err := ParseProfile([]byte(text)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestCentredRegion: a centred region follows the window: the same overlay in a small
// and a large window, offset from its centre.
func TestCentredRegion(t *testing.T) {
	r := Region{W: 400, H: 200, Centred: true}
	for _, tc := range []struct {
		window image.Rectangle
		want   image.Rectangle
	}{
		{image.Rect(0, 0, 1280, 800), image.Rect(440, 300, 840, 500)},
		{image.Rect(100, 50, 900, 650), image.Rect(300, 250, 700, 450)},
		{image.Rect(0, 0, 300, 100), image.Rect(0, 0, 300, 100)}, // larger than the window: clipped to it
	} {
		if got := r.In(tc.window); got != tc.want {
			t.Errorf("in %v: %v; want %v", tc.window, got, tc.want)
		}
	}
	if got := (Region{X: 10, Y: -20, W: 100, H: 50, Centred: true}).In(image.Rect(0, 0, 1000, 1000)); got != image.Rect(460, 455, 560, 505) {
		t.Errorf("offset: %v", got)
	}
}

// TestReadInANamedWindow: a Read that names a window looks in that window, wherever it
// is, not in the main one; a window that is not there is an error, not the main window.
func TestReadInANamedWindow(t *testing.T) {
	main := Window{ID: 1, Process: "x", Title: "X", Viewable: true, Bounds: image.Rect(0, 0, 1280, 800)}
	dialog := Window{ID: 2, Process: "x", Title: "Send Files - X", Viewable: true, Bounds: image.Rect(300, 200, 900, 600)}
	r := &Runner{Driver: windowsOnly{ws: []Window{main, dialog}}, Profile: &Profile{App: "x", Process: "x"}}
	r.window = main
	got, err := r.area(context.Background(), Read{Region: Region{X: 10, Y: 20, W: 100, H: 50}, Window: "Send Files"})
	if err != nil || got != image.Rect(310, 220, 410, 270) {
		t.Fatalf("%v, %v; want the region inside the dialog", got, err)
	}
	if got, err := r.area(context.Background(), Read{Region: Region{X: 10, Y: 20, W: 100, H: 50}}); err != nil || got != image.Rect(10, 20, 110, 70) {
		t.Fatalf("%v, %v; want the region inside the main window", got, err)
	}
	if _, err := r.area(context.Background(), Read{Region: Region{W: 10, H: 10}, Window: "Preferences"}); err == nil {
		t.Fatal("a read in a window that is not there found one")
	}
}

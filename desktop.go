package sendonce

import (
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/internal/clock"
	"github.com/sendonce/sendonce/internal/files"
	"github.com/sendonce/sendonce/internal/staging"
	"github.com/sendonce/sendonce/provider/registry"
	storereg "github.com/sendonce/sendonce/store/registry"
	"github.com/sendonce/sendonce/vision"
	"github.com/sendonce/sendonce/vision/atspi"
)

// DoctorRequest is what a delivery would use; doctor checks each part of it.
type DoctorRequest struct {
	Store          string          // the store's location
	App            string          // a profile by name (Options.ProfileDirs, then built in)
	Profile        *driver.Profile // or a profile already loaded (--profile FILE)
	Display        string
	Staging        string
	ProviderConfig string // the provider account; its environment variables when ""
	// Destination is the provider id deliver would take (--dest-id): its provider is
	// the one checked (xmpp when ""), and a Matrix account must be able to read its room.
	Destination  string
	OCRLanguages string // as deliver takes them ("eng+chi_sim"); the profile's when ""
}

// Desktop is how doctor reaches the screen: the same two parts a Deliverer uses. A nil
// OCR with OCRError says why the OCR engine could not start.
type Desktop struct {
	OpenDesktop func(ctx context.Context, display string) (driver.Driver, func(), error)
	OCR         vision.OCR
	OCRError    error
	// LanguageData, when set, checks that the OCR engine's data for a language is
	// installed, with an error naming what to install.
	LanguageData func(lang string) error
}

// DoctorCheck is one check: what it looked at, whether a delivery could use it, what it
// saw, and what to do when not.
type DoctorCheck struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	Saw  string `json:"saw"`
	Fix  string `json:"fix,omitempty"`
}

// DoctorResult is every check; Ready when a delivery could start.
type DoctorResult struct {
	Ready  bool          `json:"ready"`
	Checks []DoctorCheck `json:"checks"`
}

// Doctor checks, functionally, what a delivery needs, and says what to fix: the
// display and its size, the OCR engine (reading the profile's title region), the store
// (opens, schema, a write lock taken and released), the staging folder (the local
// rules), the profile and the app's window, and the provider account when one is
// configured (logs in, reads its archiving preferences). It claims nothing, writes no
// event, and sends no input to the desktop (its driver refuses input).
func Doctor(ctx context.Context, req DoctorRequest, opt Options, desk Desktop) DoctorResult {
	var out DoctorResult
	add := func(name string, err error, saw, fix string) {
		c := DoctorCheck{Name: name, OK: err == nil, Saw: saw}
		if err != nil {
			c.Saw, c.Fix = err.Error(), fix
		}
		out.Checks = append(out.Checks, c)
	}

	add(doctorStore(ctx, req.Store, opt))
	add(doctorStaging(req.Staging))

	p := req.Profile
	var perr error
	if p == nil {
		p, perr = driver.Profiles{Dirs: opt.ProfileDirs}.Load(req.App)
	}
	if perr != nil {
		add("profile", perr, "", "give --app with a profile 'sendonce profile list' shows, or --profile FILE ('sendonce profile check FILE' says what is wrong)")
	} else {
		add("profile", nil, fmt.Sprintf("%s (%s)", p.App, p.Source), "")
	}

	drv, closeDesktop, err := desk.OpenDesktop(ctx, req.Display)
	if err != nil {
		add("display", err, "", "start the X server, or give --display (and XAUTHORITY for its cookie)")
		add("window", errors.New("not looked for: no display"), "", "fix the display first")
	} else {
		defer closeDesktop()
		owner, _ := drv.(driver.ProcessOwner)
		drv = noInput{drv}
		b := drv.Bounds()
		add("display", nil, fmt.Sprintf("%s, %dx%d", req.Display, b.Dx(), b.Dy()), "")
		var w driver.Window
		werr := errors.New("not looked for: the profile is not valid")
		if p != nil {
			w, werr = driver.FindWindow(ctx, drv, p)
		}
		add("window", werr, fmt.Sprintf("%s window %q at %v", w.Process, w.Title, w.Bounds), "start the app and log in on that display, with its main window visible")
		if werr == nil {
			add(doctorOCR(ctx, drv, desk, p, w))
			add(doctorTree(ctx, req.Display, p, w))
			if c, _ := check(out, "staging"); owner != nil && c.OK {
				add(doctorAppReads(req.Staging, owner, p, w))
			}
		}
	}
	if _, ran := check(out, "ocr"); !ran {
		switch {
		case desk.OCRError != nil:
			add("ocr", desk.OCRError, "", "install Tesseract and its English data (Debian: tesseract-ocr tesseract-ocr-eng)")
		case desk.OCR == nil:
			add("ocr", errors.New("no OCR engine"), "", "install Tesseract and its English data (Debian: tesseract-ocr tesseract-ocr-eng)")
		}
	}
	if desk.LanguageData != nil {
		add(doctorLanguages(req.OCRLanguages, p, desk.LanguageData))
	}
	getenv := opt.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	var ns string
	var dest gate.Identity // the request's --dest-id, parsed once
	if req.Destination == "" {
		ns = registry.AccountNamespace(req.ProviderConfig, getenv)
	} else if id, err := gate.ProviderID(req.Destination); err != nil {
		add("provider", err, "", "give --dest-id as deliver takes it: xmpp:user@server, matrix:@user:server or matrix:!room:server")
	} else {
		ns, dest = id.Namespace(), id
	}
	switch _, ran := check(out, "provider"); {
	case ran:
	case registry.Configured(ns, req.ProviderConfig, getenv):
		add(doctorProvider(ctx, ns, dest, req.ProviderConfig, getenv, clock.Or(opt.Clock)()))
	case req.Destination != "":
		// Not a failure: a delivery needs no provider. But the destination was named,
		// so say what its absence costs.
		add("provider", nil, fmt.Sprintf("no %s account given: deliveries to %s are confirmed on screen only, and reconcile cannot ask the provider (give --provider-config FILE; docs/delivering.md names its fields)", ns, req.Destination), "")
	}
	if p != nil && p.Confirm != nil && !p.Confirm.ScreenConfirms() {
		add(doctorConfirmation(p, registry.Configured(ns, req.ProviderConfig, getenv)))
	}
	out.Ready = true
	for _, c := range out.Checks {
		out.Ready = out.Ready && c.OK
	}
	return out
}

// doctorConfirmation says, for a profile whose mark of our side a peer can produce,
// that only the provider confirms, and fails when no provider account is given.
func doctorConfirmation(p *driver.Profile, provider bool) (string, error, string, string) {
	why := fmt.Sprintf("profile %s marks our side by something a peer can produce (confirm.mark %s): the screen alone never confirms a delivery", p.App, p.Confirm.Mark)
	if !provider {
		return "confirmation", errors.New(why + ", and no provider account is given: every delivery would end send_status_unknown"),
			"", "give --dest-id and --provider-config (docs/delivering.md), so that the provider confirms each delivery"
	}
	return "confirmation", nil, why + "; the provider account given confirms it", ""
}

// doctorLanguages checks that the OCR data of each language a delivery would read in
// is installed.
func doctorLanguages(given string, p *driver.Profile, installed func(string) error) (string, error, string, string) {
	langs, err := OCRLanguages(given, p)
	if err != nil {
		return "ocr languages", err, "", "give the languages as Tesseract names them, joined by + (eng+chi_sim)"
	}
	var missing []string
	var errs []error
	for _, l := range langs {
		if err := installed(l); err != nil {
			missing, errs = append(missing, vision.Package(l)), append(errs, err)
		}
	}
	if len(missing) > 0 {
		return "ocr languages", errors.Join(errs...), "", "install " + strings.Join(missing, " ") + " (Debian: apt-get install " + strings.Join(missing, " ") + "), or read in fewer languages (--ocr-lang)"
	}
	return "ocr languages", nil, langs.String() + ": each one's data is installed (a name in another script is read from the app's tree alone)", ""
}

// check is the check of that name, if it ran.
func check(r DoctorResult, name string) (DoctorCheck, bool) {
	for _, c := range r.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return DoctorCheck{}, false
}

// doctorStore opens the store, reads its id and takes its write lock once, changing
// nothing.
func doctorStore(ctx context.Context, loc string, opt Options) (string, error, string, string) {
	fix := "run 'sendonce init --store LOCATION' (or 'init --upgrade' after an upgrade), or fix what the error names (a shared store's replication: docs/fleet.md)"
	o, err := storereg.Open(ctx, loc, registryOptions(opt))
	if err != nil {
		return "store", err, "", fix
	}
	defer o.Store.Close()
	id, err := o.Store.StoreID(ctx)
	if err == nil {
		err = o.Store.Probe(ctx)
	}
	if err != nil {
		return "store", err, "", "the store opened but could not be written: another process holds it, or the disk or the database refuses writes"
	}
	saw := fmt.Sprintf("%s, schema %d, id %s, writable", o.Display, o.SchemaVersion, id)
	if o.Replication != nil {
		saw += "; replication: " + o.Replication.Describe()
	}
	return "store", nil, saw, ""
}

// doctorStaging applies the staging folder's rules without making anything.
func doctorStaging(dir string) (string, error, string, string) {
	fix := "use a folder only you can write (default $XDG_STATE_HOME/sendonce/staging); the app's user reads snapshots through the folder's group"
	if dir == "" {
		return "staging", errors.New("no staging folder given"), "", fix
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "staging", err, "", fix
	}
	if _, err := os.Lstat(abs); errors.Is(err, fs.ErrNotExist) {
		return "staging", nil, abs + " does not exist yet: deliver makes it (0700)", ""
	}
	real, err := files.CheckPrivateDir(abs, os.Getuid())
	if err != nil {
		return "staging", fmt.Errorf("staging folder %s refused: %v", dir, err), "", fix
	}
	return "staging", nil, real + " follows the rules", ""
}

// doctorAppReads checks that the app's process could open a snapshot placed in the
// staging folder.
func doctorAppReads(dir string, owner driver.ProcessOwner, p *driver.Profile, w driver.Window) (string, error, string, string) {
	fix := "give --staging (or SENDONCE_STAGING) a folder of yours that the app's user can enter, with that user's group and mode 0750"
	c, err := owner.Credentials(w.PID)
	if err != nil {
		return "app reads snapshots", fmt.Errorf("reading %s's process (pid %d): %v", p.App, w.PID, err), "", "run doctor as a user who may read the app's /proc entry"
	}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if c.UID != 0 && c.UID != os.Getuid() {
			return "app reads snapshots", fmt.Errorf("%s (pid %d) runs as %s, and the staging folder %s does not exist yet: deliver would make it private (0700), which %s cannot read", p.App, w.PID, staging.UserName(c.UID), dir, staging.UserName(c.UID)), "", fix
		}
		return "app reads snapshots", nil, "the staging folder does not exist yet: deliver makes it private (0700), which the app, running as you, can read", ""
	}
	a, err := openStaging(dir)
	if err != nil {
		return "app reads snapshots", err, "", fix
	}
	if err := a.AppCanRead(c); err != nil {
		return "app reads snapshots", fmt.Errorf("%s (pid %d) runs as %s: %v", p.App, w.PID, staging.UserName(c.UID), err), "", fix
	}
	return "app reads snapshots", nil, fmt.Sprintf("%s (pid %d) runs as %s and can open snapshots in %s", p.App, w.PID, staging.UserName(c.UID), a.Dir()), ""
}

// doctorOCR reads the profile's title region of the app's window.
func doctorOCR(ctx context.Context, drv driver.Driver, desk Desktop, p *driver.Profile, w driver.Window) (string, error, string, string) {
	fix := "install Tesseract and its English data (Debian: tesseract-ocr tesseract-ocr-eng)"
	if desk.OCR == nil {
		err := desk.OCRError
		if err == nil {
			err = errors.New("no OCR engine")
		}
		return "ocr", err, "", fix
	}
	r := vision.Reader{Screen: drv, OCR: desk.OCR}
	region := p.Title.Region.In(w.Bounds)
	look, err := r.Read(ctx, region, p.Title.Prep, p.Title.OCRMode())
	if err != nil {
		return "ocr", err, "", fix
	}
	var words []string
	for _, wd := range look.Words {
		words = append(words, wd.Text)
	}
	// The title region is empty while no conversation is open: the whole window must
	// read as text, or the engine (or its language data) does not work.
	all, err := r.Read(ctx, w.Bounds, vision.Prep{}, vision.Sparse)
	if err != nil {
		return "ocr", err, "", fix
	}
	if len(all.Words) == 0 {
		return "ocr", fmt.Errorf("the OCR engine read no word in the whole %s window", p.App), "", fix
	}
	return "ocr", nil, fmt.Sprintf("%d words in the window; the title region %v reads %q", len(all.Words), region.Sub(w.Bounds.Min), strings.Join(words, " ")), ""
}

// doctorTree reads what the app's window publishes of its widgets on the display's
// accessibility bus. A profile that reads the tree needs it; for one that does not, a
// missing tree is said, not failed.
func doctorTree(ctx context.Context, display string, p *driver.Profile, w driver.Window) (string, error, string, string) {
	fix := "GTK 3 apps: install Debian's libatk-adaptor and start the app without NO_AT_BRIDGE=1; Qt apps: set QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1 and have the session's accessibility bus (at-spi2-core) running before the app starts"
	if atspi.IsChromium("/proc", w.PID) {
		fix = "Chromium-built apps (Chromium, Chrome, Electron): " + atspi.ChromiumFix
	}
	// The read asks the app for its tree as a delivery's does (atspi.AskForTree).
	tree, closeTree := driver.OpenAccessibility(ctx, display)
	defer closeTree()
	root, err := tree.Snapshot(ctx, w.PID, driver.TreeScope{})
	switch {
	case err != nil && p.Tree == driver.TreeRequired:
		return "accessibility", err, "", fix
	case err != nil && p.ReadsTree():
		return "accessibility", nil, fmt.Sprintf("no tree (%v); this profile reads it where there is one, so OCR reads in its place: look-alike letters (Cyrillic В for B) and names in scripts outside the OCR languages cannot be told apart or read", err), ""
	case err != nil:
		return "accessibility", nil, fmt.Sprintf("no tree (%v); this profile reads none, so OCR reads everything", err), ""
	}
	n := 0
	root.Walk(func(*atspi.Node, int) bool { n++; return true })
	return "accessibility", nil, fmt.Sprintf("%s publishes %d nodes on screen (sendonce inspect --app %s prints them)", root.Name, n, p.App), ""
}

// doctorProvider logs in to the provider account and reads what a lookup would read
// over the hour before now (the workstation's clock): the XMPP account's archive and
// upload service, the Matrix destination's room and media repository.
func doctorProvider(ctx context.Context, ns string, destination gate.Identity, config string, getenv func(string) string, now time.Time) (string, error, string, string) {
	fix := "check the account file (--provider-config; docs/delivering.md names its fields) or the provider's SENDONCE_XMPP_* / SENDONCE_MATRIX_* variables; the server must be reachable"
	p, err := registry.Open(ns, config, getenv)
	if err != nil {
		return "provider", err, "", fix
	}
	c, ok := p.(interface {
		Check(ctx context.Context, destination gate.Identity, now time.Time) (string, error)
	})
	if !ok {
		return "provider", errors.New("this provider cannot be checked"), "", fix
	}
	saw, err := c.Check(ctx, destination, now)
	return "provider", err, saw, fix
}

// noInput is doctor's desktop: it can look, never act.
type noInput struct{ driver.Driver }

var errNoInput = errors.New("doctor sends no input")

func (noInput) Activate(context.Context, driver.Window) error { return errNoInput }
func (noInput) Click(context.Context, image.Point) error      { return errNoInput }
func (noInput) Key(context.Context, string) error             { return errNoInput }
func (noInput) Move(context.Context, image.Point) error       { return errNoInput }
func (noInput) Type(context.Context, string) error            { return errNoInput }
func (noInput) FieldText(context.Context, driver.Window) (string, error) {
	return "", errNoInput // it would press ctrl+a
}

// InspectRequest names an app whose accessibility tree to read: by profile (its
// process), by process name or by process id, on the accessibility bus of an X display's
// session (or one given by address).
type InspectRequest struct {
	Display string // the X display whose app's accessibility bus to read (atspi.Locate)
	Bus     string // the accessibility bus's address, instead of the display's
	App     string // a profile's name (Options.ProfileDirs, then built in): the app is its process
	Process string // the app's process name, as profiles name it ("gajim")
	PID     uint32 // the app's process id
	Window  string // only the top-level window of this exact name (after NFC)
	// ShowingOnly leaves out what is not on screen.
	ShowingOnly bool
	Limits      atspi.Limits
}

// InspectResult is an app's accessibility tree: what a profile can address by role and
// name, as the app itself publishes it.
type InspectResult struct {
	Bus      string      `json:"bus"`
	App      atspi.App   `json:"app"`
	Nodes    int         `json:"nodes"`
	Duration Duration    `json:"read_in"`
	Calls    int64       `json:"calls"`      // the D-Bus calls the read made (what it cost the app)
	Answer   Duration    `json:"round_trip"` // the app's mean answer to a message asking nothing (atspi.Bus.RoundTrip); 0 when it did not answer
	Tree     *atspi.Node `json:"tree"`
}

// Duration is a time span in the JSON contract: Go's own spelling ("1.5s").
type Duration time.Duration

func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// Inspect reads an app's accessibility tree, as a person would with Accerciser: to find
// the role and name a profile's step can address. A display, bus or app that cannot be
// reached is ErrDesktopUnavailable.
func Inspect(ctx context.Context, req InspectRequest, opt Options) (InspectResult, error) {
	res, err := inspect(ctx, req, opt)
	return res, desktopUnavailable(err)
}

// inspectPings is how many messages asking nothing inspect times the app's answer by.
const inspectPings = 20

// inspectAskTime bounds how long inspect waits for an app asked for its tree to show a
// page (atspi.AskForTree).
const inspectAskTime = 5 * time.Second

func inspect(ctx context.Context, req InspectRequest, opt Options) (InspectResult, error) {
	match, err := req.process(opt)
	if err != nil {
		return InspectResult{}, err
	}
	// The bus: the one given; else the app's (atspi.Locate) when its process id is
	// given; else the one the display's root window names, to find the app on, and then
	// the app's own, which must be the same.
	addr, check := req.Bus, false
	switch {
	case addr != "":
	case req.Display == "":
		return InspectResult{}, FieldErrorf("display", "is required to find the accessibility bus (or give its address)")
	case req.PID != 0:
		loc, err := atspi.Locate(ctx, req.Display, int(req.PID))
		if err != nil {
			return InspectResult{}, err
		}
		addr = loc.Address
	default:
		if addr, err = atspi.AddressOnDisplay(req.Display); err != nil {
			return InspectResult{}, err
		}
		check = true
	}
	bus, err := atspi.Open(ctx, addr)
	if err != nil {
		return InspectResult{}, err
	}
	defer bus.Close()
	apps, err := bus.Applications(ctx)
	if err != nil {
		return InspectResult{}, err
	}
	var app *atspi.App
	var seen []string
	for i, a := range apps {
		if match(a) {
			if app != nil {
				return InspectResult{}, FieldErrorf("process", "two applications match (pids %d and %d): give --pid", app.PID, a.PID)
			}
			app = &apps[i]
		}
		seen = append(seen, fmt.Sprintf("%s (%s, pid %d)", a.Name, driver.ProcessName(int(a.PID)), a.PID))
	}
	if app == nil {
		why := "a GTK 3 app needs Debian's libatk-adaptor and no NO_AT_BRIDGE=1, a Qt app QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1"
		if req.PID != 0 && atspi.IsChromium("/proc", int(req.PID)) {
			why = "a Chromium-built app: " + atspi.ChromiumFix
		}
		return InspectResult{}, fmt.Errorf("%w: no such application on the accessibility bus %s; registered: %s (%s)",
			atspi.ErrUnavailable, addr, strings.Join(seen, ", "), why)
	}
	if check {
		loc, err := atspi.Locate(ctx, req.Display, int(app.PID))
		if err != nil {
			return InspectResult{}, err
		}
		if loc.Address != addr {
			return InspectResult{}, fmt.Errorf("%w: %s (pid %d) is on the accessibility bus %s, which the root window of display %s names, but its own is %s (%s): another program on the display may have rewritten AT_SPI_BUS; nothing was read (give --pid, or --bus)",
				atspi.ErrSourcesDisagree, app.Name, app.PID, addr, req.Display, loc.Address, loc.From)
		}
	}
	if err := bus.AskForTree(ctx, *app, inspectAskTime); err != nil {
		return InspectResult{}, err
	}
	now := clock.Or(opt.Clock)
	start, calls := now(), bus.Calls()
	// A person looks for what shows, the conversation's rows included.
	limits := atspi.Limits{Nodes: req.Limits.Nodes, Depth: req.Limits.Depth, Time: req.Limits.Time, ShowingOnly: req.ShowingOnly, ThroughViewports: true}
	if req.Window != "" {
		limits.Windows = &atspi.Match{Name: req.Window} // the other windows are not read
	}
	tree, err := bus.Snapshot(ctx, app.Ref, limits)
	if err != nil {
		return InspectResult{}, err
	}
	if req.Window != "" && len(tree.Children) == 0 {
		return InspectResult{}, FieldErrorf("window", "%s has no top-level window named %q", app.Name, req.Window)
	}
	res := InspectResult{Bus: addr, App: *app, Duration: Duration(now().Sub(start)), Calls: bus.Calls() - calls, Tree: tree}
	// What the app's answers cost: a diagnostic beside the tree, which a failed ping
	// does not take away (round_trip is then 0).
	if rt, err := bus.RoundTrip(ctx, *app, inspectPings); err == nil {
		res.Answer = Duration(rt)
	}
	tree.Walk(func(*atspi.Node, int) bool { res.Nodes++; return true })
	return res, nil
}

// process is how the request names its app, as a test on a registered application.
func (req InspectRequest) process(opt Options) (func(atspi.App) bool, error) {
	named := 0
	for _, v := range []bool{req.App != "", req.Process != "", req.PID != 0} {
		if v {
			named++
		}
	}
	if named != 1 {
		return nil, gate.Invalidf("inspect: name the app one way: --app NAME (a profile), --process NAME or --pid PID")
	}
	switch {
	case req.PID != 0:
		return func(a atspi.App) bool { return a.PID == req.PID }, nil
	case req.Process != "":
		return func(a atspi.App) bool { return driver.ProcessName(int(a.PID)) == req.Process }, nil
	}
	p, err := driver.Profiles{Dirs: opt.ProfileDirs}.Load(req.App)
	if err != nil {
		return nil, fieldError("app", err)
	}
	return func(a atspi.App) bool { return p.MatchesProcess(driver.ProcessName(int(a.PID))) }, nil
}

// WriteText writes the tree for a person: a node a line, indented, with its role, name,
// text, states and extents.
func (r InspectResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%s (pid %d, %s) on %s: %d nodes, read in %v with %d calls; the app answers a call in %v\n", r.App.Name, r.App.PID, r.App.Toolkit, r.Bus,
		r.Nodes, time.Duration(r.Duration).Round(time.Millisecond), r.Calls, time.Duration(r.Answer).Round(time.Microsecond))
	r.Tree.Walk(func(n *atspi.Node, depth int) bool {
		line := strings.Repeat("  ", depth) + n.String()
		if e := n.Extents; e != nil {
			line += fmt.Sprintf(" @%d,%d %dx%d", e.X, e.Y, e.W, e.H)
		}
		fmt.Fprintln(w, line)
		return true
	})
}

// ProfileCheckResult is a valid profile file, summarized: how it crosses the gate's
// boundaries and what it relies on to prove a delivery.
type ProfileCheckResult struct {
	driver.ProfileSummary
}

// CheckProfile validates a profile file exactly as a built-in is validated; the error
// names the phase, the step and the field that are wrong.
func CheckProfile(path string) (ProfileCheckResult, error) {
	p, err := driver.LoadProfileFile(path)
	if err != nil {
		return ProfileCheckResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return ProfileCheckResult{p.Summary()}, nil
}

// ProfileListResult is every profile the folders and the built-ins hold.
type ProfileListResult struct {
	Folders  []string              `json:"folders"`
	Profiles []driver.ProfileEntry `json:"profiles"`
}

// ListProfiles lists the profiles in dirs (NAME.json, in order) and the built-ins, and
// which one a name resolves to.
func ListProfiles(dirs []string) ProfileListResult {
	if dirs == nil {
		dirs = []string{}
	}
	return ProfileListResult{Folders: dirs, Profiles: driver.Profiles{Dirs: dirs}.List()}
}

// OCRLanguages are the languages a delivery's OCR reads: those given (a flag, or
// SENDONCE_OCR_LANGS), else the profile's ocr_languages, else English. A title or a
// name in a script outside them is read from the app's accessibility tree alone, and
// the result says so.
func OCRLanguages(given string, p *driver.Profile) (vision.Languages, error) {
	switch {
	case given != "":
		ls, err := vision.ParseLanguages(given)
		if err != nil {
			return nil, fieldError("ocr_lang", err)
		}
		return ls, nil
	case p != nil && p.OCRLanguages != "":
		ls, err := vision.ParseLanguages(p.OCRLanguages)
		if err != nil {
			return nil, fmt.Errorf("profile %s: ocr_languages: %w", p.App, err)
		}
		return ls, nil
	}
	return vision.DefaultLanguages, nil
}

// OpenAccessibility is driver.OpenAccessibility, where it lived before.
//
// Deprecated: use driver.OpenAccessibility.
func OpenAccessibility(ctx context.Context, display string) (driver.Tree, func()) {
	return driver.OpenAccessibility(ctx, display)
}

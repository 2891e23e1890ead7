//go:build cgo

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/vision/atspi"
)

// Chromium asked for its tree (issue 44), on the test bed's Converse display
// (SENDONCE_TESTBED_STATE names the state: CONVERSE_DISPLAY, CONVERSE_A11Y_BUS,
// GAJIM_USER). The test starts a Chromium of its own as the test bed user, with its own
// profile and session bus, showing a page of its own (never Converse's: that would log
// alice in a second time), and WITHOUT --force-renderer-accessibility:
//
//   - joined to the accessibility bus (ACCESSIBILITY_ENABLED=1, as a desktop whose
//     accessibility is on starts it), it shows its window empty until asked; sendonce
//     asks, and inspect prints the page's nodes;
//   - started with no accessibility at all, it is on no bus, and nothing sendonce can
//     set turns it on (measured: vision/atspi/status.go): a delivery whose profile requires
//     the tree stops not_sent before anything is touched, and it and doctor name
//     --force-renderer-accessibility.
//
// Its session bus is started without DISPLAY: a bus launcher it activates then leaves
// the display's AT_SPI_BUS, which names the test bed's Converse's bus, alone (a second
// session's launcher replaces it, and deletes it when it exits). The test checks that.

// chromiumPage writes a page titled title into a folder the test bed user can read.
func chromiumPage(t *testing.T, title string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sendonce-chromium-page-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	page := filepath.Join(dir, "page.html")
	html := `<!doctype html><html><head><meta charset="utf-8"><title>` + title + `</title></head>
<body><h1>Probe heading</h1><div role="log" aria-label="Conversation"><p>a page of the test's own</p></div>
<button>Send file</button></body></html>`
	if err := os.WriteFile(page, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return page
}

// startChromium starts Chromium as the test bed user on display, showing page, with env
// added to its environment; it returns the browser process's id, and kills the process
// group it started when the test ends.
func startChromium(t *testing.T, bed *testBed, display, page string, env ...string) int {
	t.Helper()
	pid, _ := startChromiumWith(t, bed, display, []string{"--app=file://" + page}, env...)
	return pid
}

// startChromiumWith is startChromium with Chromium's last arguments given (what it
// shows, and any flags); it also returns Chromium's profile folder.
func startChromiumWith(t *testing.T, bed *testBed, display string, last []string, env ...string) (int, string) {
	t.Helper()
	name := bed.get(t, "GAJIM_USER")
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	home, err := os.MkdirTemp("", "sendonce-chromium-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	xauth, err := os.ReadFile(os.Getenv("XAUTHORITY"))
	if err != nil {
		t.Fatalf("the test bed's X cookie: %v", err)
	}
	for _, d := range []string{"runtime", "profile", ".config", ".cache"} {
		if err := os.Mkdir(filepath.Join(home, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, ".Xauthority"), xauth, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := filepath.Walk(home, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	}); err != nil {
		t.Fatalf("giving %s its folder (the live tests run as root, as testbed/up does): %v", name, err)
	}
	args := []string{"-u", name, "--", "env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home, "USER=" + name, "LOGNAME=" + name, "XDG_RUNTIME_DIR=" + filepath.Join(home, "runtime"),
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"LANG=C.UTF-8", "LC_ALL=C.UTF-8", "LANGUAGE=en"}
	args = append(args, env...)
	// DISPLAY only for Chromium: the session bus, and what it activates, run without.
	args = append(args, "dbus-run-session", "--", "sh", "-c", `export DISPLAY="$1" XAUTHORITY="$2"; P="$3"; shift 3; exec chromium --user-data-dir="$P" `+
		`--no-first-run --no-default-browser-check --disable-gpu --password-store=basic --disable-background-networking `+
		`--disable-component-update --disable-sync --window-position=0,0 --window-size=900,600 "$@"`,
		"sh", display, filepath.Join(home, ".Xauthority"), filepath.Join(home, "profile"))
	args = append(args, last...)
	cmd := exec.Command("runuser", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	pgid := cmd.Process.Pid
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-pgid, syscall.SIGKILL)
			<-done
		}
	})
	// The browser process: the chromium of that group that is no --type= child.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if pid := browserIn(pgid); pid != 0 {
			return pid, filepath.Join(home, "profile")
		}
		select {
		case <-done:
			t.Fatalf("Chromium exited right away:\n%s", tail(log.String(), 2000))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Chromium browser process after 30 s:\n%s", tail(log.String(), 2000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// browserIn is the Chromium browser process of process group pgid, or 0.
func browserIn(pgid int) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var ppgid int
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if i := strings.LastIndexByte(string(stat), ')'); i > 0 {
				if f := strings.Fields(string(stat)[i+1:]); len(f) > 2 {
					ppgid, _ = strconv.Atoi(f[2])
				}
			}
		}
		if ppgid != pgid {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		first, _, _ := strings.Cut(strings.ReplaceAll(string(cmdline), "\x00", " "), " ")
		if strings.HasSuffix(first, "/chromium") && !strings.Contains(string(cmdline), "--type=") {
			return pid
		}
	}
	return 0
}

// waitWindow waits until display shows a window titled title.
func waitWindow(t *testing.T, display, title string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cmd := exec.Command("xdotool", "search", "--onlyvisible", "--name", "^"+title+"$")
		cmd.Env = append(os.Environ(), "DISPLAY="+display)
		if out, err := cmd.Output(); err == nil && strings.TrimSpace(string(out)) != "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no window titled %q on %s after 30 s", title, display)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestLiveChromiumAskedForItsTree(t *testing.T) {
	l := newLiveWith(t, converseApp)
	display := l.display()
	converseBus := l.bed.get(t, "CONVERSE_A11Y_BUS")
	if got, err := atspi.AddressOnDisplay(display); err != nil || got != converseBus {
		t.Fatalf("display %s names the accessibility bus %q (%v); want the test bed's Converse's, %s", display, got, err, converseBus)
	}
	// The test bed's Converse keeps its bus: each case checks the display's AT_SPI_BUS.
	keepsConverseBus := func(t *testing.T) {
		t.Helper()
		if got, err := atspi.AddressOnDisplay(display); err != nil || got != converseBus {
			t.Errorf("display %s now names the accessibility bus %q (%v); want the test bed's Converse's, %s, untouched", display, got, err, converseBus)
		}
	}

	t.Run("on the bus, asked", func(t *testing.T) {
		title := fmt.Sprintf("Switch Probe %d", time.Now().UnixNano())
		pid := startChromium(t, l.bed, display, chromiumPage(t, title), "ACCESSIBILITY_ENABLED=1", "AT_SPI_BUS_ADDRESS="+converseBus)
		waitWindow(t, display, title)
		// Chromium joins the bus a moment after its window shows: until then inspect
		// finds no such application.
		var out string
		var code int
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, code = cli(t, nil, "--json", "inspect", "--store", l.store, "--display", display, "--pid", strconv.Itoa(pid), "--showing")
			if code == 0 || !strings.Contains(out, "no such application") || time.Now().After(deadline) {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if code != 0 {
			t.Fatalf("inspect: exit %d\n%s", code, out)
		}
		var res struct{ Tree *atspi.Node }
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Tree == nil {
			t.Fatalf("inspect: %v\n%s", err, out)
		}
		heading := atspi.Match{Role: "heading", Name: "Probe heading", Under: &atspi.Match{Role: "document web", Name: title}}
		if got := heading.Find(res.Tree); len(got) != 1 {
			t.Errorf("inspect shows %d nodes %v; want the page's heading, once asked for the tree\n%s", len(got), heading, tail(out, 3000))
		}
		keepsConverseBus(t)
	})

	t.Run("off", func(t *testing.T) {
		title := fmt.Sprintf("Switch Probe %d", time.Now().UnixNano())
		startChromium(t, l.bed, display, chromiumPage(t, title))
		waitWindow(t, display, title)
		const fix = "--force-renderer-accessibility"
		profile := editedProfile(t, "converse", filepath.Join(t.TempDir(), "converse-probe.json"), func(p map[string]any) {
			p["window_title_pattern"] = "^" + title + "$"
		})
		out, _ := cli(t, nil, "--json", "doctor", "--store", l.store, "--display", display, "--staging", l.bed.staging(t), "--profile", profile)
		var doc struct {
			Checks []struct {
				Name, Saw, Fix string
				OK             bool
			}
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("doctor: %v: %s", err, out)
		}
		checked := false
		for _, c := range doc.Checks {
			if c.Name == "accessibility" {
				checked = true
				if c.OK || !strings.Contains(c.Fix, fix) {
					t.Errorf("doctor's accessibility check: %+v; want it failed, its fix naming %s", c, fix)
				}
			}
		}
		if !checked {
			t.Errorf("doctor made no accessibility check:\n%s", out)
		}

		file, _ := l.file("chromium-off.txt")
		args := l.deliverArgs(file, "Bob")
		args[1], args[2] = "--profile", profile // in place of --app converse
		out, code := cli(t, liveEnv, args...)
		m := decode(t, out)
		l.noteBundle(m)
		if code != exitNotSent || m["outcome"] != "not_sent" || !strings.Contains(fmt.Sprint(m["stopped"]), fix) {
			t.Fatalf("a delivery through a Chromium without accessibility: exit %d; want %d not_sent, stopped naming %s\n%s", code, exitNotSent, fix, describe(m))
		}
		for _, r := range verifiedBundle(t, m).Records {
			if r.Kind == evidence.KindStep {
				t.Errorf("the bundle records the step %q; want nothing touched", r.Intent)
			}
		}
		keepsConverseBus(t)
	})
}

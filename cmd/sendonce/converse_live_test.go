//go:build cgo

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Live tests of a Chromium app: Converse.js, a web XMPP client, in Debian's Chromium as
// an app window (testbed/up --app converse), logged in as alice/converse.testbed over
// Prosody's WebSocket. The profile (driver/profiles/converse.json) names the page's
// nodes by role and name as Chromium's accessibility tree gives them; choosing the file
// in Chromium's file chooser sends it; the XMPP archive confirms. The tests shared with
// the other apps (a second run refused, a wrong title, names in their own scripts, a
// look-alike title) run through it too (live_test.go, tree_live_test.go).

func newConverseLive(t *testing.T) *liveRun {
	t.Helper()
	l := newLiveWith(t, converseApp)
	l.bed.get(t, "CONVERSE_DISPLAY") // fails clearly when the test bed has no Converse.js
	return l
}

// TestLiveConverseDeliverKinds: a text file, a PNG (Converse shows it as a preview)
// and a 9 MB file (an upload that takes a while: no confirmation before it is done)
// are each sent_verified through Converse.js, with exactly one copy of each on the
// server, the bundle verifying, and the store agreeing.
func TestLiveConverseDeliverKinds(t *testing.T) {
	for _, c := range []struct {
		name string
		make func(l *liveRun) (path, sum string)
	}{
		{"text", func(l *liveRun) (string, string) { return l.file("converse-report.txt") }},
		{"png", func(l *liveRun) (string, string) { return l.bytesFile("converse-photo.png", pngBytes(t)) }},
		{"9 MB", func(l *liveRun) (string, string) {
			b := make([]byte, 9<<20+777)
			if _, err := rand.Read(b); err != nil {
				t.Fatal(err)
			}
			return l.bytesFile("converse-big.bin", b)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newConverseLive(t)
			file, sum := c.make(l)
			before := uploads(t, l.uploadDir())
			m, code, _ := l.deliver(file, "Bob")
			l.wantSentVerified(m, code)
			l.wantExactlyOneCopyEach(before, sum)
			l.verifyBundle(m)
			if st := l.status(m["key"].(string)); st["status"] != "sent_verified" {
				t.Fatalf("status after the delivery: %v; want sent_verified", st)
			}
			if m["title_sources"] != "accessibility_tree+ocr" {
				t.Errorf("title_sources %v; want accessibility_tree+ocr (the page's own words, the screen agreeing)", m["title_sources"])
			}
		})
	}
}

// converseCrashPoints: choosing the file sends it (Converse uploads the moment the
// chooser gives it the file), so a kill right after that act leaves an upload that may
// land; reconcile settles it from alice's archive.
var converseCrashPoints = []crashPoint{
	{name: "file_chosen", crossed: true, pressed: true, settled: []string{"send_status_unknown"}},
	{name: "send_pressed", crossed: true, pressed: true, settled: []string{"send_status_unknown"}},
}

// TestLiveConverseCrash kills a Converse.js delivery (SIGKILL) after choose_file and
// after send: never two copies, the rerun refused, and the store saying what the
// server supports once reconcile has asked alice's archive.
func TestLiveConverseCrash(t *testing.T) { crashMatrix(t, converseApp, converseCrashPoints) }

// bytesFile writes content as name in the test's folder and returns its path and SHA-256.
func (l *liveRun) bytesFile(name string, content []byte) (string, string) {
	l.t.Helper()
	path := filepath.Join(l.dir, name)
	if err := os.WriteFile(path, content, 0o644); err != nil {
		l.t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	l.files[hex.EncodeToString(sum[:])] = name
	return path, hex.EncodeToString(sum[:])
}

// pngBytes is a small PNG of pixels of its own.
func pngBytes(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 96, 64))
	if _, err := rand.Read(img.Pix); err != nil {
		t.Fatal(err)
	}
	for i := 3; i < len(img.Pix); i += 4 {
		img.Pix[i] = 255
	}
	img.Set(0, 0, color.RGBA{1, 2, 3, 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// converseTabsApp is Converse.js as the first of two tabs of an ordinary Chromium window
// (testbed/up starts it beside the app window, on a display of its own): the built-in
// profile, the same as for the app window, places its regions in the page.
var converseTabsApp = liveApp{name: "converse", displayKey: "CONVERSE_TABS_DISPLAY", uploadKey: "UPLOAD_DIR", jidKey: "ALICE_JID", passwordKey: "ALICE_PASSWORD", providerConfirms: true}

// TestLiveConverseTabs: Converse.js in a browser window with two tabs of it, each a
// session of alice's. With 张伟's conversation open in the second tab, a delivery to
// Bob in the first tab uses the first tab's page (never the tab strip or the address
// bar) and is sent_verified; and a tab switched by someone else after the title was
// checked stops the delivery before anything is chosen: the page that shows is no
// longer the conversation checked.
func TestLiveConverseTabs(t *testing.T) {
	l := newLiveWith(t, converseTabsApp)
	display := l.bed.get(t, "CONVERSE_TABS_DISPLAY")
	window := l.bed.get(t, "CONVERSE_TABS_WINDOW")
	tab := func(n int) {
		t.Helper()
		xdoOrFail(t, display, "windowactivate", "--sync", window, "key", "--clearmodifiers", fmt.Sprintf("ctrl+%d", n))
		time.Sleep(500 * time.Millisecond) // the tab's page drawn
	}
	t.Cleanup(func() { tab(1) })

	// The second tab opens 张伟's conversation (a delivery there), then the first is
	// brought back.
	tab(2)
	zw, zwSum := l.file("tab-two.txt")
	before := uploads(t, l.uploadDir())
	m, code, _ := l.deliver(zw, "张伟", "--dest-id", "xmpp:zhangwei@localhost", "--ocr-lang", "eng+chi_sim")
	l.wantSentVerified(m, code)
	l.wantExactlyOneCopyEach(before, zwSum)
	tab(1)

	t.Run("the tab in front", func(t *testing.T) {
		l := &liveRun{t: t, bed: l.bed, app: l.app, store: l.store, dir: l.dir, start: l.start, files: l.files}
		t.Cleanup(l.keepWhatFailed)
		file, sum := l.file("tab-one.txt")
		before := uploads(t, l.uploadDir())
		m, code, _ := l.deliver(file, "Bob")
		l.wantSentVerified(m, code)
		l.wantExactlyOneCopyEach(before, sum)
	})

	t.Run("a tab switched mid-delivery", func(t *testing.T) {
		l := &liveRun{t: t, bed: l.bed, app: l.app, store: l.store, dir: l.dir, start: l.start, files: l.files}
		t.Cleanup(l.keepWhatFailed)
		file, sum := l.file("tab-switched.txt")
		before := uploads(t, l.uploadDir())
		m, code := heldAt(t, "title_checked", l.deliverArgs(file, "Bob"), func() { tab(2) })
		l.noteBundle(m)
		if code != exitNotSent || m["outcome"] != "not_sent" {
			t.Fatalf("with the tab switched after the title was checked, deliver exited %d; want %d not_sent\n%s", code, exitNotSent, describe(m))
		}
		if stopped, _ := m["stopped"].(string); !strings.Contains(stopped, "check the conversation is still") || !strings.Contains(stopped, `"Bob"`) {
			t.Errorf("stopped: %q; want the check that the conversation is still Bob", stopped)
		}
		time.Sleep(time.Second) // an upload, had one started, lands within a fraction of that
		if fresh := newUploads(before, uploads(t, l.uploadDir())); countSHA(fresh, sum) != 0 {
			t.Fatalf("the file reached the server: %v", fresh)
		}
		l.verifyBundle(m)
	})
}

// heldAt runs deliver with args as a real process that waits at the moment named (the
// barrier test hook) while during runs, and returns what it printed and its exit code.
func heldAt(t *testing.T, moment string, args []string, during func()) (map[string]any, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	barrier := t.TempDir()
	cmd := exec.CommandContext(ctx, self(t), args...)
	cmd.Env = append(append(os.Environ(), "SENDONCE_AS_CLI=1"), liveEnv...)
	cmd.Env = append(cmd.Env, "SENDONCE_TEST_BARRIER_AT="+moment, "SENDONCE_TEST_BARRIER_DIR="+barrier, "SENDONCE_TEST_BARRIER_N=2")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	release := func() { _ = os.WriteFile(filepath.Join(barrier, "test"), nil, 0o600) }
	for arrived := false; !arrived; {
		select {
		case err := <-done:
			t.Fatalf("the delivery ended (%v) before it reached %s\nstdout: %s\nstderr: %s", err, moment, out.String(), tail(errb.String(), 20))
		case <-time.After(20 * time.Millisecond):
		}
		es, _ := os.ReadDir(barrier)
		arrived = len(es) > 0
	}
	during()
	release()
	err := <-done
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("deliver: %v\nstderr: %s", err, tail(errb.String(), 20))
	}
	m := decode(t, out.String())
	t.Logf("deliver, held at %s: exit %d: outcome %v\n%s", moment, cmd.ProcessState.ExitCode(), m["outcome"], describe(map[string]any{"reasons": m["reasons"]}))
	return m, cmd.ProcessState.ExitCode()
}

// xdoOrFail runs xdotool on display and fails the test when it fails.
func xdoOrFail(t *testing.T, display string, args ...string) {
	t.Helper()
	cmd := exec.Command("xdotool", args...)
	cmd.Env = append(os.Environ(), "DISPLAY="+display)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("xdotool %v: %v\n%s", args, err, out)
	}
}

// TestLiveConverseKilledMidUpload: the page's renderer (where Converse.js uploads the
// file) is killed (SIGKILL) the moment the file is chosen, the upload under way. The
// delivery crossed send, so it ends send_status_unknown unless the provider finds the
// exact bytes (sent_verified, the upload having won the race); either way the same
// delivery again is refused and the server never holds two copies. The page is then
// reloaded and alice's session comes back, for the tests that follow.
func TestLiveConverseKilledMidUpload(t *testing.T) {
	l := newConverseLive(t)
	display := l.bed.get(t, "CONVERSE_DISPLAY")
	t.Cleanup(func() { converseReload(t, l.bed, display) })
	content := make([]byte, 9<<20+313)
	if _, err := rand.Read(content); err != nil {
		t.Fatal(err)
	}
	file, sum := l.bytesFile("killed-mid-upload.bin", content)
	before := uploads(t, l.uploadDir())
	m, code := heldAt(t, "send_pressed", l.deliverArgs(file, "Bob"), func() {
		pids := converseRenderers(t, l.bed.get(t, "CONVERSE_PGID"))
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Logf("killed the renderers %v", pids)
	})
	l.noteBundle(m)
	switch {
	case code == exitUnknown && m["outcome"] == "send_status_unknown":
	case code == exitOK && m["outcome"] == "sent_verified":
		t.Logf("the upload won the race: the provider found the exact bytes")
	default:
		t.Fatalf("with the page killed mid-upload, deliver exited %d; want %d send_status_unknown (or 0 sent_verified, the provider holding the bytes)\n%s", code, exitUnknown, describe(m))
	}
	l.verifyBundle(m)
	again, code, _ := l.deliver(file, "Bob")
	if code != exitConsumed || again["outcome"] != "refused" {
		t.Fatalf("the same delivery again exited %d; want %d refused: an unknown delivery is never sent again\n%s", code, exitConsumed, describe(again))
	}
	time.Sleep(2 * time.Second) // an upload the kill did not stop lands within that
	if n := countSHA(newUploads(before, uploads(t, l.uploadDir())), sum); n > 1 {
		t.Fatalf("the server holds %d copies of the file", n)
	}
}

// converseRenderers are the pids of the renderer processes of the app window's Chromium
// (process group pgid): the page's, and any extension's.
func converseRenderers(t *testing.T, pgid string) []int {
	t.Helper()
	out, err := exec.Command("ps", "-o", "pid=,args=", "-g", pgid).Output()
	if err != nil {
		t.Fatalf("ps -g %s: %v", pgid, err)
	}
	var pids []int
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && strings.Contains(line, "--type=renderer") {
			pid, err := strconv.Atoi(f[0])
			if err == nil {
				pids = append(pids, pid)
			}
		}
	}
	if len(pids) == 0 {
		t.Fatalf("no renderer process in Chromium's process group %s", pgid)
	}
	return pids
}

// converseReload reloads the app window's page (its renderer killed: "Aw, Snap!") and
// waits, two minutes at most, until Prosody shows alice's Converse session online again.
func converseReload(t *testing.T, bed *testBed, display string) {
	t.Helper()
	xdoOrFail(t, display, "windowactivate", "--sync", bed.get(t, "CONVERSE_WINDOW"), "key", "--clearmodifiers", "ctrl+r")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, _ := exec.Command("prosodyctl", "--config", bed.get(t, "PROSODY_CONFIG"), "shell", "c2s", "show").Output()
		if regexp.MustCompile(`(?m)^\S+ +\| alice@localhost/converse\.testbed +\| [^|]+\| online `).Match(out) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice's Converse session did not come back within 2 minutes of the reload")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sandboxedStatus is /proc/PID/status once the process's seccomp filter is on, or as
// it is after 10 s: a renderer Chromium has just started (a spare one, or one for a
// page it opens) runs a moment before it installs its filter (one was caught with
// Seccomp: 0, NoNewPrivs: 1, in CI).
func sandboxedStatus(pid int) ([]byte, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil || regexp.MustCompile(`(?m)^Seccomp:\s+2$`).Match(status) || time.Now().After(deadline) {
			return status, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLiveConverseSandboxed: the test bed's Chromium runs as a person's browser does,
// as a user of its own with its sandbox on: its renderers are under a seccomp filter
// (Seccomp: 2) in a user namespace of their own, and none runs as root. (As root it
// would need --no-sandbox, and draw a warning bar into the window a profile reads.)
func TestLiveConverseSandboxed(t *testing.T) {
	bed := liveTestBed(t)
	self, err := os.Readlink("/proc/self/ns/user")
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range converseRenderers(t, bed.get(t, "CONVERSE_PGID")) {
		status, err := sandboxedStatus(pid)
		if errors.Is(err, fs.ErrNotExist) {
			continue // it ended while it was read
		}
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`(?m)^Seccomp:\s+2$`).Match(status) {
			t.Errorf("renderer %d runs without a seccomp filter:\n%s", pid, status)
		}
		if regexp.MustCompile(`(?m)^Uid:\s+0\s`).Match(status) {
			t.Errorf("renderer %d runs as root", pid)
		}
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/user", pid)); err != nil || ns == self {
			t.Errorf("renderer %d: user namespace %q (%v); want one of its own, not %q", pid, ns, err, self)
		}
	}
}

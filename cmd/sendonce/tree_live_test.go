//go:build cgo

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sendonce/sendonce/evidence"
)

// The built-in Gajim profile reads what decides identity and the send from the app's
// accessibility tree (the title, the typed path, the chooser's Open button, the file on
// the send page, the Send button), and OCR cross-checks the title and the file's name
// where the tree says they show. These tests deliver through the real Gajim, with names
// in the scripts its users write them in.

// TestLiveTreeReadGatesTheChoice: a delivery through the built-in profile is
// sent_verified with one copy on the server; the title is read from the tree with OCR
// agreeing, the evidence records the chooser's Open button as the app named it, in its
// dialog, sensitive, before the file was chosen, and the sent item as the
// conversation's tree names it, OCR agreeing.
func TestLiveTreeReadGatesTheChoice(t *testing.T) {
	l := newLive(t)
	file, sum := l.file("tree-read.txt")
	before := uploads(t, l.uploadDir())
	m, code, _ := l.deliver(file, "Bob")
	l.wantSentVerified(m, code)
	l.wantExactlyOneCopyEach(before, sum)
	if m["title_sources"] != "accessibility_tree+ocr" {
		t.Errorf("title_sources %v; want accessibility_tree+ocr (the app's own words, the screen agreeing)", m["title_sources"])
	}
	bundle := verifiedBundle(t, m)
	var open []string
	for _, r := range bundle.Records {
		if r.Target != nil && r.Target.Method == "accessibility_tree" {
			for _, w := range r.Target.Words {
				if strings.Contains(w, `push button "Open" [`) {
					open = append(open, w)
				}
			}
		}
	}
	if len(open) != 1 || !strings.Contains(open[0], "sensitive") || !strings.Contains(open[0], `file chooser "Choose File to Send…"`) {
		t.Fatalf("the evidence records %q of the Open button from the tree; want the chooser's Open button, sensitive, once", open)
	}
	// The sent item, confirmed from the conversation's tree with OCR agreeing.
	confirmed := false
	for _, r := range bundle.Records {
		o := r.Observed
		if o == nil || o.What != "sent_items" || o.Phase != "after_send" || len(o.Readings) != 2*len(o.Items) {
			continue
		}
		for i, it := range o.Items { // each item's name: the tree's reading, then OCR's
			tree, ocr := o.Readings[2*i], o.Readings[2*i+1]
			if it.Ours && it.Finished && tree.Source == "accessibility_tree" && tree.Text == "tree-read.txt" && ocr.Source == "ocr" && ocr.Verdict == "agree" {
				confirmed = true
			}
		}
	}
	if !confirmed {
		t.Fatalf("no read after the send shows the sent item from the tree (ours, finished), OCR agreeing")
	}
}

// TestLiveNamesInTheirOwnScripts: a contact whose roster name is Chinese and a file
// whose name is Chinese, and a name with an accent and an emoji, are each delivered
// once through Gajim (GTK), Psi+ (Qt) and Converse.js (Chromium): sent_verified, one copy on the
// server; the same delivery again is refused.
func TestLiveNamesInTheirOwnScripts(t *testing.T) {
	for _, app := range []liveApp{gajimApp, psiApp, converseApp} {
		for _, c := range []struct {
			name, to, destID, file string
		}{
			{"chinese", "张伟", "xmpp:zhangwei@localhost", "报告-第三季度.pdf"},
			{"accents and emoji", "Bob", "xmpp:bob@localhost", "Zoë 🚀 notes.txt"},
		} {
			t.Run(app.name+"/"+c.name, func(t *testing.T) {
				l := newLiveWith(t, app)
				file, sum := l.file(c.file)
				before := uploads(t, l.uploadDir())
				args := []string{"--dest-id", c.destID, "--ocr-lang", "eng+chi_sim", "--provider-config", l.providerConfig()}
				m, code, _ := l.deliver(file, c.to, args...)
				l.wantSentVerified(m, code)
				l.wantExactlyOneCopyEach(before, sum)
				if m["title_sources"] != "accessibility_tree+ocr" {
					t.Errorf("title_sources %v; want accessibility_tree+ocr (the app's own words, the screen agreeing)", m["title_sources"])
				}
				again, code, _ := l.deliver(file, c.to, args...)
				if code != exitConsumed || again["outcome"] != "refused" {
					t.Fatalf("the same delivery again exited %d; want %d refused\n%s", code, exitConsumed, describe(again))
				}
				l.wantExactlyOneCopyEach(before, sum)
			})
		}
	}
}

// TestLiveLookAlikeTitle, through Gajim and Converse.js: `deliver --to Bob` whose address opens the conversation of
// Воb (a contact whose В and о are Cyrillic, drawn as Bob's letters) stops not_sent
// before anything is chosen: the app's tree says Воb, whatever OCR reads, and the
// evidence holds both readings.
func TestLiveLookAlikeTitle(t *testing.T) {
	for _, app := range []liveApp{gajimApp, converseApp} {
		t.Run(app.name, func(t *testing.T) { lookAlikeTitle(t, newLiveWith(t, app)) })
	}
}

func lookAlikeTitle(t *testing.T, l *liveRun) {
	file, sum := l.file("look-alike.txt")
	before := uploads(t, l.uploadDir())
	m, code, _ := l.deliver(file, "Bob", "--dest-id", "xmpp:vob@localhost")
	if code != exitNotSent || m["outcome"] != "not_sent" {
		t.Fatalf("deliver exited %d; want %d not_sent\n%s", code, exitNotSent, describe(m))
	}
	if stopped, _ := m["stopped"].(string); !strings.Contains(stopped, `"Воb"`) {
		t.Errorf("stopped: %q; want the title in the app's own words, Воb", stopped)
	}
	if fresh := newUploads(before, uploads(t, l.uploadDir())); countSHA(fresh, sum) != 0 {
		t.Fatalf("the file reached the server: %v", fresh)
	}
	var readings []evidence.Reading
	for _, r := range verifiedBundle(t, m).Records {
		if o := r.Observed; o != nil && o.What == "conversation_title" {
			readings = o.Readings
		}
	}
	if len(readings) != 2 || readings[0].Source != "accessibility_tree" || readings[0].Text != "Воb" || readings[1].Source != "ocr" || readings[1].Text == "" {
		t.Fatalf("the title's readings: %+v; want the tree's Воb and what OCR read beside it", readings)
	}
	t.Logf("the tree read %q (%s); OCR read %q: %s %s", readings[0].Text, readings[0].Node, readings[1].Text, readings[1].Verdict, readings[1].Why)
}

// verifiedBundle verifies a delivery's evidence bundle and returns it.
func verifiedBundle(t *testing.T, m map[string]any) *evidence.Bundle {
	t.Helper()
	dir, _ := m["evidence"].(string)
	if _, err := os.Stat(filepath.Join(dir)); dir == "" || err != nil {
		t.Fatalf("no evidence bundle: %v %v", dir, err)
	}
	b, err := evidence.Verify(dir, evidence.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLiveTreeStopsAnswering: Gajim's accessibility bus stops answering (its
// dbus-daemon SIGSTOPped) in the middle of a delivery. The step reading the tree times
// out, nothing hangs (the process exits within its bounds), and the outcome follows
// the boundary: before any crossing not_sent, after choose_file's send_status_unknown.
func TestLiveTreeStopsAnswering(t *testing.T) {
	for _, c := range []struct {
		name, after string // the progress line after which the bus stops
		outcome     string
		code        int
	}{
		{"before a crossing", "open the send page", "not_sent", exitNotSent},
		{"after choose_file", "choose the file", "send_status_unknown", exitUnknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLive(t)
			bus := a11yBusDaemon(t, l.bed.get(t, "A11Y_BUS"))
			file, sum := l.file("bus-stops.txt")
			before := uploads(t, l.uploadDir())
			// Without --json: the steps' progress goes to stderr as they end.
			args := slices.DeleteFunc(l.deliverArgs(file, "Bob"), func(a string) bool { return a == "--json" })
			cmd := exec.Command(self(t), args...)
			cmd.Env = append(append(os.Environ(), "SENDONCE_AS_CLI=1"), liveEnv...)
			var out bytes.Buffer
			cmd.Stdout = &out
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			stopped := false
			defer func() {
				if stopped {
					syscall.Kill(bus, syscall.SIGCONT)
				}
			}()
			lines := bufio.NewScanner(stderr)
			for lines.Scan() {
				if !stopped && strings.Contains(lines.Text(), c.after) && strings.Contains(lines.Text(), " ok (") {
					if err := syscall.Kill(bus, syscall.SIGSTOP); err != nil {
						t.Fatal(err)
					}
					stopped = true
					t.Logf("bus daemon %d stopped after %q", bus, lines.Text())
				}
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(2 * time.Minute):
				cmd.Process.Kill()
				t.Fatal("the delivery did not end within 2 minutes of its start with the bus stopped: it hangs")
			}
			syscall.Kill(bus, syscall.SIGCONT)
			stopped = false
			if code := cmd.ProcessState.ExitCode(); code != c.code || !strings.Contains(out.String(), "outcome: "+c.outcome+"\n") {
				t.Fatalf("deliver exited %d; want %d %s\n%s", code, c.code, c.outcome, out.String())
			}
			t.Logf("deliver exited %d:\n%s", cmd.ProcessState.ExitCode(), out.String())
			if c.outcome == "not_sent" {
				if fresh := newUploads(before, uploads(t, l.uploadDir())); countSHA(fresh, sum) != 0 {
					t.Fatalf("not_sent, and the file reached the server: %v", fresh)
				}
			}
		})
	}
}

// a11yBusDaemon is the process id of the dbus-daemon serving the accessibility bus at
// address (the test bed's state names it).
func a11yBusDaemon(t *testing.T, address string) int {
	t.Helper()
	path := strings.TrimPrefix(strings.Split(address, ",")[0], "unix:path=")
	out, err := exec.Command("pgrep", "-f", "--", "--address=unix:path="+path).Output()
	if err != nil {
		t.Fatalf("no dbus-daemon serving %s: %v", path, err)
	}
	var pid int
	if _, err := fmt.Sscan(string(out), &pid); err != nil {
		t.Fatalf("pgrep: %q: %v", out, err)
	}
	return pid
}

// TestLiveAppWithoutItsBridge: Gajim started with NO_AT_BRIDGE=1 publishes no tree on
// its session's running accessibility bus. doctor names that variable; a profile that
// requires the tree stops not_sent before anything is touched, with the same reason;
// the built-in profile, which reads the tree where there is one, falls back to OCR and
// says so in the result and the evidence, and delivers once. After that delivery the
// conversation shows an item of ours with the name the stopped attempt's file has too:
// the stop, before anything was touched, is still not_sent.
func TestLiveAppWithoutItsBridge(t *testing.T) {
	l := newLiveWith(t, bridgelessGajimApp)
	if got := l.bed.get(t, "WS2_BRIDGE"); got != "off" {
		t.Fatalf("the test bed's second Gajim has accessibility %q; want it started without its bridge", got)
	}
	// The built-in profile, requiring the tree.
	builtin, err := os.ReadFile(filepath.Join("..", "..", "driver", "profiles", "gajim.json"))
	if err != nil {
		t.Fatal(err)
	}
	required := filepath.Join(t.TempDir(), "gajim-tree-required.json")
	if err := os.WriteFile(required, bytes.Replace(builtin, []byte(`"app": "gajim",`), []byte(`"app": "gajim", "tree": "required",`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	const why = "NO_AT_BRIDGE=1"

	type check struct {
		Name, Saw, Fix string
		OK             bool
	}
	doctor := func(profile ...string) check {
		t.Helper()
		args := append([]string{"--json", "doctor", "--store", l.store, "--display", l.display(), "--staging", l.bed.staging(t)}, profile...)
		out, _ := cli(t, nil, args...)
		var res struct{ Checks []check }
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("doctor: %v: %s", err, out)
		}
		for _, c := range res.Checks {
			if c.Name == "accessibility" {
				return c
			}
		}
		t.Fatalf("no accessibility check: %s", out)
		return check{}
	}
	if c := doctor("--app", "gajim"); !c.OK || !strings.Contains(c.Saw, why) || !strings.Contains(c.Saw, "OCR reads in its place") {
		t.Errorf("doctor, built-in profile: %+v; want a passed check saying %s and that OCR reads in its place", c, why)
	}
	if c := doctor("--profile", required); c.OK || !strings.Contains(c.Saw, why) || c.Fix == "" {
		t.Errorf("doctor, tree required: %+v; want a failed check saying %s, with a fix", c, why)
	}

	file, sum := l.file("no-bridge.txt")
	before := uploads(t, l.uploadDir())
	m, code, _ := l.deliver(file, "Bob")
	l.wantSentVerified(m, code)
	l.wantExactlyOneCopyEach(before, sum)
	if tree := fmt.Sprint(m["accessibility_tree"]); !strings.HasPrefix(tree, "unavailable") || !strings.Contains(tree, why) || !strings.Contains(tree, "OCR read in its place") {
		t.Errorf("accessibility_tree %q; want it unavailable, saying %s and that OCR read in its place", tree, why)
	}
	if m["title_sources"] != "ocr" {
		t.Errorf("title_sources %v; want ocr", m["title_sources"])
	}
	said := false
	for _, r := range verifiedBundle(t, m).Records {
		if o := r.Observed; o != nil && o.What == "accessibility_tree" && len(o.Readings) == 1 && strings.Contains(o.Readings[0].Text, why) {
			said = true
		}
	}
	if !said {
		t.Errorf("the evidence has no accessibility_tree observation saying %s", why)
	}

	// Requiring the tree: other bytes under the same name, which the conversation now
	// shows an item of ours for. Nothing is touched, so that item is not this attempt's.
	second, _ := l.file("no-bridge.txt")
	args := l.deliverArgs(second, "Bob")
	args[1], args[2] = "--profile", required // in place of --app gajim
	out, code := cli(t, liveEnv, args...)
	m = decode(t, out)
	l.noteBundle(m)
	if code != exitNotSent || m["outcome"] != "not_sent" || !strings.Contains(fmt.Sprint(m["stopped"]), why) {
		t.Fatalf("tree required: exit %d; want %d not_sent, stopped saying %s\n%s", code, exitNotSent, why, describe(m))
	}
	for _, r := range verifiedBundle(t, m).Records {
		if r.Kind == evidence.KindStep {
			t.Fatalf("tree required: the bundle records the step %q; want nothing touched", r.Intent)
		}
	}
}

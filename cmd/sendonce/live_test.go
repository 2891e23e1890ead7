//go:build cgo

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/testbed"
)

// Live end-to-end tests: the real CLI (this test binary re-executed as sendonce) delivers
// real files through the real Gajim of the test bed (testbed/up: Xvfb, openbox, Prosody
// with alice and bob and HTTP upload, Gajim logged in as alice), and the tests check the
// bytes that reached the server, Bob's archive, the gate store and the evidence bundles.
//
// The test bed is found through SENDONCE_TESTBED_STATE (the path of a state.env written
// by testbed/up). Without it the tests start their own test bed in a temporary folder
// (once per test binary) and a watchdog process runs testbed/down on it when the test
// binary exits, however it exits; under CI=true they fail instead: CI starts the test
// bed itself. They never skip. They run one after another (never t.Parallel): they share
// one Gajim.
//
// The file is built only with cgo, like deliver itself (deliver_nocgo.go has no desktop).

// liveEnv is the environment every live CLI process gets on top of the test's own.
var liveEnv = []string{"OMP_THREAD_LIMIT=1"}

// testBed is a running test bed, as its state.env describes it.
type testBed struct {
	stateFile string
	vars      map[string]string
}

func (b *testBed) get(tb testing.TB, key string) string {
	tb.Helper()
	v := b.vars[key]
	if v == "" {
		tb.Fatalf("the test bed state %s has no %s", b.stateFile, key)
	}
	return v
}

func (b *testBed) display(tb testing.TB) string   { return b.get(tb, "DISPLAY") }
func (b *testBed) staging(tb testing.TB) string   { return b.get(tb, "STAGING") }
func (b *testBed) uploadDir(tb testing.TB) string { return b.get(tb, "UPLOAD_DIR") }

// bobsArchive is Bob's message archive (Prosody's internal storage, Lua serialisation).
func (b *testBed) bobsArchive(tb testing.TB) string {
	return filepath.Join(b.get(tb, "PROSODY_DATA"), "localhost", "archive", "bob.list")
}

// loadTestBed reads a state.env and checks that the test bed it describes is up.
func loadTestBed(path string) (*testBed, error) {
	st, err := testbed.Load(path, "DISPLAY", "STAGING", "UPLOAD_DIR", "PROSODY_DATA")
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(st.Vars["STAGING"]); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("the test bed's STAGING %s is not a folder: %v", st.Vars["STAGING"], err)
	}
	// The display takes connections only with its cookie: this process's X clients and
	// every process it starts get it.
	if x := st.Vars["XAUTHORITY"]; x != "" {
		os.Setenv("XAUTHORITY", x)
	}
	return &testBed{stateFile: st.File, vars: st.Vars}, nil
}

// selfStarted is the test bed these tests started themselves, once per test binary.
var selfStarted struct {
	once sync.Once
	bed  *testBed
	err  error
	// teardown holds the watchdog's pipe open: when this process exits (normally, by a
	// panic, a test timeout or a signal) the kernel closes it and the watchdog runs
	// testbed/down.
	teardown func() error
}

// liveTestBed returns the test bed the live tests use; it fails tb when there is none
// and none can be started. It never skips.
func liveTestBed(tb testing.TB) *testBed {
	tb.Helper()
	if path := os.Getenv("SENDONCE_TESTBED_STATE"); path != "" {
		b, err := loadTestBed(path)
		if err != nil {
			tb.Fatalf("SENDONCE_TESTBED_STATE=%s: %v", path, err)
		}
		return b
	}
	if os.Getenv("CI") == "true" {
		tb.Fatal("the live tests need a running test bed and CI=true does not start one: " +
			"run `TESTBED_DIR=/tmp/tb testbed/up` from the repository root, then set " +
			"SENDONCE_TESTBED_STATE=/tmp/tb/state.env (and `TESTBED_DIR=/tmp/tb testbed/down` afterwards)")
	}
	selfStarted.once.Do(func() {
		start := time.Now()
		selfStarted.bed, selfStarted.err = startTestBed()
		if selfStarted.err == nil {
			tb.Logf("started a test bed (%s, display %s) in %v; testbed/down runs on it when this test binary exits",
				filepath.Dir(selfStarted.bed.stateFile), selfStarted.bed.vars["DISPLAY"], time.Since(start).Round(time.Millisecond))
		}
	})
	if selfStarted.err != nil {
		tb.Fatalf("no SENDONCE_TESTBED_STATE, and starting a test bed failed: %v", selfStarted.err)
	}
	// It may have died since an earlier test: check again.
	b, err := loadTestBed(selfStarted.bed.stateFile)
	if err != nil {
		tb.Fatalf("the test bed these tests started: %v", err)
	}
	return b
}

// startTestBed starts a test bed whose teardown runs when this process exits: the
// teardown is kept referenced (and never called) until then.
func startTestBed() (*testBed, error) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return nil, err
	}
	st, teardown, err := testbed.Start(repo, "DISPLAY", "STAGING", "UPLOAD_DIR", "PROSODY_DATA")
	selfStarted.teardown = teardown
	if err != nil {
		return nil, err
	}
	return &testBed{stateFile: st.File, vars: st.Vars}, nil
}

// uploads is what an upload folder holds: file -> SHA-256 of its bytes. The file is
// a *.bin name (http_file_share, Gajim's service) or SLOT/NAME (http_upload, Psi+'s).
func uploads(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		nested := strings.Contains(rel, string(filepath.Separator))
		if !e.Type().IsRegular() || !nested && !strings.HasSuffix(rel, ".bin") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{} // Prosody makes it at the first upload
	}
	if err != nil {
		tb.Fatalf("reading the upload folder %s: %v", dir, err)
	}
	return out
}

// newUploads is what after holds that before did not: file name -> SHA-256.
func newUploads(before, after map[string]string) map[string]string {
	out := map[string]string{}
	for name, sum := range after {
		if _, ok := before[name]; !ok {
			out[name] = sum
		}
	}
	return out
}

func countSHA(files map[string]string, sum string) int {
	n := 0
	for _, s := range files {
		if s == sum {
			n++
		}
	}
	return n
}

// liveApp is one chat app of the test bed, as the live tests drive it: its profile, the
// state keys of its display and upload folder, and the account it sends as.
type liveApp struct {
	name                                       string
	displayKey, uploadKey, jidKey, passwordKey string
	// providerConfirms: the app's mark of our side is one a peer can produce (Psi+
	// renders a peer's coloured text), so only the provider confirms a delivery: every
	// delivery is given the account.
	providerConfirms bool
}

var (
	gajimApp = liveApp{name: "gajim", displayKey: "DISPLAY", uploadKey: "UPLOAD_DIR", jidKey: "ALICE_JID", passwordKey: "ALICE_PASSWORD"}
	psiApp   = liveApp{name: "psi-plus", displayKey: "PSI_DISPLAY", uploadKey: "PSI_UPLOAD_DIR", jidKey: "PSI_JID", passwordKey: "PSI_PASSWORD", providerConfirms: true}
	// Converse.js, a web client, in Chromium (alice again, as resource converse.testbed):
	// its author line is one any peer's message draws alike, so the provider confirms.
	converseApp = liveApp{name: "converse", displayKey: "CONVERSE_DISPLAY", uploadKey: "UPLOAD_DIR", jidKey: "ALICE_JID", passwordKey: "ALICE_PASSWORD", providerConfirms: true}
	// The second workstation's Gajim (alice again), started without its accessibility
	// bridge (NO_AT_BRIDGE=1): it publishes no tree.
	bridgelessGajimApp = liveApp{name: "gajim", displayKey: "WS2_DISPLAY", uploadKey: "UPLOAD_DIR", jidKey: "ALICE_JID", passwordKey: "ALICE_PASSWORD"}
)

// liveRun is one live test's world: the test bed, the app, a fresh store, a folder for files.
type liveRun struct {
	t       *testing.T
	bed     *testBed
	app     liveApp
	store   string
	dir     string
	bundles []string
	start   map[string]string // the upload folder when the test began
	files   map[string]string // SHA-256 -> name of the files this test made
}

func newLive(t *testing.T) *liveRun {
	t.Helper()
	return newLiveWith(t, gajimApp)
}

// newLiveWith is newLive for the app given: the test bed must have started it.
func newLiveWith(t *testing.T, app liveApp) *liveRun {
	t.Helper()
	bed := liveTestBed(t)
	l := &liveRun{t: t, bed: bed, app: app, store: newStore(t), dir: t.TempDir(), files: map[string]string{}}
	l.start = uploads(t, l.uploadDir())
	// Registered after t.TempDir: it runs before the folders are removed.
	t.Cleanup(l.keepWhatFailed)
	return l
}

// file writes a file whose content no other test or run has, and returns its path and
// SHA-256.
func (l *liveRun) file(name string) (string, string) {
	l.t.Helper()
	content := fmt.Sprintf("sendonce live test %s at %d\nline two: the quick brown fox jumps over the lazy dog\n", l.t.Name(), time.Now().UnixNano())
	// A size of its own too: a chat that scrolls can hide an older card with the same
	// name and size, and the screen alone then cannot tell the new one (that case is
	// unknown by design, and reconcile's to resolve).
	content += strings.Repeat(".", int(time.Now().UnixNano()/1000%700)) + "\n"
	path := filepath.Join(l.dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		l.t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(content))
	l.files[hex.EncodeToString(sum[:])] = name
	return path, hex.EncodeToString(sum[:])
}

// uploadDir is the folder the app's uploads land in; display the app's display.
func (l *liveRun) uploadDir() string { return l.bed.get(l.t, l.app.uploadKey) }
func (l *liveRun) display() string   { return l.bed.get(l.t, l.app.displayKey) }

func (l *liveRun) deliverArgs(file, to string, extra ...string) []string {
	args := []string{"deliver", "--app", l.app.name, "--to", to, "--dest-id", "xmpp:bob@localhost", "--file", file,
		"--display", l.display(), "--staging", l.bed.staging(l.t), "--store", l.store, "--json"}
	if l.app.providerConfirms && !slices.Contains(extra, "--provider-config") {
		args = append(args, "--provider-config", l.providerConfig())
	}
	return append(args, extra...)
}

// deliver runs one delivery as a real process; it returns the printed object, the exit
// code and how long the process took.
func (l *liveRun) deliver(file, to string, extra ...string) (map[string]any, int, time.Duration) {
	l.t.Helper()
	start := time.Now()
	out, code := cli(l.t, liveEnv, l.deliverArgs(file, to, extra...)...)
	took := time.Since(start)
	m := decode(l.t, out)
	l.noteBundle(m)
	l.t.Logf("deliver --to %s %s: exit %d in %v: outcome %v", to, filepath.Base(file), code, took.Round(time.Millisecond), m["outcome"])
	return m, code, took
}

func (l *liveRun) noteBundle(m map[string]any) {
	if b, _ := m["evidence"].(string); b != "" {
		l.bundles = append(l.bundles, b)
	}
}

// wantSentVerified fails the test unless a delivery exited 0 with sent_verified.
func (l *liveRun) wantSentVerified(m map[string]any, code int) {
	l.t.Helper()
	if code != exitOK || m["outcome"] != "sent_verified" {
		l.t.Fatalf("deliver exited %d; want 0 sent_verified\n%s", code, describe(m))
	}
}

// describe is what a failure message says about a delivery's printed object.
func describe(m map[string]any) string {
	var b strings.Builder
	for _, k := range []string{"outcome", "error", "stopped", "reasons", "gate", "evidence"} {
		switch v := m[k].(type) {
		case nil:
		case []any:
			fmt.Fprintf(&b, "%s:\n", k)
			for _, r := range v {
				fmt.Fprintf(&b, "  - %v\n", r)
			}
		default:
			fmt.Fprintf(&b, "%s: %v\n", k, v)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// waitUploads waits (a few seconds at most) until the upload folder holds a new file with
// each of the SHA-256s, and returns what is new.
func (l *liveRun) waitUploads(before map[string]string, sums ...string) map[string]string {
	l.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		fresh := newUploads(before, uploads(l.t, l.uploadDir()))
		all := true
		for _, s := range sums {
			if countSHA(fresh, s) == 0 {
				all = false
			}
		}
		if all || time.Now().After(deadline) {
			return fresh
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// wantExactlyOneCopyEach fails the test unless the new uploads are exactly one file per
// SHA-256 given, and nothing else.
func (l *liveRun) wantExactlyOneCopyEach(before map[string]string, sums ...string) map[string]string {
	l.t.Helper()
	fresh := l.waitUploads(before, sums...)
	for _, s := range sums {
		if n := countSHA(fresh, s); n != 1 {
			l.t.Errorf("the upload folder got %d new copies of %s; want exactly 1 (new files: %v)", n, s, fresh)
		}
	}
	if len(fresh) != len(sums) {
		l.t.Errorf("the upload folder got %d new files; want %d (new files: %v)", len(fresh), len(sums), fresh)
	}
	if l.t.Failed() {
		l.t.FailNow()
	}
	return fresh
}

// wantInBobsArchive fails the test unless Bob's archive holds a message linking to the
// upload bin (a file name in the upload folder) under the name fileName.
func (l *liveRun) wantInBobsArchive(bin, fileName string) {
	l.t.Helper()
	id, err := url.PathUnescape(strings.TrimSuffix(bin, ".bin")) // %2d -> -, %5f -> _
	if err != nil {
		l.t.Fatalf("upload file name %q: %v", bin, err)
	}
	l.waitLinkInBobsArchive("/file_share/" + id + "/" + fileName)
}

// waitLinkInBobsArchive fails the test unless Bob's archive holds a message containing
// link within 10 seconds.
func (l *liveRun) waitLinkInBobsArchive(link string) {
	l.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(l.bed.bobsArchive(l.t))
		if err == nil && strings.Contains(string(b), link) {
			return
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("Bob's archive %s has no message linking %s (read error: %v)", l.bed.bobsArchive(l.t), link, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// verifyBundle checks the printed bundle with `evidence verify --store`: intact, every
// chain head the store recorded in it, sealed with the outcome printed.
func (l *liveRun) verifyBundle(m map[string]any) {
	l.t.Helper()
	bundle, _ := m["evidence"].(string)
	if bundle == "" {
		l.t.Fatalf("deliver printed no evidence bundle: %v", m)
	}
	out, code := cli(l.t, nil, "evidence", "verify", bundle, "--store", l.store, "--json")
	if code != exitOK {
		l.t.Fatalf("evidence verify %s --store: exit %d: %s", bundle, code, out)
	}
	v := decode(l.t, out)
	if v["verified"] != true || v["sealed"] != true {
		l.t.Fatalf("evidence verify %s: %s; want verified and sealed", bundle, out)
	}
	if v["seal_outcome"] != m["outcome"] || v["dispatch_id"] != m["dispatch_id"] {
		l.t.Fatalf("evidence verify %s: seal outcome %v, dispatch %v; deliver printed %v, %v", bundle, v["seal_outcome"], v["dispatch_id"], m["outcome"], m["dispatch_id"])
	}
}

// wantFieldReadBack checks that the delivery read the typed path back from the chooser's
// field through the X selection, and that the app's field held the path typed.
func (l *liveRun) wantFieldReadBack(m map[string]any) {
	l.t.Helper()
	b, err := evidence.Verify(m["evidence"].(string), evidence.VerifyOptions{})
	if err != nil {
		l.t.Fatal(err)
	}
	var typed string
	var read []string
	for _, r := range b.Records {
		for _, in := range r.Inputs {
			if in.Kind == "type_path" {
				typed = in.Path
			}
		}
		if r.Target != nil && r.Target.Method == "x_selection" {
			read = append(read, r.Target.Words...)
		}
	}
	if typed == "" || len(read) != 1 || read[0] != typed {
		l.t.Fatalf("the bundle holds the typed path %q and the field read back through the X selection as %q; want one reading, the path", typed, read)
	}
}

// status returns `status --key KEY --json`.
func (l *liveRun) status(key string) map[string]any {
	l.t.Helper()
	out, code := cli(l.t, nil, "status", "--store", l.store, "--key", key, "--json")
	if code != exitOK {
		l.t.Fatalf("status --key %s: exit %d: %s", key, code, out)
	}
	return decode(l.t, out)
}

// crossings counts the crossings of every attempt of every intent a status shows.
func crossings(t *testing.T, st map[string]any) (attempts, crossed int) {
	t.Helper()
	intents, ok := st["intents"].([]any)
	if !ok {
		t.Fatalf("status without intents: %v", st)
	}
	for _, in := range intents {
		as, _ := in.(map[string]any)["attempts"].([]any)
		for _, a := range as {
			attempts++
			cs, ok := a.(map[string]any)["crossings"].([]any)
			if !ok {
				t.Fatalf("an attempt without a crossings list: %v", a)
			}
			crossed += len(cs)
		}
	}
	return attempts, crossed
}

// keepWhatFailed, when the test failed, keeps what explains it out of the test's
// temporary folders: a screenshot of the test bed, the evidence bundles and the store,
// and logs the end of each bundle's steps.jsonl.
func (l *liveRun) keepWhatFailed() {
	if !l.t.Failed() {
		return
	}
	keep, err := os.MkdirTemp("", "sendonce-live-failure-")
	if err != nil {
		l.t.Logf("keeping the failure: %v", err)
		return
	}
	if d := l.bed.vars[l.app.displayKey]; d != "" {
		png := filepath.Join(keep, "screen.png")
		if out, err := exec.Command("import", "-display", d, "-window", "root", "png:"+png).CombinedOutput(); err != nil {
			l.t.Logf("screenshot: %v %s", err, out)
		}
	}
	exec.Command("cp", "-a", l.store, filepath.Join(keep, filepath.Base(l.store))).Run()
	for _, b := range l.bundles {
		exec.Command("cp", "-a", b, filepath.Join(keep, filepath.Base(b))).Run()
		if steps, err := os.ReadFile(filepath.Join(b, "steps.jsonl")); err == nil {
			l.t.Logf("last records of %s/steps.jsonl (without hashes and OCR words):\n%s", b, tail(compactSteps(steps), 12))
		}
	}
	// What really reached the server, whatever the outcome said.
	fresh := newUploads(l.start, uploads(l.t, l.uploadDir()))
	for sum, name := range l.files {
		l.t.Logf("the server got %d copies of %s (%s) during this test", countSHA(fresh, sum), name, sum)
	}
	if len(fresh) > 0 {
		l.t.Logf("new files in the upload folder during this test: %v", fresh)
	}
	l.t.Logf("kept the screenshot, store and evidence bundles in %s", keep)
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// compactSteps is steps.jsonl made readable in a test log: each record without its
// hashes and OCR word lists (the kept bundle has them), cut to 500 bytes.
func compactSteps(steps []byte) string {
	var out []string
	for _, line := range strings.Split(strings.TrimRight(string(steps), "\n"), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil {
			for _, k := range []string{"prev", "before", "after", "ocr", "mono_ns"} {
				delete(r, k)
			}
			if b, err := json.Marshal(r); err == nil {
				line = string(b)
			}
		}
		if len(line) > 500 {
			line = line[:500] + "…"
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// TestLiveDeliverTextFile: one delivery of a text file to Bob is sent_verified, exactly
// one copy of its bytes reaches the server, linked in Bob's archive, and the evidence
// bundle verifies against the store, sealed.
func TestLiveDeliverTextFile(t *testing.T) {
	l := newLive(t)
	file, sum := l.file("report.txt")
	before := uploads(t, l.uploadDir())

	m, code, _ := l.deliver(file, "Bob")
	l.wantSentVerified(m, code)

	fresh := l.wantExactlyOneCopyEach(before, sum)
	for bin := range fresh {
		l.wantInBobsArchive(bin, "report.txt")
	}
	l.verifyBundle(m)
	l.wantFieldReadBack(m)
	key, _ := m["key"].(string)
	if st := l.status(key); st["status"] != "sent_verified" {
		t.Fatalf("status after the delivery: %v; want sent_verified", st)
	}
}

// TestLiveProviderConfirmsBesideTheLook: with a provider to ask, the provider is asked
// while the screen still looks for the sent item, and its confirmation (the server's
// copy downloaded, its SHA-256 the content's) ends the look: the bundle holds one read
// of the chat after the send, not the two a settle apart that the screen needs to
// confirm alone, and the delivery is sent_verified with one copy on the server. Asked
// only after the look (as before), the lookup would follow both reads. The provider
// answers in about 0.1 s here; the second read would come a settle (1 s) after the
// first.
func TestLiveProviderConfirmsBesideTheLook(t *testing.T) {
	l := newLive(t)
	file, sum := l.file("witnessed.txt")
	before := uploads(t, l.uploadDir())

	m, code, _ := l.deliver(file, "Bob", "--provider-config", l.providerConfig())
	l.wantSentVerified(m, code)
	l.wantExactlyOneCopyEach(before, sum)
	l.verifyBundle(m)

	steps, err := os.ReadFile(filepath.Join(m["evidence"].(string), "steps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lookup, lastLook, looks := 0, 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(steps)), "\n") {
		var r struct {
			Seq      int    `json:"seq"`
			Kind     string `json:"kind"`
			Observed *struct {
				What, Phase string
			} `json:"observed"`
			Lookup *struct {
				Result string `json:"result"`
			} `json:"lookup"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		switch {
		case r.Kind == "lookup":
			if lookup != 0 || r.Lookup.Result != "found" {
				t.Fatalf("record %d: a lookup %+v; want one lookup, found", r.Seq, r.Lookup)
			}
			lookup = r.Seq
		case r.Observed != nil && r.Observed.What == "sent_items" && r.Observed.Phase == "after_send":
			lastLook, looks = r.Seq, looks+1
		}
	}
	if lookup == 0 || looks != 1 {
		t.Fatalf("lookup at record %d, %d reads after the send (the last at %d); want a lookup and one read: asked beside the look, its confirmation ends it\n%s",
			lookup, looks, lastLook, tail(compactSteps(steps), 8))
	}
}

// TestLiveSecondRunRefused, through each app: the same command run again after a
// verified delivery is refused as consumed at its claim (no attempt of its own: it never
// touches the desktop), and the server still holds exactly one copy.
func TestLiveSecondRunRefused(t *testing.T) {
	for _, app := range []liveApp{gajimApp, psiApp, converseApp} {
		t.Run(app.name, func(t *testing.T) {
			l := newLiveWith(t, app)
			file, sum := l.file("again.txt")
			before := uploads(t, l.uploadDir())

			first, code, _ := l.deliver(file, "Bob")
			l.wantSentVerified(first, code)
			l.wantExactlyOneCopyEach(before, sum)

			second, code, _ := l.deliver(file, "Bob")
			if code != exitConsumed || second["outcome"] != "refused" {
				t.Fatalf("the second run exited %d; want 3 refused\n%s", code, describe(second))
			}
			// Refused at the claim: no attempt of its own, so no step could run.
			key, _ := first["key"].(string)
			if attempts, _ := crossings(t, l.status(key)); attempts != 1 {
				t.Errorf("the store shows %d attempts after the refused run; want the first one only", attempts)
			}
			if second["key"] != first["key"] {
				t.Errorf("the second run's key %v differs from the first's %v", second["key"], first["key"])
			}
			if second["evidence"] != first["evidence"] {
				t.Errorf("the refusal names the evidence %v; want the first attempt's %v", second["evidence"], first["evidence"])
			}
			l.wantExactlyOneCopyEach(before, sum)
		})
	}
}

// TestLiveWrongTitleTouchesNoBoundary, through each app: the conversation for
// xmpp:bob@localhost is titled "Bob", not the "Bobby" asked for (Psi+'s roster shows no
// Bobby to open): the delivery stops before any boundary,
// not_sent, with no crossing in the store and nothing uploaded.
func TestLiveWrongTitleTouchesNoBoundary(t *testing.T) {
	for _, app := range []liveApp{gajimApp, psiApp, converseApp} {
		t.Run(app.name, func(t *testing.T) {
			l := newLiveWith(t, app)
			file, sum := l.file("wrong.txt")
			before := uploads(t, l.uploadDir())

			m, code, _ := l.deliver(file, "Bobby")
			if code != exitNotSent || m["outcome"] != "not_sent" {
				t.Fatalf("deliver --to Bobby exited %d; want 8 not_sent\n%s", code, describe(m))
			}
			key, _ := m["key"].(string)
			st := l.status(key)
			if st["status"] != "not_sent" {
				t.Errorf("status --key %s: %v; want not_sent", key, st["status"])
			}
			attempts, crossed := crossings(t, st)
			if attempts != 1 || crossed != 0 {
				t.Errorf("status shows %d attempt(s) with %d crossing(s); want 1 attempt and no crossing: %v", attempts, crossed, st)
			}
			l.verifyBundle(m)
			time.Sleep(time.Second) // an upload, had one started, lands within a fraction of that
			fresh := newUploads(before, uploads(t, l.uploadDir()))
			if len(fresh) != 0 || countSHA(fresh, sum) != 0 {
				t.Fatalf("the upload folder got new files: %v; want none", fresh)
			}
		})
	}
}

// TestLiveTwoFilesAtOnce: two deliveries of two files to Bob started at the same moment
// on one display both end sent_verified, one after the other (the display lease), and
// the server holds exactly one copy of each.
func TestLiveTwoFilesAtOnce(t *testing.T) {
	l := newLive(t)
	fileA, sumA := l.file("first.txt")
	fileB, sumB := l.file("second.txt")
	before := uploads(t, l.uploadDir())

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	type run struct {
		file       string
		cmd        *exec.Cmd
		out, errb  bytes.Buffer
		start, end time.Time
	}
	runs := []*run{{file: fileA}, {file: fileB}}
	for _, r := range runs {
		r.cmd = exec.CommandContext(ctx, self(t), l.deliverArgs(r.file, "Bob", "--display-wait", "3m")...)
		r.cmd.Env = append(append(os.Environ(), "SENDONCE_AS_CLI=1"), liveEnv...)
		r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.errb
	}
	for _, r := range runs {
		r.start = time.Now()
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.cmd.Wait()
			r.end = time.Now()
		}()
	}
	wg.Wait()

	var dispatches []string
	for _, r := range runs {
		if err := ctx.Err(); err != nil {
			t.Fatalf("the deliveries did not finish in time: %v", err)
		}
		code := r.cmd.ProcessState.ExitCode()
		m := decode(t, r.out.String())
		l.noteBundle(m)
		t.Logf("deliver %s: exit %d in %v: outcome %v", filepath.Base(r.file), code, r.end.Sub(r.start).Round(time.Millisecond), m["outcome"])
		if code != exitOK || m["outcome"] != "sent_verified" {
			t.Errorf("deliver %s exited %d; want 0 sent_verified\n%s\nstderr:\n%s",
				filepath.Base(r.file), code, describe(m), tail(r.errb.String(), 20))
			continue
		}
		l.verifyBundle(m)
		d, _ := m["dispatch_id"].(string)
		dispatches = append(dispatches, d)
	}
	if t.Failed() {
		t.FailNow()
	}
	if dispatches[0] == dispatches[1] {
		t.Fatalf("both deliveries printed dispatch %s", dispatches[0])
	}
	fresh := l.wantExactlyOneCopyEach(before, sumA, sumB)
	names := map[string]string{sumA: "first.txt", sumB: "second.txt"}
	bins := make([]string, 0, len(fresh))
	for bin := range fresh {
		bins = append(bins, bin)
	}
	sort.Strings(bins)
	for _, bin := range bins {
		l.wantInBobsArchive(bin, names[fresh[bin]])
	}
}

// BenchmarkLiveDelivery measures one whole delivery through Gajim, from the process start
// to its exit with sent_verified (b.N deliveries of unique files, one store). Each file
// has its own name too (bench-NNNNN.txt): the benchmark measures time, while the tests
// above keep their names fixed from run to run, as a user sending report.txt every day.
func BenchmarkLiveDelivery(b *testing.B) {
	bed := liveTestBed(b)
	dir := b.TempDir()
	store := filepath.Join(dir, "sendonce.db")
	if out, code := cli(b, nil, "init", "--store", store); code != 0 {
		b.Fatalf("init: %d %s", code, out)
	}
	for i := 0; b.Loop(); i++ {
		file := filepath.Join(dir, fmt.Sprintf("bench-%05d.txt", time.Now().UnixNano()/1000%100000))
		content := fmt.Sprintf("sendonce live benchmark %s %d at %d\n", b.Name(), i, time.Now().UnixNano())
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
		out, code := cli(b, liveEnv, "deliver", "--app", "gajim", "--to", "Bob", "--dest-id", "xmpp:bob@localhost",
			"--file", file, "--display", bed.display(b), "--staging", bed.staging(b), "--store", store, "--json")
		if code != exitOK || !strings.Contains(out, `"outcome":"sent_verified"`) {
			b.Fatalf("delivery %d exited %d: %s", i, code, out)
		}
	}
}

// TestLiveDryRun: --dry-run reads the visible title, claims nothing, crosses nothing,
// and exits 0 only when a real run would proceed.
func TestLiveDryRun(t *testing.T) {
	l := newLive(t)
	file, _ := l.file("dry.txt")
	before := uploads(t, l.uploadDir())
	m, code, _ := l.deliver(file, "Bob", "--dry-run")
	if code != 0 || m["outcome"] != "dry_run" || m["title_matches"] != true || m["would_proceed"] != true {
		t.Fatalf("dry run to Bob exited %d; want 0 with the title matching\n%s", code, describe(m))
	}
	key, _ := m["key"].(string)
	if st := l.status(key); st["status"] != "free" {
		t.Fatalf("after a dry run the key is %v; want free: a dry run claims nothing", st["status"])
	}
	m, code, _ = l.deliver(file, "Bobby", "--dry-run")
	if code != exitNotSent || m["title_matches"] != false || m["would_proceed"] != false {
		t.Fatalf("dry run to Bobby exited %d; want 8, title not matching\n%s", code, describe(m))
	}
	time.Sleep(time.Second)
	if fresh := newUploads(before, uploads(t, l.uploadDir())); len(fresh) != 0 {
		t.Fatalf("a dry run uploaded %v", fresh)
	}
}

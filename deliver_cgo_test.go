//go:build cgo

package sendonce_test

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"image"
	"image/draw"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/driver/replay"
	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store/postgres/pgtest"
	"github.com/sendonce/sendonce/vision/tesseract"

	_ "modernc.org/sqlite" // the test's own connection, that holds the store locked
)

// These tests replay recorded fixtures through the library's delivery entry point: the
// gate store, the runner, real Tesseract OCR, the evidence and the classifier, with the
// replay driver and no X server.

func TestMain(m *testing.M) {
	// libtesseract reads this when it loads; single-threaded OCR is faster on small
	// machines. The CLI sets it by re-exec; a test binary sets it here, before any test.
	os.Setenv("OMP_THREAD_LIMIT", "1")
	os.Exit(m.Run())
}

// replayed is one fixture ready to deliver.
type replayed struct {
	drv    *replay.Driver
	fx     *replay.Fixture
	client *sendonce.Client
	req    sendonce.DeliveryRequest
	ocr    *tesseract.Banded
}

func newReplayed(t *testing.T, fixture string, opt sendonce.Options) *replayed {
	t.Helper()
	dir := filepath.Join("testdata", "fixtures", fixture)
	drv, err := replay.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	fx := drv.Fixture()
	work := t.TempDir()
	file := filepath.Join(work, fx.FileName)
	content, err := os.ReadFile(filepath.Join(dir, "file", fx.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, content, 0o644); err != nil {
		t.Fatal(err)
	}
	loc := filepath.Join(work, "sendonce.db")
	if _, err := sendonce.Init(context.Background(), loc, sendonce.InitRequest{}, sendonce.Options{}); err != nil {
		t.Fatal(err)
	}
	opt.EvidenceRoot = filepath.Join(work, "evidence")
	// Profiles written for the tests (testdata/profiles: gajim-previews, say) besides the built-ins.
	opt.ProfileDirs = append(opt.ProfileDirs, "testdata/profiles")
	c, err := sendonce.Open(context.Background(), loc, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ocr, err := tesseract.NewBanded(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ocr.Close() })
	req := sendonce.DeliveryRequest{App: fx.App, Destination: sendonce.Destination{Title: fx.To, ProviderID: fx.DestID},
		Content: sendonce.Content{Path: file}, Display: ":replay", Staging: filepath.Join(work, "staging"), SentItemTimeout: 2 * time.Second}
	return &replayed{drv: drv, fx: fx, client: c, req: req, ocr: ocr}
}

// deliverSettled delivers the fixture and fails unless it ends with want, settled,
// its bundle sealed and verified.
func (r *replayed) deliverSettled(t *testing.T, want gate.Outcome) sendonce.DeliveryResult {
	t.Helper()
	res, err := r.deliverer().Deliver(context.Background(), r.req)
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if res.Outcome != string(want) {
		t.Fatalf("outcome %s; want %s\nreasons: %v", res.Outcome, want, res.Reasons)
	}
	assertSettled(t, r.client, res)
	return res
}

// typedPathInput is the index of the recording's input that typed the file's path (-1
// if none did).
func (r *replayed) typedPathInput() int {
	typed := -1
	for i, in := range r.fx.Inputs {
		if in.Kind == "type" && strings.HasPrefix(in.Text, "/") {
			typed = i
		}
	}
	return typed
}

func (r *replayed) deliverer() *sendonce.Deliverer {
	d := &sendonce.Deliverer{Client: r.client, OCR: r.drv.OCR(r.ocr),
		OpenDesktop: func(context.Context, string) (driver.Driver, func(), error) { return r.drv, func() {}, nil }}
	if r.drv.HasTrees() { // recorded with the app's tree: replay it too
		d.OpenTree = func(context.Context, string) (driver.Tree, func()) { return r.drv.Tree(), func() {} }
	}
	return d
}

// TestReplayFixtures: every recorded fixture's outcome is the one the live run
// recorded, every recorded input event is sent, in order, and the bundle is sealed and
// classifies the same.
func TestReplayFixtures(t *testing.T) {
	// Gajim's fixtures are testdata/fixtures/NAME, another app's testdata/fixtures/APP/NAME.
	var names []string
	for _, pattern := range []string{"testdata/fixtures/*/fixture.json", "testdata/fixtures/*/*/fixture.json"} {
		found, _ := filepath.Glob(pattern)
		for _, f := range found {
			names = append(names, strings.TrimPrefix(filepath.Dir(f), filepath.Join("testdata", "fixtures")+string(filepath.Separator)))
		}
	}
	if len(names) < 9 {
		t.Fatalf("%d fixtures under testdata/fixtures; want at least 9 (sendonce record)", len(names))
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			r := newReplayed(t, name, sendonce.Options{})
			// A staging folder readable by the app's group (as the test bed's is).
			if err := os.Mkdir(r.req.Staging, 0o750); err != nil {
				t.Fatal(err)
			}
			os.Chmod(r.req.Staging, 0o750)
			res, err := r.deliverer().Deliver(context.Background(), r.req)
			if err != nil {
				t.Fatalf("Deliver: %v (result %+v)", err, res)
			}
			if want := replayExpected(t, r.fx.App, r.fx.Expected); res.Outcome != want {
				t.Fatalf("outcome %s; the live run recorded %s, so want %s\nreasons: %v", res.Outcome, r.fx.Expected, want, res.Reasons)
			} else if want != r.fx.Expected && !slices.ContainsFunc(res.Reasons, func(s string) bool { return strings.Contains(s, "peer_producible") }) {
				t.Fatalf("outcome %s and no reason names the profile's mark: %v", res.Outcome, res.Reasons)
			}
			if r.drv.Inputs() != len(r.fx.Inputs) {
				t.Fatalf("replayed %d of %d recorded input events", r.drv.Inputs(), len(r.fx.Inputs))
			}
			// A fixture recorded with the app's tree replays it: the title comes from it.
			if want := r.drv.HasTrees(); want != (res.AccessibilityTree == "read") || want != strings.HasPrefix(res.TitleSources, "accessibility_tree") {
				t.Fatalf("the fixture holds trees: %v; the replay's tree %q, title sources %q", want, res.AccessibilityTree, res.TitleSources)
			}
			assertSettled(t, r.client, res)
			assertSnapshot(t, r.req.Staging, res, 0o440)
			b, err := evidence.Verify(res.Evidence, evidence.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			checkSkeleton(t, name, b)
			// A verified delivery recorded with the conversation's tree confirms from it:
			// the sent item's name in the app's words, OCR agreeing.
			if r.drv.HasTrees() && res.Outcome == "sent_verified" {
				var agreed bool
				for _, rec := range b.Records {
					if o := rec.Observed; o != nil && o.What == "sent_items" && o.Phase == "after_send" && len(o.Items) > 0 &&
						len(o.Readings) == 2 && o.Readings[0].Source == "accessibility_tree" && o.Readings[0].Text == r.fx.FileName && o.Readings[1].Verdict == "agree" {
						agreed = true
					}
				}
				if !agreed {
					t.Fatalf("no read after the send shows the sent item from the tree, OCR agreeing")
				}
			}
		})
	}
}

// profileVariant writes profile (its app renamed to app) with replace replaced by with
// into a folder of its own, and returns the options that load it.
func profileVariant(t *testing.T, profile, app, replace, with string) sendonce.Options {
	t.Helper()
	dir := t.TempDir()
	text := strings.Replace(profile, replace, with, 1)
	if text == profile {
		t.Fatalf("the profile has no %s", replace)
	}
	text = regexp.MustCompile(`"app": "[^"]*"`).ReplaceAllString(text, `"app": "`+app+`"`)
	if err := os.WriteFile(filepath.Join(dir, app+".json"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return sendonce.Options{ProfileDirs: []string{dir}}
}

// TestReplayedPathReadBack: Gajim's built-in profile reads the typed path back from the
// field through the X selection (read_field; the replay answers with what this run
// typed, or what Shows makes of it), and a variant reads it whole by OCR instead
// (whole_line). Each delivers the recording whose field holds the path as typed. When
// the field holds this run's path with one character of a folder's name lost (as an
// app that dropped a key would), its file name intact, the read-back stops the delivery
// before choose_file: not_sent, the Return that would choose the file never sent.
func TestReplayedPathReadBack(t *testing.T) {
	profile, err := os.ReadFile("driver/profiles/gajim.json")
	if err != nil {
		t.Fatal(err)
	}
	whole := func(t *testing.T) sendonce.Options {
		return profileVariant(t, string(profile), "gajim-whole-path",
			`"text": "{{file_name}}", "suffix": true, "after_change": true, "window": "Choose File to Send", "region": {"x": 160, "y": 5, "w": -5, "h": 40}, "prep": {"Gray": true, "Scale": 2}, "alt_preps": [{"Gray": true, "Scale": 2, "Smooth": true}, {"Gray": true, "Scale": 3, "Smooth": true}]`,
			`"text": "{{file_path}}", "whole_line": true, "after_change": true, "window": "Choose File to Send", "region": {"x": 160, "y": 5, "w": -5, "h": 40}, "prep": {"Gray": true, "Scale": 3, "Smooth": true}, "alt_preps": [{"Gray": true, "Scale": 4, "Smooth": true}, {"Gray": true, "Scale": 3, "Smooth": true, "Threshold": 180}, {"Gray": true, "Scale": 6, "Smooth": true}]`)
	}
	for _, tc := range []struct {
		name, fixture, lose string
		ocr                 bool // the variant that reads the field whole by OCR, else the built-in profile
		want                gate.Outcome
	}{
		{"as typed", "verified-text-file", "", false, gate.SentVerified},
		{"a folder's character lost", "verified-text-file", "staging", false, gate.NotSent},
		{"a dispatch character lost", "verified-text-file", "dispatch", false, gate.NotSent},
		{"by OCR, as typed", "verified-text-file", "", true, gate.SentVerified},
		{"by OCR, as typed, after a leftover send page", "leftover-send-page", "", true, gate.SentVerified},
		{"by OCR, a folder's character lost", "verified-text-file", "staging", true, gate.NotSent},
		{"by OCR, a dispatch character lost", "verified-text-file", "dispatch", true, gate.NotSent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, check := newReplayed(t, tc.fixture, sendonce.Options{}), "read the typed path back"
			if tc.ocr {
				r, check = newReplayed(t, tc.fixture, whole(t)), "check the typed path"
				r.req.App = "gajim-whole-path"
			}
			os.Mkdir(r.req.Staging, 0o750)
			os.Chmod(r.req.Staging, 0o750)
			shown := 0
			if tc.lose != "" {
				r.drv.Shows = func(typed string) string {
					shown++
					dir, name := filepath.Split(typed)
					parent, dispatch := filepath.Split(strings.TrimSuffix(dir, "/"))
					if tc.lose == "staging" {
						i := strings.LastIndex(parent, "staging")
						return parent[:i] + "stging/" + dispatch + "/" + name
					}
					return parent + dispatch[:10] + dispatch[11:] + "/" + name
				}
			}
			res := r.deliverSettled(t, tc.want)
			if tc.lose == "" {
				return
			}
			choose := r.typedPathInput() + 1 // the Return after the typed path
			if shown == 0 {
				t.Fatal("the field never showed the path with a character lost: the stop proves nothing of the check")
			}
			if r.drv.Inputs() > choose || !strings.Contains(res.Stopped, check) {
				t.Fatalf("stopped after %d inputs (the Return that chooses is input %d): %q; want a stop at %q, before it", r.drv.Inputs(), choose+1, res.Stopped, check)
			}
		})
	}
}

// TestReplayedChooserNotReady: Gajim's file chooser, used for the first time in a
// fresh profile, takes a moment after the path is typed before its Open button is
// sensitive, and a Return pressed before then is lost (testbed/NOTES.md); a lost Return
// is a crossing that did nothing, and the key would be spent on it. So the profile
// waits for Open to be sensitive before the Return. Here the recorded delivery's
// chooser shows Open as it looks insensitive (pixels of a live capture,
// testdata/controls) from the typed path on: the delivery stops before the Return, not
// sent, nothing crossed. The control pastes Open as it looks sensitive at the same
// place and delivers, so the case tests the button and not the paste.
func TestReplayedChooserNotReady(t *testing.T) {
	for _, tc := range []struct {
		button string
		want   gate.Outcome
	}{
		{"gtk-open-sensitive.png", gate.SentVerified},
		{"gtk-open-insensitive.png", gate.NotSent},
	} {
		t.Run(tc.button, func(t *testing.T) {
			r := newReplayed(t, "verified-text-file", sendonce.Options{})
			typed, chooser := r.typedPathInput(), image.Rectangle{}
			for _, st := range r.fx.States[:typed+2] {
				for _, w := range st.Windows {
					if strings.HasPrefix(w.Title, "Choose File to Send") && w.Viewable {
						chooser = w.Bounds
					}
				}
			}
			if typed < 0 || chooser.Empty() {
				t.Fatalf("the fixture has no typed path (%d) or no chooser (%v)", typed, chooser)
			}
			button := pngFile(t, filepath.Join("testdata", "controls", tc.button))
			at := chooser.Max.Add(image.Pt(-94, -41)) // where the capture's crop was taken from
			painted := 0
			r.drv.Repaint = func(inputs int, recorded *image.RGBA) *image.RGBA {
				if inputs != typed+1 { // after the typed path, before the Return
					return recorded
				}
				painted++
				out := image.NewRGBA(recorded.Bounds())
				draw.Draw(out, out.Bounds(), recorded, recorded.Bounds().Min, draw.Src)
				draw.Draw(out, button.Bounds().Sub(button.Bounds().Min).Add(at), button, button.Bounds().Min, draw.Src)
				return out
			}
			res := r.deliverSettled(t, tc.want)
			if painted == 0 {
				t.Fatal("no frame between the typed path and the Return was captured: the case tests nothing")
			}
			if tc.want == gate.SentVerified {
				return
			}
			if r.drv.Inputs() > typed+1 || !strings.Contains(res.Stopped, "wait for Open to be enabled") {
				t.Fatalf("stopped after %d inputs (the Return that chooses is input %d): %q; want a stop at the wait for Open, before the Return", r.drv.Inputs(), typed+2, res.Stopped)
			}
		})
	}
}

// pngFile reads a PNG.
func pngFile(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

// assertSnapshot: after a settled outcome the snapshot is gone; after
// send_status_unknown it is kept, read-only, in <staging>/<dispatch>/<name>.
func assertSnapshot(t *testing.T, staging string, res sendonce.DeliveryResult, mode os.FileMode) {
	t.Helper()
	dir := filepath.Join(staging, res.DispatchID)
	es, err := os.ReadDir(dir)
	if res.Outcome != string(gate.SendStatusUnknown) {
		if !os.IsNotExist(err) {
			t.Fatalf("after %s the snapshot folder %s is still there (%v)", res.Outcome, dir, err)
		}
		return
	}
	if err != nil || len(es) != 1 {
		t.Fatalf("after send_status_unknown the snapshot folder %s: %v, %d entries; want the snapshot kept", dir, err, len(es))
	}
	fi, _ := es[0].Info()
	if fi.Mode().Perm() != mode {
		t.Fatalf("the kept snapshot is mode %04o; want %04o (no write bit, read by the owner and the app's group only)", fi.Mode().Perm(), mode)
	}
	if left, _ := filepath.Glob(filepath.Join(staging, ".incoming-*")); len(left) != 0 {
		t.Fatalf("unplaced snapshots left behind: %v", left)
	}
}

// assertSettled: the bundle is sealed, classifies as the store recorded, and the
// store's status is that outcome.
func assertSettled(t *testing.T, c *sendonce.Client, res sendonce.DeliveryResult) {
	t.Helper()
	b, err := evidence.Verify(res.Evidence, evidence.VerifyOptions{})
	if err != nil || !b.Sealed() {
		t.Fatalf("evidence bundle %s: %v (sealed %v)", res.Evidence, err, b != nil && b.Sealed())
	}
	cl := evidence.ClassifyBundle(b)
	st, err := c.Status(context.Background(), sendonce.StatusRequest{Key: res.Key})
	if err != nil {
		t.Fatal(err)
	}
	if string(cl.Outcome) != res.Outcome || gate.Status(res.Outcome) != st.Status {
		t.Fatalf("result says %s, the bundle classifies as %s, the store says %s\nreasons: %v", res.Outcome, cl.Outcome, st.Status, cl.Reasons)
	}
	v, err := c.VerifyEvidence(context.Background(), sendonce.VerifyRequest{Path: res.Evidence})
	if err != nil || !v.Authenticated || strings.Join(v.Checked, ",") != "internal,store,signature" || v.Format != evidence.FormatV2 {
		t.Fatalf("verify against the store: %v, %+v; want authenticated by signature and store", err, v)
	}
	if string(b.Profile) == "" || b.Manifest.Profile.Source == "" {
		t.Fatalf("the bundle records no profile: %+v", b.Manifest.Profile)
	}
}

// TestForgedBundlesAreNotAuthenticated: a bundle consistent in itself is not enough.
// Without a store nothing vouches for it; re-sealed by another key, or unsigned, or
// rewritten from scratch with a correct chain, the store and the registered key tell.
func TestForgedBundlesAreNotAuthenticated(t *testing.T) {
	ctx := context.Background()
	r := newReplayed(t, "verified-text-file", sendonce.Options{})
	os.Mkdir(r.req.Staging, 0o750)
	os.Chmod(r.req.Staging, 0o750)
	res, err := r.deliverer().Deliver(ctx, r.req)
	if err != nil || res.Outcome != string(gate.SentVerified) {
		t.Fatalf("Deliver: %v, %+v", err, res)
	}
	if _, err := sendonce.VerifyEvidence(sendonce.VerifyRequest{Path: res.Evidence}); !errors.Is(err, sendonce.ErrUnauthenticated) {
		t.Fatalf("verify with no store: %v; want ErrUnauthenticated", err)
	}
	if v, err := sendonce.VerifyEvidence(sendonce.VerifyRequest{Path: res.Evidence, AllowUnauthenticated: true}); err != nil || v.Authenticated || !v.Verified {
		t.Fatalf("verify with no store, allowed: %v, %+v", err, v)
	}

	reseal := func(t *testing.T, key ed25519.PrivateKey) string {
		dir := filepath.Join(t.TempDir(), "forged")
		if err := os.CopyFS(dir, os.DirFS(res.Evidence)); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(dir, "seal.json"))
		rec, err := evidence.Reopen(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rec.Seal("sent_verified", nil, key); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	_, other, _ := ed25519.GenerateKey(nil)
	if _, err := r.client.VerifyEvidence(ctx, sendonce.VerifyRequest{Path: reseal(t, other)}); !errors.Is(err, sendonce.ErrEvidence) || !strings.Contains(err.Error(), "other than the one registered") {
		t.Fatalf("re-sealed by another key: %v; want ErrEvidence naming the key", err)
	}
	if _, err := r.client.VerifyEvidence(ctx, sendonce.VerifyRequest{Path: reseal(t, nil)}); !errors.Is(err, sendonce.ErrUnauthenticated) {
		t.Fatalf("re-sealed unsigned: %v; want ErrUnauthenticated", err)
	}

	// From scratch: the same manifest and records, chained anew by a recorder of its
	// own (another clock), sealed by another key.
	orig, err := evidence.Verify(res.Evidence, evidence.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "scratch")
	m := orig.Manifest
	m.Profile = &evidence.ProfileUse{Source: "built-in", Text: orig.Profile}
	rec, err := evidence.Create(dir, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range orig.Records {
		x.Before, x.After, x.OCR, x.OCRRef = "", "", nil, ""
		if _, err := rec.Append(x); err != nil {
			t.Fatal(err)
		}
	}
	rec.Seal("sent_verified", nil, other)
	if _, err := r.client.VerifyEvidence(ctx, sendonce.VerifyRequest{Path: dir}); !errors.Is(err, sendonce.ErrEvidence) || !strings.Contains(err.Error(), "never reached it") {
		t.Fatalf("written from scratch: %v; want ErrEvidence naming the chain head the store recorded", err)
	}
}

// TestDeliverCancelledAtEachMoment cancels the caller's context right after each named
// moment of a replayed delivery. Whatever the moment, the outcome is recorded (no error),
// the bundle is sealed and classifies as the store's status, and the display is free
// again.
func TestDeliverCancelledAtEachMoment(t *testing.T) {
	for _, moment := range []string{"claim", "picker_opened", "file_chosen", "send_pressed", "looking"} {
		t.Run(moment, func(t *testing.T) {
			r := newReplayed(t, "verified-text-file", sendonce.Options{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			d := r.deliverer()
			seen := false
			d.AfterDurable = func(m string) {
				if m == moment {
					seen = true
					cancel()
				}
			}
			res, err := d.Deliver(ctx, r.req)
			if !seen {
				t.Fatalf("the delivery never reached %s (outcome %s, err %v)", moment, res.Outcome, err)
			}
			if err != nil {
				t.Fatalf("cancelled after %s: Deliver returned %v; once claimed, an outcome is recorded and returned", moment, err)
			}
			if res.Outcome == string(gate.NotSent) && moment != "claim" && moment != "picker_opened" {
				t.Fatalf("cancelled after %s (a crossing): outcome not_sent", moment)
			}
			t.Logf("cancelled after %s: %s (%v)", moment, res.Outcome, res.Reasons)
			assertSettled(t, r.client, res)
			// The display lease was released: a second delivery on it starts at once
			// (it is refused by the gate, not kept waiting for the display).
			again := r.req
			again.DisplayWait = 0
			res2, err := d.Deliver(context.Background(), again)
			if res.Outcome == string(gate.NotSent) {
				return // the key is free again; the second delivery ran; nothing to check here
			}
			if !errors.Is(err, sendonce.ErrConsumed) || res2.Outcome != "refused" {
				t.Fatalf("a second delivery after %s: outcome %s, err %v; want refused by the gate", moment, res2.Outcome, err)
			}
		})
	}
}

// TestHookThatBlocksNeverDelays: a hook that never returns does not stop or stall a
// delivery: events beyond the buffer are dropped.
func TestHookThatBlocksNeverDelays(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	var mu sync.Mutex
	got := 0
	r := newReplayed(t, "verified-text-file", sendonce.Options{Hook: func(sendonce.Event) {
		mu.Lock()
		got++
		mu.Unlock()
		<-block
	}})
	done := make(chan struct{})
	var res sendonce.DeliveryResult
	var err error
	go func() {
		defer close(done)
		res, err = r.deliverer().Deliver(context.Background(), r.req)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		t.Fatal("the delivery did not return while its hook blocked")
	}
	if want := replayExpected(t, r.fx.App, r.fx.Expected); err != nil || res.Outcome != want {
		t.Fatalf("outcome %s, err %v; want %s", res.Outcome, err, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if got != 1 {
		t.Fatalf("the hook was entered %d times; it blocks, so once", got)
	}
}

// TestOutcomeRecordedLaterFromTheBundle: the store cannot be written when a delivery
// ends (another process holds it locked past the lock timeout), so the outcome its
// evidence proves is not recorded: the result says unknown and the bundle is sealed with
// what the evidence says. Once the lease has ended, reconcile authenticates the sealed
// bundle against the store and records its outcome, without asking the provider.
func TestOutcomeRecordedLaterFromTheBundle(t *testing.T) {
	r := newReplayed(t, "verified-text-file", sendonce.Options{LockTimeout: 300 * time.Millisecond})
	loc := r.client.Store()
	locker, err := sql.Open("sqlite", loc)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	var held *sql.Conn
	d := r.deliverer()
	d.AfterDurable = func(m string) {
		if m != "classified" {
			return
		}
		if held, err = locker.Conn(context.Background()); err == nil {
			_, err = held.ExecContext(context.Background(), "BEGIN EXCLUSIVE")
		}
		if err != nil {
			t.Errorf("locking the store: %v", err)
		}
	}
	res, derr := d.Deliver(context.Background(), r.req)
	if held == nil {
		t.Fatal("the delivery never reached the classified moment")
	}
	held.ExecContext(context.Background(), "ROLLBACK")
	held.Close()
	if derr == nil || res.Outcome != string(gate.SendStatusUnknown) {
		t.Fatalf("recording under a locked store: %s, %v; want send_status_unknown and an error", res.Outcome, derr)
	}
	b, err := evidence.Verify(res.Evidence, evidence.VerifyOptions{})
	if err != nil || !b.Sealed() || b.Seal.Outcome != string(gate.SentVerified) {
		t.Fatalf("the bundle: %v; want it sealed sent_verified", err)
	}

	// An hour later (the lease has ended) on the same workstation.
	later, err := sendonce.Open(context.Background(), loc, sendonce.Options{EvidenceRoot: r.client.EvidenceRoot(), Clock: func() time.Time { return time.Now().Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	defer later.Close()
	before, err := later.Status(context.Background(), sendonce.StatusRequest{Key: res.Key})
	if err != nil || before.Status != gate.StatusSendStatusUnknown {
		t.Fatalf("status before reconcile: %v, %v; want send_status_unknown", before.Status, err)
	}
	cfg := filepath.Join(t.TempDir(), "account.json")
	os.WriteFile(cfg, []byte(`{"jid": "alice@localhost", "password": "unused", "addr": "127.0.0.1:1"}`), 0o600)
	rec, err := later.Reconcile(context.Background(), sendonce.ReconcileRequest{ProviderConfig: cfg})
	if err != nil || len(rec.Reconciled) != 1 || rec.Reconciled[0].Result != "recorded_from_bundle" || rec.Reconciled[0].Outcome != string(gate.SentVerified) {
		t.Fatalf("reconcile: %+v, %v; want the bundle's sent_verified recorded", rec, err)
	}
	after, err := later.Show(context.Background(), sendonce.StatusRequest{Key: res.Key})
	if err != nil || after.Status != gate.StatusSentVerified {
		t.Fatalf("status after reconcile: %v, %v; want sent_verified", after.Status, err)
	}
	a := after.Intents[0].Attempts[0]
	if a.Workstation == "" || a.Workstation != b.Manifest.Workstation || a.FileName != r.fx.FileName || a.Size != b.Manifest.Size || a.Evidence != res.Evidence {
		t.Fatalf("the attempt as stored: %+v; want the workstation %s, file %s (%d bytes) and bundle %s", a, b.Manifest.Workstation, r.fx.FileName, b.Manifest.Size, res.Evidence)
	}
	again, err := later.Reconcile(context.Background(), sendonce.ReconcileRequest{ProviderConfig: cfg})
	if err != nil || len(again.Reconciled) != 0 {
		t.Fatalf("a second reconcile: %+v, %v; want nothing left to do", again, err)
	}
}

// TestBundleVerifiesAfterStoreCopy: a delivery's bundle names the token its SQLite store
// granted; after the history moved into PostgreSQL (new tokens there), the bundle is
// still authenticated by the shared store, and its key is still consumed there.
func TestBundleVerifiesAfterStoreCopy(t *testing.T) {
	r := newReplayed(t, "verified-text-file", sendonce.Options{})
	res, err := r.deliverer().Deliver(context.Background(), r.req)
	if err != nil || res.Outcome != string(gate.SentVerified) {
		t.Fatalf("delivery: %s, %v", res.Outcome, err)
	}
	from := r.client.Store()
	r.client.Close()
	pg := pgtest.Database(t)
	state := t.TempDir()
	if _, err := sendonce.Init(context.Background(), pg, sendonce.InitRequest{}, sendonce.Options{StateDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	// The shared store has granted a token of its own: the copied attempt's differs
	// from the one its bundle names.
	if other, err := sendonce.Open(context.Background(), pg, sendonce.Options{StateDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	} else if _, err := other.Claim(context.Background(), sendonce.ClaimRequest{Destination: sendonce.Destination{Title: "Carol"}, Content: sendonce.Content{SHA256: res.Key[len(res.Key)-64:]}, Task: "earlier"}); err != nil {
		t.Fatal(err)
	} else {
		other.Close()
	}
	copied, err := sendonce.CopyStore(context.Background(), sendonce.CopyRequest{From: []string{from}, To: pg, StateDir: state}, sendonce.Options{})
	if err != nil || len(copied.Copied) != 1 || copied.Workstation == "" {
		t.Fatalf("copy: %+v, %v; want one source copied and the workstation's identity kept", copied, err)
	}
	c, err := sendonce.Open(context.Background(), pg, sendonce.Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v, err := c.VerifyEvidence(context.Background(), sendonce.VerifyRequest{Path: res.Evidence})
	if err != nil || !v.Authenticated {
		t.Fatalf("the bundle against the shared store: %+v, %v; want it authenticated", v, err)
	}
	st, err := c.Show(context.Background(), sendonce.StatusRequest{Key: res.Key})
	if a := st.Intents[0].Attempts[0]; err != nil || st.Status != gate.StatusSentVerified || a.Token == res.Token || a.SourceToken != res.Token || a.CopiedFrom == "" {
		t.Fatalf("the key on the shared store: %+v, %v; want sent_verified under a new token, the old one kept", st, err)
	}
	if ws, err := c.Workstation(context.Background()); err != nil || ws.Workstation != copied.Workstation {
		t.Fatalf("the workstation on the shared store: %+v, %v; want the one the SQLite store had", ws, err)
	}
}

// TestMislabelledSendEndsUnknown: a profile whose send click is labelled safe, given to
// the library as a value (no validation sees it), drives a replayed delivery that did
// send. The evidence outranks the label: the outcome is send_status_unknown, never
// not_sent, and the key stays consumed.
func TestMislabelledSendEndsUnknown(t *testing.T) {
	r := newReplayed(t, "verified-text-file", sendonce.Options{})
	p, err := driver.LoadProfile(r.fx.App)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range p.Send {
		if s.Class == evidence.Submit {
			p.Send[i].Class, p.Send[i].Crosses = evidence.Safe, ""
		}
	}
	r.req.Profile = p
	res, err := r.deliverer().Deliver(context.Background(), r.req)
	if err != nil {
		t.Fatalf("deliver: %v", err)
	}
	if res.Outcome != string(gate.SendStatusUnknown) {
		t.Fatalf("a send click labelled safe: outcome %s (%v); want send_status_unknown", res.Outcome, res.Reasons)
	}
	again, err := r.deliverer().Deliver(context.Background(), r.req)
	if !errors.Is(err, sendonce.ErrConsumed) {
		t.Fatalf("a second delivery: %s, %v; want it refused as consumed", again.Outcome, err)
	}
}

// TestConditionalSteps: a conditional step runs only when its text shows, read once:
// on a replayed delivery, one whose text is absent is skipped (its key never sent: the
// replay would refuse an input it did not record) and one whose text shows runs; the
// bundle holds each condition as read, and the delivery is verified as before.
func TestConditionalSteps(t *testing.T) {
	r := newReplayed(t, "verified-text-file", sendonce.Options{})
	p, err := driver.LoadProfile(r.fx.App)
	if err != nil {
		t.Fatal(err)
	}
	absent := driver.Step{Name: "close a stray dialog", Do: "key", Keys: "Escape", Class: evidence.Safe, If: &driver.Condition{Text: "No Such Dialog Anywhere"}}
	shows := driver.Step{Name: "wait for the roster", Do: "wait_text", Text: "Bob", Class: evidence.Safe, If: &driver.Condition{Text: "Bob"}}
	p.OpenConversation = append([]driver.Step{absent, shows}, p.OpenConversation...)
	r.req.Profile = p
	res, err := r.deliverer().Deliver(context.Background(), r.req)
	if err != nil || res.Outcome != string(gate.SentVerified) {
		t.Fatalf("deliver: %s, %v (%v)", res.Outcome, err, res.Reasons)
	}
	b, err := evidence.Verify(res.Evidence, evidence.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conditions, steps := map[string]bool{}, map[string]bool{}
	for _, rec := range b.Records {
		if o := rec.Observed; o != nil && o.What == "condition" && o.Present != nil {
			conditions[o.Title] = *o.Present
		}
		if rec.Kind == evidence.KindStep {
			steps[rec.Intent] = true
		}
	}
	if p, ok := conditions["No Such Dialog Anywhere"]; !ok || p || steps[absent.Name] {
		t.Errorf("the absent condition: recorded %v (present %v), step run %v; want recorded absent and the step skipped", ok, p, steps[absent.Name])
	}
	if p, ok := conditions["Bob"]; !ok || !p || !steps[shows.Name] {
		t.Errorf("the condition that shows: recorded %v (present %v), step run %v; want recorded present and the step run", ok, p, steps[shows.Name])
	}
}

// TestPreviewProvenByDifference: an app that shows an image on its send page only as a
// preview (no name) proves "exactly one item, ours" by difference: the synthesized
// fixture preview-without-name is sent_verified through a profile with an item_mark,
// and its bundle records the send page counted empty before choose_file and holding one
// item after it. Through the same recording, a profile whose mark never shows stops
// before choose_file is crossed (not_sent), and one that can prove neither the name nor
// the difference refuses the file before the claim (ErrInvalid, the key untouched).
func TestPreviewProvenByDifference(t *testing.T) {
	r := newReplayed(t, "preview-without-name", sendonce.Options{})
	os.Mkdir(r.req.Staging, 0o750)
	res, err := r.deliverer().Deliver(context.Background(), r.req)
	if err != nil || res.Outcome != string(gate.SentVerified) {
		t.Fatalf("through gajim-previews: %v, %s; want sent_verified\nreasons: %v", err, res.Outcome, res.Reasons)
	}
	b, err := evidence.Verify(res.Evidence, evidence.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var marks []int
	for _, rec := range b.Records {
		if o := rec.Observed; o != nil && o.What == "send_page_marks" && o.Marks != nil {
			marks = append(marks, *o.Marks)
		}
	}
	if len(marks) != 2 || marks[0] != 0 || marks[1] != 1 {
		t.Fatalf("the send page's item counts recorded: %v; want [0 1] (none before choose_file, one after)", marks)
	}

	profile, err := os.ReadFile("testdata/profiles/gajim-previews.json")
	if err != nil {
		t.Fatal(err)
	}
	variant := func(t *testing.T, replace, with string) sendonce.Options {
		return profileVariant(t, string(profile), "gajim-previews", replace, with)
	}
	markAt := strings.Index(string(profile), `"item_mark": `)
	markLine := string(profile)[markAt : markAt+strings.Index(string(profile)[markAt:], "\n")]

	// A mark that never shows (a profile's mistake no check can see) reads no item after
	// choose_file either: the delivery stops before send, which is never crossed. The
	// chosen file cost the key (send_status_unknown), and nothing was sent.
	t.Run("a mark that never shows", func(t *testing.T) {
		r := newReplayed(t, "preview-without-name", variant(t, markLine, `"item_mark": "NO SUCH MARK",`))
		os.Mkdir(r.req.Staging, 0o750)
		res, _ := r.deliverer().Deliver(context.Background(), r.req)
		if res.Outcome != string(gate.SendStatusUnknown) {
			t.Fatalf("outcome %s; want send_status_unknown, stopped after choose_file\nreasons: %v", res.Outcome, res.Reasons)
		}
		st, err := r.client.Status(context.Background(), sendonce.StatusRequest{Key: res.Key})
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range st.Intents {
			for _, a := range in.Attempts {
				for _, c := range a.Crossings {
					if c.Boundary == gate.Send {
						t.Fatalf("send was crossed although the send page proved no item: %+v", a.Crossings)
					}
				}
			}
		}
	})
	t.Run("neither name nor mark", func(t *testing.T) {
		r := newReplayed(t, "preview-without-name", variant(t, markLine, ""))
		os.Mkdir(r.req.Staging, 0o750)
		res, err := r.deliverer().Deliver(context.Background(), r.req)
		if !errors.Is(err, sendonce.ErrInvalid) || !strings.Contains(err.Error(), "refused before the claim") {
			t.Fatalf("%v (outcome %q); want ErrInvalid, refused before the claim", err, res.Outcome)
		}
		if r.drv.Inputs() != 0 {
			t.Errorf("%d input events sent; want none", r.drv.Inputs())
		}
		if res.Key != "" {
			if st, err := r.client.Status(context.Background(), sendonce.StatusRequest{Key: res.Key}); err != nil || st.Status != gate.StatusFree {
				t.Errorf("the key after the refusal: %v, %v; want it free (nothing claimed)", st.Status, err)
			}
		}
	})
}

// runsAs is a replayed desktop whose app runs as another user, on this machine.
type runsAs struct {
	*replay.Driver
	creds driver.Credentials
}

func (d runsAs) Credentials(int) (driver.Credentials, error) { return d.creds, nil }

// TestAppThatCannotReadTheSnapshot: an app running as another user opens the snapshot
// with its own rights. Where it could not, the delivery is bad input before anything is
// claimed or touched (the key stays free); where the staging folder lets its group in,
// the delivery goes on.
func TestAppThatCannotReadTheSnapshot(t *testing.T) {
	other := driver.Credentials{UID: 4242, Groups: []int{4343, os.Getgid()}}
	for _, tc := range []struct {
		name    string
		mode    os.FileMode
		parent  os.FileMode
		refusal string // "" when it goes on
	}{
		{name: "private staging folder", mode: 0o700, parent: 0o755, refusal: "cannot enter"},
		{name: "a folder its group may enter, not read", mode: 0o710, parent: 0o755, refusal: "readable by you alone"},
		{name: "group-readable folder behind a private one", mode: 0o750, parent: 0o700, refusal: "cannot enter"},
		{name: "group-readable folder", mode: 0o750, parent: 0o755},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReplayed(t, "verified-text-file", sendonce.Options{})
			parent := filepath.Join(filepath.Dir(r.req.Staging), "home")
			r.req.Staging = filepath.Join(parent, "staging")
			if err := os.MkdirAll(r.req.Staging, 0o700); err != nil {
				t.Fatal(err)
			}
			// t.TempDir's folders are private: open them as a home's parents would be.
			for dir := filepath.Dir(parent); dir != filepath.Clean(os.TempDir()) && dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
				os.Chmod(dir, 0o755)
			}
			os.Chmod(r.req.Staging, tc.mode)
			os.Chmod(parent, tc.parent)
			d := r.deliverer()
			d.OpenDesktop = func(context.Context, string) (driver.Driver, func(), error) {
				return runsAs{r.drv, other}, func() {}, nil
			}
			res, err := d.Deliver(context.Background(), r.req)
			if tc.refusal == "" {
				if want := replayExpected(t, r.fx.App, r.fx.Expected); err != nil || res.Outcome != want {
					t.Fatalf("Deliver: %v, outcome %q; want %s", err, res.Outcome, want)
				}
				return
			}
			var fe *sendonce.FieldError
			if !errors.As(err, &fe) || fe.Field != "staging" || !errors.Is(err, gate.ErrInvalid) || !strings.Contains(err.Error(), tc.refusal) {
				t.Fatalf("Deliver: %v; want bad input on staging saying %q", err, tc.refusal)
			}
			if r.drv.Inputs() != 0 {
				t.Fatalf("%d input events sent; want none", r.drv.Inputs())
			}
			st, err := r.client.Status(context.Background(), sendonce.StatusRequest{Destination: r.req.Destination, Content: r.req.Content})
			if err != nil || st.Status != gate.StatusFree {
				t.Fatalf("status %+v, %v; want the key still free", st, err)
			}
		})
	}
}

// replayExpected is the outcome a fixture's replay must reach: what its live run
// recorded, except that a delivery the screen confirmed through an app whose mark of our
// side a peer can produce (confirm.mark peer_producible: Psi+'s fixtures were recorded
// before the profiles said so) is confirmed by nothing now, and so stays unknown.
func replayExpected(t *testing.T, app, recorded string) string {
	t.Helper()
	if app == "" {
		app = "gajim"
	}
	p, err := driver.Profiles{Dirs: []string{"testdata/profiles"}}.Load(app)
	if err != nil {
		t.Fatal(err)
	}
	if recorded == string(gate.SentVerified) && p.Confirm != nil && !p.Confirm.ScreenConfirms() {
		return string(gate.SendStatusUnknown)
	}
	return recorded
}

// TestLooseAccountFileRefusedBeforeTheClaim: a provider account file that others may
// read is refused as bad input before anything is claimed or touched (it was found only
// when the provider was asked, after the send, and the delivery fell back to the screen).
func TestLooseAccountFileRefusedBeforeTheClaim(t *testing.T) {
	r := newReplayed(t, "verified-text-file", sendonce.Options{})
	account := filepath.Join(t.TempDir(), "alice.json")
	if err := os.WriteFile(account, []byte(`{"jid":"alice@localhost","password":"pw","addr":"127.0.0.1:5222"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(account, 0o644)
	r.req.ProviderConfig = account
	_, err := r.deliverer().Deliver(context.Background(), r.req)
	var fe *sendonce.FieldError
	if !errors.As(err, &fe) || fe.Field != "provider-config" || !errors.Is(err, gate.ErrInvalid) || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("Deliver: %v; want bad input on provider-config naming chmod 600", err)
	}
	if r.drv.Inputs() != 0 {
		t.Fatalf("%d input events sent; a refused request touches nothing", r.drv.Inputs())
	}
	st, err := r.client.Status(context.Background(), sendonce.StatusRequest{Destination: r.req.Destination, Content: r.req.Content})
	if err != nil || st.Status != gate.StatusFree {
		t.Fatalf("status after the refusal: %+v, %v; want the key free", st, err)
	}
}

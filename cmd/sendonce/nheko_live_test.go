//go:build cgo

package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Live tests of the Matrix app, nheko (Qt), logged in as @alice:localhost on a display
// of its own against a real Dendrite (testbed/matrix up; SENDONCE_TESTBED_MATRIX names
// its state). The same CLI and store as for the XMPP apps; the destination is the
// provider id matrix:@bob:localhost; the server's copies are counted as Bob sees them:
// the m.file and m.image events of alice in their room, each content downloaded and
// hashed (code of this test, not the provider's). Nothing in the product knows it is
// nheko: its profile does.

// nhekoRun is one nheko test's world: the Matrix test bed, a fresh store, a folder for
// files and one for staging.
type nhekoRun struct {
	t              *testing.T
	mx             map[string]string
	store, dir     string
	staging, token string // token: Bob's, to read the room as he does
}

func newNhekoRun(t *testing.T) *nhekoRun {
	t.Helper()
	path := os.Getenv("SENDONCE_TESTBED_MATRIX")
	if path == "" {
		t.Fatal("no Matrix test bed: run `testbed/matrix up` and set SENDONCE_TESTBED_MATRIX to its state.env (scripts/test does)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mx := map[string]string{}
	for sc := bufio.NewScanner(bytes.NewReader(b)); sc.Scan(); {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			mx[k] = v
		}
	}
	for _, k := range []string{"MATRIX_HOMESERVER", "MATRIX_ROOM", "MATRIX_ALICE_PASSWORD", "MATRIX_BOB_PASSWORD", "NHEKO_DISPLAY"} {
		if mx[k] == "" {
			t.Fatalf("%s has no %s: the Matrix test bed runs without nheko (testbed/matrix up, not --server-only)", path, k)
		}
	}
	checkNhekoSettled(t, mx)
	r := &nhekoRun{t: t, mx: mx, store: newStore(t), dir: t.TempDir(), staging: t.TempDir()}
	r.token = r.login("bob", mx["MATRIX_BOB_PASSWORD"])
	return r
}

// checkNhekoSettled fails t unless nheko's encryption check has run exactly once, the
// one whose dialog testbed/matrix up waited for and cancelled: nheko opens its "Setup
// Encryption" (or "Activate Encryption") dialog over the whole window when it finds the
// account's keys missing, at a time of its own, and logs "STATUS CHANGED" in its qml log
// as it does (testbed/NOTES.md). A later one would cover the window for this test, and
// its deliveries would stop not_sent at their first wait, so it is named here.
func checkNhekoSettled(t *testing.T, mx map[string]string) {
	t.Helper()
	if mx["NHEKO_HOME"] == "" {
		t.Fatal("the Matrix test bed's state has no NHEKO_HOME")
	}
	logPath := filepath.Join(filepath.Dir(mx["NHEKO_HOME"]), "run", "nheko.out")
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatalf("nheko's log (where it says when it opens its encryption dialog): %v", err)
	}
	var changes []string
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.Index(line, "STATUS CHANGED: "); i >= 0 {
			status, _, _ := strings.Cut(line[i+len("STATUS CHANGED: "):], " ")
			changes = append(changes, status)
		}
	}
	if len(changes) != 1 {
		t.Fatalf("nheko changed its encryption status %d times (%v in %s); want once, the dialog testbed/matrix up cancelled: another dialog may cover its window", len(changes), changes, logPath)
	}
}

// login logs user in and returns the access token.
func (r *nhekoRun) login(user, password string) string {
	r.t.Helper()
	body, _ := json.Marshal(map[string]any{"type": "m.login.password", "password": password,
		"identifier": map[string]string{"type": "m.id.user", "user": user}})
	resp, err := http.Post(r.mx["MATRIX_HOMESERVER"]+"/_matrix/client/v3/login", "application/json", bytes.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.AccessToken == "" {
		r.t.Fatalf("logging in as %s: %d %v", user, resp.StatusCode, err)
	}
	return out.AccessToken
}

func (r *nhekoRun) get(path string) []byte {
	r.t.Helper()
	req, _ := http.NewRequest("GET", r.mx["MATRIX_HOMESERVER"]+path, nil)
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		r.t.Fatalf("GET %s: %d %v %.200s", path, resp.StatusCode, err, b)
	}
	return b
}

// copies is what the room holds as Bob reads it: the id of each message alice sent ->
// for a file or an image, the SHA-256 of the content it links; for any other message
// (text a step typed into the composer and sent), its msgtype and body, so that a
// stray text counts as something new.
func (r *nhekoRun) copies() map[string]string {
	r.t.Helper()
	out := map[string]string{}
	from := ""
	for page := 0; page < 50; page++ {
		q := url.Values{"dir": {"b"}, "limit": {"100"}}
		if from != "" {
			q.Set("from", from)
		}
		var msgs struct {
			Chunk []struct {
				EventID string `json:"event_id"`
				Type    string `json:"type"`
				Sender  string `json:"sender"`
				Content struct {
					MsgType string `json:"msgtype"`
					URL     string `json:"url"`
					Body    string `json:"body"`
				} `json:"content"`
			} `json:"chunk"`
			End string `json:"end"`
		}
		if err := json.Unmarshal(r.get("/_matrix/client/v3/rooms/"+url.PathEscape(r.mx["MATRIX_ROOM"])+"/messages?"+q.Encode()), &msgs); err != nil {
			r.t.Fatal(err)
		}
		for _, e := range msgs.Chunk {
			if e.Type != "m.room.message" || e.Sender != "@alice:localhost" {
				continue
			}
			if e.Content.MsgType != "m.file" && e.Content.MsgType != "m.image" {
				out[e.EventID] = e.Content.MsgType + ": " + e.Content.Body
				continue
			}
			mxc, ok := strings.CutPrefix(e.Content.URL, "mxc://")
			if !ok {
				r.t.Fatalf("event %s links %q, not an mxc:// URI", e.EventID, e.Content.URL)
			}
			sum := sha256.Sum256(r.get("/_matrix/media/v3/download/" + mxc))
			out[e.EventID] = hex.EncodeToString(sum[:])
		}
		if len(msgs.Chunk) == 0 || msgs.End == "" {
			return out
		}
		from = msgs.End
	}
	r.t.Fatal("the room's history did not end within 50 pages")
	return nil
}

// waitCopies waits (10 s at most) until the room holds a new event with sum, and
// returns what is new.
func (r *nhekoRun) waitCopies(before map[string]string, sum string) map[string]string {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		fresh := newUploads(before, r.copies())
		if countSHA(fresh, sum) > 0 || time.Now().After(deadline) {
			return fresh
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// providerConfig writes the account deliver and reconcile ask Dendrite with: alice's.
func (r *nhekoRun) providerConfig() string {
	r.t.Helper()
	path := filepath.Join(r.dir, "matrix.json")
	b, _ := json.Marshal(map[string]any{"homeserver": r.mx["MATRIX_HOMESERVER"], "user": "@alice:localhost",
		"password": r.mx["MATRIX_ALICE_PASSWORD"], "allow_http": true})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		r.t.Fatal(err)
	}
	return path
}

func (r *nhekoRun) deliverArgs(file, to string, extra ...string) []string {
	return append([]string{"deliver", "--app", "nheko", "--to", to, "--dest-id", "matrix:@bob:localhost", "--file", file,
		"--display", r.mx["NHEKO_DISPLAY"], "--staging", r.staging, "--store", r.store,
		"--provider-config", r.providerConfig(), "--json"}, extra...)
}

func (r *nhekoRun) deliver(file, to string) (map[string]any, int) {
	r.t.Helper()
	out, code := cli(r.t, liveEnv, r.deliverArgs(file, to)...)
	m := decode(r.t, out)
	r.t.Logf("deliver --app nheko --to %s %s: exit %d: outcome %v", to, filepath.Base(file), code, m["outcome"])
	return m, code
}

// file writes a text file no other run has, and returns its path and SHA-256.
func (r *nhekoRun) file(name string) (string, string) {
	r.t.Helper()
	content := fmt.Sprintf("sendonce nheko live test %s at %d\n", r.t.Name(), time.Now().UnixNano())
	return r.write(name, []byte(content))
}

func (r *nhekoRun) write(name string, content []byte) (string, string) {
	r.t.Helper()
	path := filepath.Join(r.dir, name)
	if err := os.WriteFile(path, content, 0o644); err != nil {
		r.t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	return path, hex.EncodeToString(sum[:])
}

// wantNothingNew fails the test unless the room, given two seconds for an upload in
// flight to land, holds no message of alice's (a file or a text) beyond before.
func (r *nhekoRun) wantNothingNew(before map[string]string, when string) {
	r.t.Helper()
	time.Sleep(2 * time.Second)
	if fresh := newUploads(before, r.copies()); len(fresh) != 0 {
		r.t.Fatalf("%s the room got %v; want nothing new", when, fresh)
	}
}

// wantOneNewCopy fails the test unless the room got exactly one new event, with sum.
func (r *nhekoRun) wantOneNewCopy(before map[string]string, sum string) {
	r.t.Helper()
	fresh := r.waitCopies(before, sum)
	if len(fresh) != 1 || countSHA(fresh, sum) != 1 {
		r.t.Fatalf("the room got %d new messages of alice's (%v); want exactly one, a file with SHA-256 %s", len(fresh), fresh, sum)
	}
}

// TestLiveNhekoDeliver: through nheko, a text file and an image to Bob are each
// sent_verified, with exactly one event in the room whose content has the file's
// SHA-256; the same delivery again is refused without touching the screen, and the
// room still holds one.
func TestLiveNhekoDeliver(t *testing.T) {
	r := newNhekoRun(t)
	img := image.NewRGBA(image.Rect(0, 0, 48, 32))
	seed := uint64(time.Now().UnixNano())
	for i := range img.Pix {
		seed = seed*6364136223846793005 + 1442695040888963407
		img.Pix[i] = byte(seed >> 56)
	}
	img.Set(0, 0, color.RGBA{1, 2, 3, 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	text, textSum := r.file("nheko-report.txt")
	photo, photoSum := r.write("nheko-photo.png", buf.Bytes())
	for _, f := range []struct{ path, sum string }{{text, textSum}, {photo, photoSum}} {
		before := r.copies()
		m, code := r.deliver(f.path, "Bob")
		if code != exitOK || m["outcome"] != "sent_verified" {
			t.Fatalf("deliver %s exited %d; want 0 sent_verified\n%s", filepath.Base(f.path), code, describe(m))
		}
		r.wantOneNewCopy(before, f.sum)
		if !strings.HasPrefix(fmt.Sprint(m["key"]), "v2:matrix:@bob") {
			t.Errorf("the key %v is not the provider id's", m["key"])
		}

		again := r.copies()
		m, code = r.deliver(f.path, "Bob")
		if code != exitConsumed || m["outcome"] != "refused" {
			t.Fatalf("the same delivery again exited %d; want 3 refused\n%s", code, describe(m))
		}
		r.wantNothingNew(again, "after the refused delivery")
	}
}

// TestLiveNhekoWrongTitle: a room title nheko does not have stops the delivery
// not_sent before any boundary, and nothing is posted.
func TestLiveNhekoWrongTitle(t *testing.T) {
	r := newNhekoRun(t)
	file, _ := r.file("nheko-nobody.txt")
	before := r.copies()
	m, code := r.deliver(file, "Bobby Tables")
	if code != exitNotSent || m["outcome"] != "not_sent" {
		t.Fatalf("deliver to a room nheko does not have exited %d; want %d not_sent\n%s", code, exitNotSent, describe(m))
	}
	r.wantNothingNew(before, "after not_sent")
}

// TestLiveNhekoLongName: a name longer than nheko's upload bar shows whole (the
// profile's name_shown_chars) could not be proven the one item there, so deliver
// refuses it before the claim: exit 2, the key free, nothing posted.
func TestLiveNhekoLongName(t *testing.T) {
	r := newNhekoRun(t)
	file, _ := r.file("a-name-longer-than-the-bar.txt")
	before := r.copies()
	out, code := cli(t, liveEnv, r.deliverArgs(file, "Bob")...)
	if code != exitUsage || !strings.Contains(out, "name_shown_chars") {
		t.Fatalf("deliver of a long name through nheko exited %d: %s; want 2, naming name_shown_chars", code, out)
	}
	st, _ := cli(t, nil, "status", "--store", r.store, "--file", file, "--dest-id", "matrix:@bob:localhost", "--json")
	if s := decode(t, st)["status"]; s != "free" {
		t.Fatalf("the refused long name left its key %v; want free", s)
	}
	r.wantNothingNew(before, "after the refused long name")
}

// TestLiveNhekoCrash kills a nheko delivery (SIGKILL, SENDONCE_TEST_KILL_AFTER) right
// after choose_file's crossing and right after send's, lets the lease run out, and
// checks: the room holds at most one event with the file, the rerun is refused, and
// reconcile, asking Dendrite as alice, leaves the status the room supports
// (sent_verified with one event; never sent_verified with none).
func TestLiveNhekoCrash(t *testing.T) {
	for _, cp := range []struct {
		name, file string // a name nheko's upload bar shows whole (16 characters at most: name_shown_chars)
		pressed    bool
	}{{"file_chosen", "crash-chosen.txt", false}, {"send_pressed", "crash-sent.txt", true}} {
		t.Run(cp.name, func(t *testing.T) {
			r := newNhekoRun(t)
			file, sum := r.file(cp.file)
			before := r.copies()
			killed := runSendonce(t, 4*time.Minute, append([]string{"SENDONCE_TEST_KILL_AFTER=" + cp.name}, liveEnv...),
				r.deliverArgs(file, "Bob", "--lease", crashLease)...)
			if killed.signal != syscall.SIGKILL {
				t.Fatalf("deliver with SENDONCE_TEST_KILL_AFTER=%s did not die by SIGKILL: %s", cp.name, killed)
			}
			if !cp.pressed {
				// Killed with the file in nheko's upload bar: a person cancels it (the
				// profile never clicks there outside the send, and its clean step stops
				// any later delivery while it shows).
				r.cancelUploadBar()
			}
			time.Sleep(3 * time.Second) // an upload in flight lands
			var key string
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				out, _ := cli(t, nil, "status", "--store", r.store, "--file", file, "--dest-id", "matrix:@bob:localhost", "--json")
				st := decode(t, out)
				key, _ = st["key"].(string)
				if st["status"] != "held" || time.Now().After(deadline) {
					if st["status"] != "send_status_unknown" {
						t.Fatalf("status after the killed attempt's lease: %v; want send_status_unknown (it crossed)", st["status"])
					}
					break
				}
			}
			m, code := r.deliver(file, "Bob")
			if code != exitConsumed || m["outcome"] != "refused" {
				t.Fatalf("the rerun exited %d; want 3 refused\n%s", code, describe(m))
			}
			// The homeserver failing under the lookup (down, a history page answering
			// 500, a media download that stalls): reconcile says it cannot tell, and the
			// key stays consumed and unknown. A stalled download counts only where
			// there is something to download: with no event of the file's name in the
			// room, "absent" is the honest answer, and the key stays unknown all the
			// same (it crossed choose_file).
			for fault, config := range r.faultyProviders() {
				res := runSendonce(t, 2*time.Minute, nil, "reconcile", "--store", r.store, "--key", key, "--provider-config", config, "--json")
				t.Logf("reconcile with %s: %s", fault, strings.TrimSpace(res.stdout))
				var rec struct {
					Reconciled []struct {
						Result string `json:"result"`
					} `json:"reconciled"`
				}
				if err := json.Unmarshal([]byte(res.stdout), &rec); err != nil || len(rec.Reconciled) != 1 {
					t.Fatalf("reconcile with %s: %s (%v); want one result", fault, res, err)
				}
				got := rec.Reconciled[0].Result
				if got != "cant_tell" && !(fault == "a media download that stalls" && !cp.pressed && got == "absent") {
					t.Errorf("reconcile with %s answered %q; want cant_tell", fault, got)
				}
				out, _ := cli(t, nil, "status", "--store", r.store, "--key", key, "--json")
				if st := decode(t, out)["status"]; res.code != exitOK || st != "send_status_unknown" {
					t.Fatalf("reconcile with %s: %s\nstatus %v; want it to run, and the key to stay send_status_unknown", fault, res, st)
				}
			}
			res := runSendonce(t, 2*time.Minute, nil, "reconcile", "--store", r.store, "--key", key, "--provider-config", r.providerConfig(), "--json")
			t.Logf("reconcile: exit %d: %s", res.code, strings.TrimSpace(res.stdout))
			if res.code != exitOK {
				t.Fatalf("reconcile of a Matrix attempt: %s", res)
			}
			fresh := newUploads(before, r.copies())
			copies := countSHA(fresh, sum)
			out, _ := cli(t, nil, "status", "--store", r.store, "--key", key, "--json")
			status := decode(t, out)["status"]
			t.Logf("after a kill at %s: %d event(s) with the file, status %v", cp.name, copies, status)
			switch {
			case copies > 1 || len(fresh) != copies:
				t.Fatalf("DUPLICATE or stray: the room got %v; at most one event with %s", fresh, sum)
			case copies == 1 && status != "sent_verified":
				t.Errorf("the room holds the bytes and reconcile ran, but status is %v; want sent_verified", status)
			case copies == 0 && status == "sent_verified":
				t.Errorf("status is sent_verified but the room holds no event with the file")
			case !cp.pressed && copies != 0:
				t.Errorf("killed before Upload file was pressed, and the room got the file")
			}
		})
	}
}

// faultyProviders are account files whose homeserver is Dendrite behind a proxy that
// fails one way each (as the provider's own live tests do): fault -> the account file.
func (r *nhekoRun) faultyProviders() map[string]string {
	r.t.Helper()
	target, err := url.Parse(r.mx["MATRIX_HOMESERVER"])
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[string]string{}
	for name, fault := range map[string]func(http.ResponseWriter, *http.Request) bool{
		"the homeserver down": func(w http.ResponseWriter, req *http.Request) bool { // every connection closed unanswered
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
				}
			}
			return true
		},
		"a history page answering 500": func(w http.ResponseWriter, req *http.Request) bool {
			if strings.HasSuffix(req.URL.Path, "/messages") {
				http.Error(w, `{"errcode":"M_UNKNOWN","error":"the database is locked"}`, 500)
				return true
			}
			return false
		},
		"a media download that stalls": func(w http.ResponseWriter, req *http.Request) bool {
			if strings.Contains(req.URL.Path, "/download/") {
				select {
				case <-req.Context().Done():
				case <-time.After(time.Minute):
				}
				return true
			}
			return false
		},
	} {
		proxy := httputil.NewSingleHostReverseProxy(target)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if !fault(w, req) {
				proxy.ServeHTTP(w, req)
			}
		}))
		r.t.Cleanup(srv.Close)
		path := filepath.Join(r.dir, strings.ReplaceAll(name, " ", "-")+".json")
		b, _ := json.Marshal(map[string]any{"homeserver": srv.URL, "user": "@alice:localhost",
			"password": r.mx["MATRIX_ALICE_PASSWORD"], "allow_http": true, "timeout": "8s"})
		if err := os.WriteFile(path, b, 0o600); err != nil {
			r.t.Fatal(err)
		}
		out[name] = path
	}
	return out
}

// cancelUploadBar clicks Cancel in nheko's upload bar, as a person would, and waits for
// the bar to go.
func (r *nhekoRun) cancelUploadBar() {
	r.t.Helper()
	env := append(os.Environ(), "DISPLAY="+r.mx["NHEKO_DISPLAY"])
	xdo := func(args ...string) string {
		cmd := exec.Command("xdotool", args...)
		cmd.Env = env
		out, _ := cmd.Output()
		return strings.TrimSpace(string(out))
	}
	win := strings.Fields(xdo("search", "--onlyvisible", "--name", "^nheko$"))
	if len(win) == 0 {
		r.t.Fatal("no nheko window")
	}
	// Cancel is at the bar's right end, 47 px from the window's right edge, 59 from its bottom.
	geo := xdo("getwindowgeometry", "--shell", win[0])
	var w, h int
	for _, l := range strings.Fields(geo) {
		fmt.Sscanf(l, "WIDTH=%d", &w)
		fmt.Sscanf(l, "HEIGHT=%d", &h)
	}
	xdo("mousemove", "--window", win[0], fmt.Sprint(w-47), fmt.Sprint(h-59), "click", "1")
	xdo("mousemove", "--window", win[0], fmt.Sprint(w/2), fmt.Sprint(h/2))
	time.Sleep(time.Second)
}

// TestLiveNhekoDoctor: doctor, given the Matrix destination, logs in as alice and reads
// the destination's room (ready); a wrong password, or a person alice has no room with,
// fails the provider check and names why.
func TestLiveNhekoDoctor(t *testing.T) {
	r := newNhekoRun(t)
	wrong := filepath.Join(r.dir, "wrong.json")
	b, _ := json.Marshal(map[string]any{"homeserver": r.mx["MATRIX_HOMESERVER"], "user": "@alice:localhost", "password": "not-the-password", "allow_http": true})
	if err := os.WriteFile(wrong, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dest, config string
		ok                 bool
		saw                string
	}{
		{"the direct room", "matrix:@bob:localhost", r.providerConfig(), true, "is room " + r.mx["MATRIX_ROOM"] + ", its history readable"},
		{"a wrong password", "matrix:@bob:localhost", wrong, false, "logging in as @alice:localhost failed"},
		{"nobody alice has a room with", "matrix:@carol:localhost", r.providerConfig(), false, "none of them matrix:@carol:localhost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := cli(t, liveEnv, "--json", "doctor", "--app", "nheko", "--display", r.mx["NHEKO_DISPLAY"], "--staging", r.staging,
				"--store", r.store, "--dest-id", tc.dest, "--provider-config", tc.config)
			res := decodeDoctor(t, out)
			var provider *doctorCheck
			for i, c := range res.Checks {
				if c.Name == "provider" {
					provider = &res.Checks[i]
				}
			}
			if provider == nil || provider.OK != tc.ok || !strings.Contains(provider.Saw, tc.saw) {
				t.Fatalf("doctor exited %d; its provider check %+v; want ok=%v saying %q\n%s", code, provider, tc.ok, tc.saw, out)
			}
			for _, secret := range []string{r.mx["MATRIX_ALICE_PASSWORD"], "not-the-password"} {
				if strings.Contains(out, secret) {
					t.Fatalf("doctor printed a password (%q): %s", secret, out)
				}
			}
		})
	}
}

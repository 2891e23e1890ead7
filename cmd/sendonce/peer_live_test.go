//go:build cgo

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"mellium.im/sasl"
	"mellium.im/xmlstream"
	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/oob"
	"mellium.im/xmpp/stanza"
	"mellium.im/xmpp/upload"

	"github.com/sendonce/sendonce/evidence"
)

// A live test of "only our own send confirms our send" (issue 43, item 1) on the XMPP
// test bed, through Psi+ (carol@psi.localhost, PSI_DISPLAY): a peer whose roster name has
// a space, "Dave Smith" (dave@localhost, DAVE_JID and DAVE_PASSWORD in the state that
// SENDONCE_TESTBED_STATE names), sends back a file of the same name and bytes right after
// our upload of it failed. Psi+ draws his line "[12:00:01] <Dave Smith> https://…/NAME"
// below carol's own header; a header pattern that took one token left his line no
// header of its own, so his link inherited carol's header above it, read as ours, and
// the failed send came out sent_verified.
//
// Our upload fails because the file is over psi.localhost's upload limit (10 MiB,
// prosody-modules' mod_http_upload): the delivery is given a copy of the psi-plus
// profile whose upload_limit_bytes is raised, so sendonce lets it through, and Psi+
// refuses it ("The file size is too large.", from the limit the service advertises)
// after the file is chosen: send was pressed, nothing is stored. Dave uploads the same
// bytes under the same name to localhost's http_file_share (16 MiB there), and sends
// carol the link (body and jabber:x:oob), as soon as the delivery's bundle records the
// send crossed and Psi+'s message is closed; the delivery waits at send_pressed
// (SENDONCE_TEST_BARRIER_AT) until his message has gone, so his item is on screen for
// every read after the send. (A build without that hook, as before the change, looks
// meanwhile: his item shows within its look all the same.)

// peerName is the roster name the test bed gives dave@localhost (testbed/up, groups.txt).
const peerName = "Dave Smith"

// TestLivePeerCannotConfirmOurFailedSend: carol sends Dave a first file (her header then
// stands above what comes next in his chat), then a file whose upload fails, which Dave
// sends back at once under the same name with the same bytes. Read by the screen alone
// (no provider account) the delivery ends send_status_unknown (exit 7); with the
// provider (carol's archive) it is still not sent_verified. Either way the store says
// what the delivery said, nothing of ours reached an upload service, Dave's copy did,
// and every read after the send shows his item as not ours.
func TestLivePeerCannotConfirmOurFailedSend(t *testing.T) {
	l := newLiveWith(t, psiApp)
	display := l.bed.get(t, "PSI_DISPLAY")
	t.Cleanup(func() { psiClosePeerChat(t, display) })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	peer := loginPeer(ctx, t, l.bed)

	hello, _ := l.file("peer-hello.txt")
	m, code := l.peerDeliver(ctx, hello, nil, "--provider-config", l.providerConfig())
	if code != exitOK || m["outcome"] != "sent_verified" {
		t.Fatalf("carol's first file to %s: exit %d; want 0 sent_verified (her header above what follows)\n%s", peerName, code, describe(m))
	}

	for _, c := range []struct {
		name     string
		provider bool
	}{{"screen", false}, {"provider", true}} {
		t.Run(c.name, func(t *testing.T) {
			l := &liveRun{t: t, bed: l.bed, app: l.app, store: l.store, dir: l.dir, start: l.start, files: l.files}
			t.Cleanup(l.keepWhatFailed)
			extra := []string{"--profile", editedProfile(l.t, "psi-plus", filepath.Join(l.dir, "psi-plus-16mib.json"), func(p map[string]any) {
				p["upload_limit_bytes"] = 16 << 20
				// A look long enough for a second read: one read of a loaded machine's
				// chat took 22 s, begun before Dave's line was drawn, and ended a 20 s look.
				p["sent_item_timeout"] = "60s"
			})}
			// The profile's own look for the sent item (20 s), not a short one: Dave's
			// line may be drawn after the first read (with 5 s, a loaded machine's look
			// ended after one read, and his item went unseen in 1 run of 4).
			if c.provider {
				extra = append(extra, "--provider-config", l.providerConfig())
			}
			// A name of plain words, no random letters and no extension: Psi+ underlines
			// Dave's link, and OCR of it read "uzmqdn" as "uzmadn", "vfznzn" as
			// "viznzn" and "nwzwxc.bin" as "nwzwxc. bin", each time hiding his item from
			// the look. The name is this test bed's own (each subtest runs once per
			// test bed); on a test bed reused by hand, Psi+ shows the earlier run's
			// items of the same name too, which are not ours either.
			name := "peer-echo-" + c.name
			content, sum := bigFile(t)
			path := filepath.Join(l.dir, name)
			if err := os.WriteFile(path, content, 0o644); err != nil {
				t.Fatal(err)
			}
			l.files[sum] = name
			psiBefore := uploads(t, l.bed.get(t, "PSI_UPLOAD_DIR"))
			shareBefore := uploads(t, l.bed.get(t, "UPLOAD_DIR"))

			// Dave uploads his copy while the delivery starts, and sends its link the
			// moment the delivery has crossed send. Psi+'s message that the file is too
			// large is closed first, as a person would: it stands in the middle of the
			// chat, over the line where his link shows once the chat is long.
			uploaded := make(chan peerUpload, 1)
			go func() { uploaded <- peer.upload(ctx, name, content) }()
			var link string
			m, code := l.peerDeliver(ctx, path, func() {
				psiDismissTooLarge(t, display)
				up := <-uploaded
				if up.err != nil {
					t.Fatal(up.err)
				}
				link = up.link
				peer.sendLink(ctx, t, l.bed.get(t, "PSI_JID"), link)
			}, extra...)
			t.Logf("Dave sent back %s", link)
			t.Logf("the delivery's reasons:\n%s", describe(map[string]any{"reasons": m["reasons"]}))

			// Nothing of ours was stored; Dave's copy of the very bytes was.
			if n := countSHA(newUploads(psiBefore, uploads(t, l.bed.get(t, "PSI_UPLOAD_DIR"))), sum); n != 0 {
				t.Fatalf("carol's upload service stored %d copies of the file; want none (the upload must fail for this test)", n)
			}
			if n := countSHA(newUploads(shareBefore, uploads(t, l.bed.get(t, "UPLOAD_DIR"))), sum); n != 1 {
				t.Fatalf("Dave's upload service holds %d new copies of the file; want his one", n)
			}

			key, _ := m["key"].(string)
			switch {
			case m["outcome"] == "sent_verified" || code == exitOK:
				t.Fatalf("a failed send, with only the peer's copy on screen, exited %d %v: a peer's file confirmed our send\n%s", code, m["outcome"], describe(m))
			case !c.provider && (code != exitUnknown || m["outcome"] != "send_status_unknown"):
				t.Fatalf("read by the screen alone, the delivery exited %d; want 7 send_status_unknown\n%s", code, describe(m))
			case c.provider && !(code == exitUnknown && m["outcome"] == "send_status_unknown" || code == exitNotSent && m["outcome"] == "not_sent"):
				t.Fatalf("with the provider, the delivery exited %d; want 7 send_status_unknown or 8 not_sent\n%s", code, describe(m))
			}
			if st := l.status(key); st["status"] != m["outcome"] {
				t.Fatalf("status --key %s: %v; the delivery said %v", key, st["status"], m["outcome"])
			}
			l.verifyBundle(m)
			// With the provider, its authoritative "absent" may end the look after one
			// read, before Dave's line is drawn (1 run in 4): the screen run above is
			// the one that must see his item; here, an item seen must not be ours.
			l.wantPeerItemNotOurs(m, name, !c.provider)
		})
	}
}

// peerDeliver runs one delivery to Dave as a real process: the built-in psi-plus
// profile unless extra names one. With during set, the process waits at send_pressed
// (the test barrier) while during runs, which the test starts once the bundle records
// the send crossed.
func (l *liveRun) peerDeliver(ctx context.Context, file string, during func(), extra ...string) (map[string]any, int) {
	l.t.Helper()
	args := []string{"deliver", "--to", peerName, "--dest-id", "xmpp:" + l.bed.get(l.t, "DAVE_JID"), "--file", file,
		"--display", l.display(), "--staging", l.bed.staging(l.t), "--store", l.store, "--json"}
	if !slices.Contains(extra, "--profile") {
		args = append(args, "--app", l.app.name)
	}
	m, code := heldDeliver(ctx, l.t, l.store, append(args, extra...), during)
	l.noteBundle(m)
	return m, code
}

// heldDeliver runs deliver with args as a real process and returns what it printed and
// its exit code. With during set, the process waits at send_pressed (the barrier test
// hook) while during runs, which starts once the bundle in the store's evidence folder
// records the send crossed: a peer's answer lands, deterministically, while the
// delivery looks for its sent item.
func heldDeliver(ctx context.Context, t *testing.T, store string, args []string, during func()) (map[string]any, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, self(t), args...)
	cmd.Env = append(append(os.Environ(), "SENDONCE_AS_CLI=1"), liveEnv...)
	barrier := t.TempDir()
	if during != nil {
		cmd.Env = append(cmd.Env, "SENDONCE_TEST_BARRIER_AT=send_pressed", "SENDONCE_TEST_BARRIER_DIR="+barrier, "SENDONCE_TEST_BARRIER_N=2")
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	evidenceDir := filepath.Join(filepath.Dir(store), "evidence")
	bundlesBefore := dirNames(evidenceDir)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	release := func() { _ = os.WriteFile(filepath.Join(barrier, "test"), nil, 0o600) }
	ended := false
	defer func() {
		if !ended { // the test failed on the way: let the delivery finish before its folders go
			release()
			<-done
		}
	}()
	file := args[slices.Index(args, "--file")+1]
	if during != nil {
		if err := waitSendCrossed(ctx, evidenceDir, bundlesBefore, done); err != nil {
			t.Fatalf("%v\nstdout: %s\nstderr: %s", err, out.String(), tail(errb.String(), 20))
		}
		during()
		release() // the delivery goes on to look for its sent item
	}
	err := <-done
	ended = true
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("deliver %s: %v\nstderr: %s", filepath.Base(file), err, tail(errb.String(), 20))
	}
	code := cmd.ProcessState.ExitCode()
	if out.Len() == 0 {
		t.Fatalf("deliver %s exited %d and printed nothing\nstderr: %s", filepath.Base(file), code, tail(errb.String(), 20))
	}
	m := decode(t, out.String())
	t.Logf("deliver --to %q %s: exit %d in %v: outcome %v", args[slices.Index(args, "--to")+1], filepath.Base(file), code, time.Since(start).Round(time.Millisecond), m["outcome"])
	return m, code
}

// dirNames is the set of names in dir (none when it does not exist yet).
func dirNames(dir string) map[string]bool {
	out := map[string]bool{}
	es, _ := os.ReadDir(dir)
	for _, e := range es {
		out[e.Name()] = true
	}
	return out
}

// waitSendCrossed waits until a bundle new in evidenceDir records the send boundary
// crossed (the act that sends comes right after it). It fails when the delivery ends
// first or ctx does.
func waitSendCrossed(ctx context.Context, evidenceDir string, before map[string]bool, done chan error) error {
	for {
		for name := range dirNames(evidenceDir) {
			if before[name] {
				continue
			}
			b, _ := os.ReadFile(filepath.Join(evidenceDir, name, "steps.jsonl"))
			for _, line := range strings.Split(string(b), "\n") {
				var r struct {
					Kind string            `json:"kind"`
					Gate *evidence.GateUse `json:"gate"`
				}
				if json.Unmarshal([]byte(line), &r) == nil && r.Kind == "gate" && r.Gate != nil &&
					r.Gate.Action == "cross" && r.Gate.Boundary == "send" && r.Gate.Decision == "crossed" {
					return nil
				}
			}
		}
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("the delivery ended (%v) before its bundle in %s recorded the send crossed", err, evidenceDir)
		case <-ctx.Done():
			return fmt.Errorf("waiting for the delivery to cross send: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// bigFile is content of its own, over psi.localhost's 10 MiB upload limit (Psi+ refuses
// a file of 10485760 bytes or more) and within localhost's 16 MiB, and its SHA-256.
func bigFile(t *testing.T) ([]byte, string) {
	t.Helper()
	content := make([]byte, 10<<20+4096)
	if _, err := rand.Read(content); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	return content, hex.EncodeToString(sum[:])
}

// wantPeerItemNotOurs fails the test unless the bundle's reads of the chat after the
// send show an item named like the file (Dave's: nothing of ours was stored) and none
// of them as ours; with mustShow false, it only logs that none showed.
func (l *liveRun) wantPeerItemNotOurs(m map[string]any, fileName string, mustShow bool) {
	l.t.Helper()
	b, err := evidence.Verify(m["evidence"].(string), evidence.VerifyOptions{})
	if err != nil {
		l.t.Fatal(err)
	}
	reads, named := 0, 0
	for _, r := range b.Records {
		o := r.Observed
		if o == nil || o.What != "sent_items" || o.Phase != "after_send" {
			continue
		}
		reads++
		for _, it := range o.Items {
			if !evidence.NameMatches(it.Name, fileName) {
				continue
			}
			named++
			if it.Ours {
				l.t.Fatalf("record %d reads %s's item %+v as ours: nothing of ours was stored, so it is the peer's", r.Seq, peerName, it)
			}
		}
	}
	if named == 0 && !mustShow {
		l.t.Logf("none of the %d reads after the send shows an item named %s (the look ended before it was drawn)", reads, fileName)
		return
	}
	if named == 0 {
		l.t.Fatalf("none of the %d reads after the send shows an item named %s: the peer's file never showed, so this test proved nothing", reads, fileName)
	}
	l.t.Logf("%d reads after the send, %d items named %s among them, none ours", reads, named, fileName)
}

// peerSession is Dave logged in with a Go XMPP client.
type peerSession struct {
	s    *xmpp.Session
	acct jid.JID
	tls  *tls.Config
}

// loginPeer logs in as dave@localhost (STARTTLS on the test bed's c2s port, the test
// bed's CA) and serves the stream until the test ends. He sends no presence.
func loginPeer(ctx context.Context, t *testing.T, bed *testBed) *peerSession {
	t.Helper()
	acct, err := jid.Parse(bed.get(t, "DAVE_JID"))
	if err != nil {
		t.Fatal(err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		t.Fatal(err)
	}
	if ca := bed.vars["CA_CERT_INSTALLED"]; ca != "" {
		if pem, err := os.ReadFile(ca); err == nil {
			roots.AppendCertsFromPEM(pem)
		}
	}
	tlsCfg := &tls.Config{ServerName: acct.Domainpart(), RootCAs: roots, MinVersion: tls.VersionTLS12}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", "127.0.0.1:"+bed.get(t, "C2S_PORT"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := xmpp.NewClientSession(ctx, acct, conn,
		xmpp.StartTLS(tlsCfg),
		xmpp.SASL("", bed.get(t, "DAVE_PASSWORD"), sasl.ScramSha256, sasl.ScramSha1),
		xmpp.BindResource(),
	)
	if err != nil {
		conn.Close()
		t.Fatalf("logging in as %s: %v", acct, err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(nil) }()
	t.Cleanup(func() {
		s.Close()
		conn.Close()
		<-served
	})
	return &peerSession{s: s, acct: acct, tls: tlsCfg}
}

// peerUpload is what Dave's upload gave: the file's link, or why there is none.
type peerUpload struct {
	link string
	err  error
}

// upload uploads content as name through Dave's HTTP upload service (XEP-0363,
// upload.localhost), as a client sends a file, and returns its link.
func (p *peerSession) upload(ctx context.Context, name string, content []byte) peerUpload {
	svc := jid.MustParse("upload." + p.acct.Domainpart())
	slot, err := upload.GetSlot(ctx, upload.File{Name: name, Size: len(content), Type: "application/octet-stream"}, svc, p.s)
	if err != nil {
		return peerUpload{err: fmt.Errorf("Dave asked %s for a slot for %s (%d bytes): %w", svc, name, len(content), err)}
	}
	req, err := slot.Put(ctx, bytes.NewReader(content))
	if err != nil {
		return peerUpload{err: err}
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.tls.RootCAs, MinVersion: tls.VersionTLS12}}}
	resp, err := client.Do(req)
	if err != nil {
		return peerUpload{err: fmt.Errorf("Dave's upload of %s: %w", name, err)}
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return peerUpload{err: fmt.Errorf("Dave's upload of %s: HTTP %s", name, resp.Status)}
	}
	return peerUpload{link: slot.GetURL.String()}
}

// sendLink sends to a chat message whose body is link, with link as out-of-band
// data too (jabber:x:oob), as a client sends a file it uploaded.
func (p *peerSession) sendLink(ctx context.Context, t *testing.T, to, link string) {
	t.Helper()
	body := xmlstream.Wrap(xmlstream.Token(xml.CharData(link)), xml.StartElement{Name: xml.Name{Local: "body"}})
	msg := stanza.Message{To: jid.MustParse(to), Type: stanza.ChatMessage}.Wrap(xmlstream.MultiReader(body, oob.Data{URL: link}.TokenReader()))
	if err := p.s.Send(ctx, msg); err != nil {
		t.Fatalf("Dave's message to %s: %v", to, err)
	}
}

// xdo runs xdotool on display and returns its output.
func xdo(display string, args ...string) string {
	cmd := exec.Command("xdotool", args...)
	cmd.Env = append(os.Environ(), "DISPLAY="+display)
	out, _ := cmd.Output()
	return strings.TrimSpace(string(out))
}

// psiDismissTooLarge waits (10 s at most) for Psi+'s "The file size is too large."
// message, which it shows when it refuses an upload over the service's limit, and
// closes it; it fails the test when it never shows: the upload did not fail as this
// test needs.
func psiDismissTooLarge(t *testing.T, display string) {
	t.Helper()
	const title = "^The file size is too large\\.$"
	deadline := time.Now().Add(10 * time.Second)
	for {
		if w := strings.Fields(xdo(display, "search", "--onlyvisible", "--name", title)); len(w) > 0 {
			xdo(display, "windowactivate", "--sync", w[0], "key", "--clearmodifiers", "Escape")
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Psi+ never said the file is too large: its upload did not fail as this test needs")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for xdo(display, "search", "--onlyvisible", "--name", title) != "" {
		if time.Now().After(deadline) {
			t.Fatal("Psi+'s \"The file size is too large.\" message did not close")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// psiClosePeerChat closes what this test leaves in Psi+: a "too large" message still
// open, and Dave's chat (Escape on its tabs window closes the tab), so that the other
// Psi+ tests find Psi+ as they expect.
func psiClosePeerChat(t *testing.T, display string) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if w := strings.Fields(xdo(display, "search", "--onlyvisible", "--name", "^The file size is too large\\.$")); len(w) > 0 {
			xdo(display, "windowactivate", "--sync", w[0], "key", "--clearmodifiers", "Escape")
			continue
		}
		chat := psiTabsWindow(display, peerName)
		if chat == "" {
			return
		}
		xdo(display, "windowactivate", "--sync", chat, "key", "--clearmodifiers", "Escape")
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("Psi+ still shows Dave's chat or a \"too large\" message after 10 s of Escape")
}

// psiTabsWindow is the id of Psi+'s chat tabs window titled title ("" when none): the
// top-level window, not the chat widget inside it that bears the same name.
func psiTabsWindow(display, title string) string {
	tabs := strings.Fields(xdo(display, "search", "--onlyvisible", "--classname", "^tabs$"))
	for _, w := range strings.Fields(xdo(display, "search", "--onlyvisible", "--name", "^"+regexp.QuoteMeta(title)+"$")) {
		if slices.Contains(tabs, w) {
			return w
		}
	}
	return ""
}

// plainWordsName is a file name of two common words (15 characters at most, no letter
// that reaches below the line, where an underline cuts it), chosen by the clock: one of
// 225, so that reruns on one test bed rarely share a name. Random letters were read
// wrong: a run of digits once with a slash in it ("5535/7"), "uzmqdn" as "uzmadn" under
// Psi+'s underline, and "echo-hkcxsf.bin" not at all in nheko's upload bar.
func plainWordsName() string {
	words := []string{"amber", "river", "stone", "cloud", "brave", "delta", "ocean", "north", "crane", "table", "water", "house", "smart", "lemon", "mount"}
	v := uint64(time.Now().UnixNano() / 1000)
	return words[v%15] + "-" + words[(v/15)%15] + ".bin"
}

//go:build unix

package xmpp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/xml"
	"github.com/sendonce/sendonce/gate"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/testbed"

	"mellium.im/xmlstream"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/oob"
	"mellium.im/xmpp/stanza"
	"mellium.im/xmpp/upload"

	"github.com/sendonce/sendonce/provider"
)

// Live tests against the test bed's real Prosody (testbed/up): alice uploads
// files with HTTP upload and sends their links to bob, exactly as Gajim does
// (body = the https link, the same URL in jabber:x:oob), and the provider must
// find them in alice's archive.
//
// The test bed is found through SENDONCE_TESTBED_STATE (a state.env written by
// testbed/up). Without it: under CI=true the tests fail (CI starts the test bed
// itself); otherwise TestLive starts one in a temporary folder and tears it down
// when it ends (t.Cleanup, and a watchdog process if the test binary dies
// first). They never skip.
//
// Other packages' live tests (cmd/sendonce) may use the same test bed at the
// same time (go test ./... runs packages in parallel) and count the files that
// appear in its upload folder. So these tests touch that folder only in a test
// bed of their own: there the bytes go through HTTP upload (XEP-0363) like
// Gajim's; in a shared one (SENDONCE_TESTBED_STATE) the test serves the bytes
// itself, over HTTPS on 127.0.0.1 with the test bed's own localhost certificate
// (trusted by the system store while the test bed runs), and sends the same
// message. Either way the provider sees what it sees for a Gajim send: an
// archived message with an https link in its body and oob element.
//
// The messages carry <private xmlns='urn:xmpp:carbons:2'/> and a no-copy hint,
// so that the test bed's Gajim (alice's other session) is not shown them and
// other live tests that read its screen are not disturbed. The archive keeps
// them all the same.

// testBed is a running test bed, as its state.env describes it.
type testBed struct {
	stateFile string
	vars      map[string]string
	private   bool // started by this test: nobody else uses it
}

func (b *testBed) get(t testing.TB, key string) string {
	t.Helper()
	v := b.vars[key]
	if v == "" {
		t.Fatalf("the test bed state %s has no %s", b.stateFile, key)
	}
	return v
}

func loadTestBed(path string) (*testBed, error) {
	st, err := testbed.Load(path, "C2S_PORT", "HTTPS_PORT", "ALICE_JID", "ALICE_PASSWORD", "BOB_JID", "PROSODY_DATA")
	if err != nil {
		return nil, err
	}
	return &testBed{stateFile: st.File, vars: st.Vars}, nil
}

// liveTestBed returns the test bed to use, starting one (torn down with t's
// cleanup) when none is given. It fails t when there is none; it never skips.
func liveTestBed(t *testing.T) *testBed {
	t.Helper()
	if path := os.Getenv("SENDONCE_TESTBED_STATE"); path != "" {
		b, err := loadTestBed(path)
		if err != nil {
			t.Fatalf("SENDONCE_TESTBED_STATE=%s: %v", path, err)
		}
		return b
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("the provider's live tests need the test bed's Prosody and CI=true does not start one here: " +
			"run `TESTBED_DIR=/tmp/tb testbed/up` from the repository root and set SENDONCE_TESTBED_STATE=/tmp/tb/state.env " +
			"(then `TESTBED_DIR=/tmp/tb testbed/down`)")
	}
	start := time.Now()
	b, teardown, err := startTestBed()
	if teardown != nil {
		t.Cleanup(func() {
			if err := teardown(); err != nil {
				t.Errorf("tearing the test bed down: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("no SENDONCE_TESTBED_STATE, and starting a test bed failed: %v", err)
	}
	t.Logf("started a test bed in %s (%v); it is torn down when the test ends", filepath.Dir(b.stateFile), time.Since(start).Round(time.Millisecond))
	b.private = true
	return b
}

// startTestBed starts a test bed in a new temporary folder; teardown stops it (and a
// watchdog does if this process dies first).
func startTestBed() (*testBed, func() error, error) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return nil, nil, err
	}
	st, teardown, err := testbed.Start(repo, "C2S_PORT", "HTTPS_PORT", "ALICE_JID", "ALICE_PASSWORD", "BOB_JID", "PROSODY_DATA")
	if err != nil {
		return nil, teardown, err
	}
	return &testBed{stateFile: st.File, vars: st.Vars}, teardown, nil
}

// aliceConfig is the provider's configuration for the test bed's alice.
func aliceConfig(t *testing.T, b *testBed) Config {
	t.Helper()
	return Config{
		JID:      b.get(t, "ALICE_JID"),
		Password: b.get(t, "ALICE_PASSWORD"),
		Addr:     net.JoinHostPort("127.0.0.1", b.get(t, "C2S_PORT")),
		StartTLS: true,
		// The test bed is one machine: its upload service is on loopback.
		AllowPrivateAddresses: true,
	}
}

// sent is one file alice sent to bob.
type sent struct {
	link   string
	sha256 string
	size   int64
}

// sender sends files as alice, the way Gajim does.
type sender struct {
	cfg Config
	// files, when set, serves the bytes instead of the test bed's upload
	// service (a shared test bed): path -> content.
	files  map[string][]byte
	mu     sync.Mutex
	server string // https://localhost:PORT of the file server
}

// newSender returns a sender for b; with a shared test bed it starts an HTTPS
// file server (closed with t's cleanup) with the test bed's localhost certificate.
func newSender(t *testing.T, b *testBed, cfg Config) *sender {
	t.Helper()
	s := &sender{cfg: cfg}
	if b.private {
		return s
	}
	tlsDir := filepath.Join(filepath.Dir(b.stateFile), "tls")
	cert, err := tls.LoadX509KeyPair(filepath.Join(tlsDir, "localhost.crt"), filepath.Join(tlsDir, "localhost.key"))
	if err != nil {
		t.Fatalf("the shared test bed's localhost certificate (testbed/up writes it to $TESTBED_DIR/tls/): %v", err)
	}
	s.files = map[string][]byte{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		content, ok := s.files[r.URL.EscapedPath()]
		s.mu.Unlock()
		if !ok || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		w.Write(content)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	s.server = "https://localhost:" + port
	return s
}

// send does what Gajim does to send a file: it puts the bytes where an https
// link reaches them (HTTP upload to upload.localhost: a slot, then a PUT; or the
// test's own file server) and, as alice, sends "to" a chat message whose body
// is the link, with the same URL in a jabber:x:oob element. It returns once the
// server has processed the message (a ping answered after it on the same stream).
func (snd *sender) send(t *testing.T, to, name string, content []byte) sent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := New(snd.cfg)
	account := jid.MustParse(snd.cfg.JID).Bare()
	s, err := p.connect(ctx, account)
	if err != nil {
		t.Fatalf("alice logging in to send %s: %v", name, err)
	}
	defer s.close()

	var link string
	if snd.files != nil {
		path := "/file_share/" + randomID() + "/" + url.PathEscape(name)
		snd.mu.Lock()
		snd.files[path] = content
		snd.mu.Unlock()
		link = snd.server + path
	} else {
		slot, err := upload.GetSlot(ctx, upload.File{Name: name, Size: len(content), Type: "text/plain"}, jid.MustParse("upload."+account.Domainpart()), s.s)
		if err != nil {
			t.Fatalf("requesting an upload slot for %s: %v", name, err)
		}
		req, err := slot.Put(ctx, bytes.NewReader(content))
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = int64(len(content))
		req.Header.Set("Content-Type", "text/plain")
		resp, err := p.http.client.Do(req)
		if err != nil {
			t.Fatalf("uploading %s: %v", name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
			t.Fatalf("uploading %s: HTTP %s", name, resp.Status)
		}
		link = slot.GetURL.String()
	}

	body := xmlstream.Wrap(xmlstream.Token(xml.CharData(link)), xml.StartElement{Name: xml.Name{Local: "body"}})
	private := xmlstream.Wrap(nil, xml.StartElement{Name: xml.Name{Space: "urn:xmpp:carbons:2", Local: "private"}})
	noCopy := xmlstream.Wrap(nil, xml.StartElement{Name: xml.Name{Space: "urn:xmpp:hints", Local: "no-copy"}})
	msg := stanza.Message{To: jid.MustParse(to), Type: stanza.ChatMessage, ID: randomID()}
	if err := s.s.Send(ctx, msg.Wrap(xmlstream.MultiReader(body, oob.Data{URL: link}.TokenReader(), private, noCopy))); err != nil {
		t.Fatalf("sending the link of %s: %v", name, err)
	}
	ping := struct {
		XMLName xml.Name `xml:"urn:xmpp:ping ping"`
	}{}
	if err := s.iq(ctx, stanza.GetIQ, ping, nil); err != nil {
		t.Fatalf("ping after sending %s: %v", name, err)
	}
	sum := sha256.Sum256(content)
	return sent{link: link, sha256: hex.EncodeToString(sum[:]), size: int64(len(content))}
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// timed runs a Lookup and says how long it took.
func timed(t *testing.T, p *Provider, d provider.Dispatch) (provider.Answer, time.Duration) {
	t.Helper()
	start := time.Now()
	a, err := p.Lookup(context.Background(), d)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Lookup(%s): error %v", d.FileName, err)
	}
	t.Logf("Lookup(%q) took %v: %s %s", d.FileName, took.Round(time.Millisecond), a.Result, a.Detail)
	return a, took
}

func TestLive(t *testing.T) {
	b := liveTestBed(t)
	cfg := aliceConfig(t, b)
	bob := idOf("xmpp:" + b.get(t, "BOB_JID"))
	run := hex.EncodeToString(randomBytes(t, 4)) // unique file names per test run
	p := New(cfg)
	snd := newSender(t, b, cfg)
	if b.private {
		t.Logf("bytes go through the test bed's HTTP upload (XEP-0363)")
	} else {
		t.Logf("a shared test bed: the bytes are served by this test at %s, its upload folder is left alone", snd.server)
	}

	var (
		mu      sync.Mutex
		timings []time.Duration
	)
	record := func(d time.Duration) { mu.Lock(); timings = append(timings, d); mu.Unlock() }

	t.Run("Found", func(t *testing.T) {
		name := "sendonce provider " + run + " found ü.txt" // a space and a non-ASCII letter: the link escapes them
		content := append([]byte("sendonce provider test "+run+"\n"), randomBytes(t, 200)...)
		from := time.Now()
		s := snd.send(t, b.get(t, "BOB_JID"), name, content)
		d := provider.Dispatch{
			DispatchID: "d-found-" + run, Destination: bob, FileName: name,
			Size: s.size, SHA256: s.sha256, From: from, Until: time.Now(),
		}
		a, took := timed(t, p, d)
		record(took)
		if a.Result != provider.Found || len(a.Objects) != 1 {
			t.Fatalf("want Found with 1 object, got %s with %d: %s", a.Result, len(a.Objects), a.Detail)
		}
		o := a.Objects[0]
		if o.SHA256 != s.sha256 || o.SHA256 != sha(content) {
			t.Errorf("SHA256 %s, want %s", o.SHA256, s.sha256)
		}
		if o.Recipient != "xmpp:bob@localhost" {
			t.Errorf("Recipient %q, want xmpp:bob@localhost", o.Recipient)
		}
		if o.Link != s.link || o.FileName != name {
			t.Errorf("Link %q FileName %q, want %q %q", o.Link, o.FileName, s.link, name)
		}
		if o.ID == "" || o.At.IsZero() || o.At.Before(from.Add(-2*time.Second)) || o.At.After(time.Now().Add(2*time.Second)) {
			t.Errorf("ID %q At %v: want an id and a time within the send", o.ID, o.At)
		}
		if !a.Authoritative {
			t.Errorf("not authoritative: %s", a.Detail)
		}
		// The id is the archive's own: it is the key of the message in alice's archive
		// on disk, and a second lookup gives the same one.
		archive, err := os.ReadFile(filepath.Join(b.get(t, "PROSODY_DATA"), "localhost", "archive", "alice.list"))
		if err != nil {
			t.Fatalf("reading alice's archive: %v", err)
		}
		if !bytes.Contains(archive, []byte(`"`+o.ID+`"`)) {
			t.Errorf("id %q is not in alice's archive on disk", o.ID)
		}
		a2, _ := timed(t, p, d)
		if a2.Result != provider.Found || len(a2.Objects) != 1 || a2.Objects[0].ID != o.ID {
			t.Errorf("a second lookup gave %s %+v, want the same object %s", a2.Result, a2.Objects, o.ID)
		}
		confirm, wb, wr := provider.Match(a, d, nil)
		if confirm == nil || confirm.ID != o.ID || wb != nil || wr != nil {
			t.Errorf("Match: confirm %v wrongBytes %v wrongRecipient %v, want a confirmation", confirm, wb, wr)
		}
		if c, _, _ := provider.Match(a, d, map[string]bool{o.ID: true}); c != nil {
			t.Errorf("Match confirmed an object already taken")
		}

		// The same file, searched in a window that does not hold the send: absent.
		old := d
		old.From, old.Until = from.Add(-48*time.Hour), from.Add(-47*time.Hour)
		a3, _ := timed(t, p, old)
		if a3.Result != provider.Absent || !a3.Authoritative || len(a3.Objects) != 0 {
			t.Errorf("outside the window: %s authoritative=%v objects=%d, want authoritative Absent: %s", a3.Result, a3.Authoritative, len(a3.Objects), a3.Detail)
		}
	})

	t.Run("AbsentAuthoritative", func(t *testing.T) {
		name := "sendonce-provider-" + run + "-never-sent.txt"
		d := provider.Dispatch{
			DispatchID: "d-absent-" + run, Destination: bob, FileName: name,
			Size: 10, SHA256: sha([]byte("never sent")), From: time.Now().Add(-10 * time.Minute), Until: time.Now(),
		}
		a, took := timed(t, p, d)
		record(took)
		if a.Result != provider.Absent || !a.Authoritative || len(a.Objects) != 0 {
			t.Fatalf("want authoritative Absent, got %s authoritative=%v objects=%d: %s", a.Result, a.Authoritative, len(a.Objects), a.Detail)
		}
		if !strings.Contains(a.Detail, "complete") {
			t.Errorf("Detail does not say the archive was complete: %s", a.Detail)
		}
	})

	t.Run("WrongBytes", func(t *testing.T) {
		name := "sendonce-provider-" + run + "-wrong-bytes.txt"
		other := []byte("these are not the bytes of the dispatch " + run + "\n")
		ours := []byte("the dispatch's own bytes " + run + "\n")
		from := time.Now()
		s := snd.send(t, b.get(t, "BOB_JID"), name, other)
		d := provider.Dispatch{
			DispatchID: "d-wrong-" + run, Destination: bob, FileName: name,
			Size: int64(len(ours)), SHA256: sha(ours), From: from, Until: time.Now(),
		}
		a, took := timed(t, p, d)
		record(took)
		if a.Result != provider.Found || len(a.Objects) != 1 {
			t.Fatalf("want Found with 1 object, got %s with %d: %s", a.Result, len(a.Objects), a.Detail)
		}
		// The other bytes are longer than ours: read up to one byte past our size,
		// they are other bytes, whatever the rest holds.
		if got := a.Objects[0].SHA256; got == "" || got == sha(ours) || s.sha256 != sha(other) {
			t.Errorf("SHA256 %s; want a digest of other bytes than ours (%s)", got, sha(ours))
		}
		confirm, wb, wr := provider.Match(a, d, nil)
		if confirm != nil || wb == nil || wb.ID != a.Objects[0].ID || wr != nil {
			t.Errorf("Match: confirm %v wrongBytes %v wrongRecipient %v, want wrongBytes %s", confirm, wb, wr, a.Objects[0].ID)
		}
	})

	t.Run("Paging", func(t *testing.T) {
		// The same name sent twice with another file between, then searched two
		// messages per page (so at least two pages): every page is read, both
		// objects are found, in order, and "taken" skips the first.
		name := "sendonce-provider-" + run + "-twice.txt"
		content := []byte("twice " + run + "\n")
		from := time.Now()
		s1 := snd.send(t, b.get(t, "BOB_JID"), name, content)
		snd.send(t, b.get(t, "BOB_JID"), "sendonce-provider-"+run+"-between.txt", []byte("between\n"))
		s2 := snd.send(t, b.get(t, "BOB_JID"), name, content)
		d := provider.Dispatch{
			DispatchID: "d-twice-" + run, Destination: bob, FileName: name,
			Size: int64(len(content)), SHA256: sha(content), From: from, Until: time.Now(),
		}
		old := pageSize
		pageSize = 2
		defer func() { pageSize = old }()
		a, _ := timed(t, p, d)
		if a.Result != provider.Found || len(a.Objects) != 2 || !a.Authoritative {
			t.Fatalf("want authoritative Found with 2 objects, got %s authoritative=%v with %d: %s", a.Result, a.Authoritative, len(a.Objects), a.Detail)
		}
		if a.Objects[0].Link != s1.link || a.Objects[1].Link != s2.link || a.Objects[0].ID == a.Objects[1].ID {
			t.Errorf("objects %+v, want %s then %s with distinct ids", a.Objects, s1.link, s2.link)
		}
		if strings.Contains(a.Detail, " in 1 pages") {
			t.Errorf("one page only with pageSize 2: %s", a.Detail)
		}
		c, _, _ := provider.Match(a, d, map[string]bool{a.Objects[0].ID: true})
		if c == nil || c.ID != a.Objects[1].ID {
			t.Errorf("Match with the first taken: %v, want %s", c, a.Objects[1].ID)
		}
	})

	// A peer's messages to alice around her file, each with a <delay/> of its own stamped
	// long ago and a link of the same name elsewhere: the archive is walked on the
	// server's times and ids, so neither hides alice's file, ends the search, nor is an
	// object; a name only the peer sent is authoritatively absent.
	t.Run("PeerBackDatedDelay", func(t *testing.T) {
		bobCfg := cfg
		bobCfg.JID, bobCfg.Password = b.get(t, "BOB_JID"), b.get(t, "BOB_PASSWORD")
		name := "sendonce provider " + run + " peer.txt"
		peerOnly := "sendonce provider " + run + " peer only.txt"
		from := time.Now()
		peerSend(t, bobCfg, cfg.JID, "https://localhost:1/file_share/x/"+url.PathEscape(name), "1999-01-01T00:00:00Z", "peer-"+run+"-1")
		peerSend(t, bobCfg, cfg.JID, "https://localhost:1/file_share/y/"+url.PathEscape(peerOnly), "2001-09-09T01:46:40Z", "peer-"+run+"-2")
		content := []byte("alice's file among a peer's back-dated ones " + run + "\n")
		sn := snd.send(t, b.get(t, "BOB_JID"), name, content)
		peerSend(t, bobCfg, cfg.JID, "https://localhost:1/file_share/z/"+url.PathEscape(name), "1970-01-01T00:00:01Z", "peer-"+run+"-3")
		d := provider.Dispatch{DispatchID: "d-peer-" + run, Destination: bob, FileName: name, Size: sn.size, SHA256: sn.sha256, From: from, Until: time.Now()}
		a, _ := timed(t, p, d)
		confirm, wrongBytes, wrongRecipient := provider.Match(a, d, nil)
		if a.Result != provider.Found || !a.Authoritative || len(a.Objects) != 1 || confirm == nil || wrongBytes != nil || wrongRecipient != nil {
			t.Fatalf("want alice's file alone, confirmed, authoritative: %+v", a)
		}
		d.FileName = peerOnly
		if a, _ := timed(t, p, d); a.Result != provider.Absent || len(a.Objects) != 0 || !a.Authoritative {
			t.Fatalf("a name only the peer sent: want absent, authoritative: %+v", a)
		}
	})

	// A configuration without allow_private_addresses on a test bed whose upload service
	// is on loopback: the lookup says why it cannot tell, names the setting, and its
	// answer says asking again cannot change it; doctor's Check fails naming the setting,
	// and passes with it.
	t.Run("PrivateAddressRefusedSaysWhy", func(t *testing.T) {
		strict := cfg
		strict.AllowPrivateAddresses = false
		name := "sendonce provider " + run + " private.txt"
		content := []byte("a file on a loopback upload service " + run + "\n")
		from := time.Now()
		sn := snd.send(t, b.get(t, "BOB_JID"), name, content)
		d := provider.Dispatch{DispatchID: "d-private-" + run, Destination: bob, FileName: name, Size: sn.size, SHA256: sn.sha256, From: from, Until: time.Now()}
		v := provider.Ask(context.Background(), New(strict), d, noBindings{})
		if v.Confirm != nil || v.Pick != nil || !strings.Contains(v.Answer.Detail, "allow_private_addresses") || !v.Answer.Final {
			t.Fatalf("want no pick, a detail naming allow_private_addresses, and a final answer: %+v", v)
		}
		if _, err := New(strict).Check(context.Background(), gate.Identity{}, time.Now()); err == nil || !strings.Contains(err.Error(), `"allow_private_addresses": true`) {
			t.Fatalf("Check without allow_private_addresses: %v; want an error naming it", err)
		}
		saw, err := New(cfg).Check(context.Background(), gate.Identity{}, time.Now())
		if err != nil || !strings.Contains(saw, "reached it") {
			t.Fatalf("Check with allow_private_addresses: %q, %v; want a download that reached the upload service", saw, err)
		}
	})

	t.Run("WrongPasswordCantTell", func(t *testing.T) {
		bad := cfg
		bad.Password = "wrong-" + hex.EncodeToString(randomBytes(t, 8))
		d := provider.Dispatch{
			DispatchID: "d-badpw-" + run, Destination: bob, FileName: "x.txt",
			Size: 1, SHA256: sha([]byte("x")), From: time.Now().Add(-time.Minute), Until: time.Now(),
		}
		a, err := New(bad).Lookup(context.Background(), d)
		if err != nil {
			t.Fatalf("Lookup returned an error for a refused login: %v", err)
		}
		if a.Result != provider.CantTell || a.Authoritative || len(a.Objects) != 0 {
			t.Errorf("want CantTell, got %s authoritative=%v objects=%d", a.Result, a.Authoritative, len(a.Objects))
		}
		if a.Detail == "" || strings.Contains(a.Detail, bad.Password) || strings.Contains(a.Detail, "wrong-") {
			t.Errorf("Detail empty or holds the password: %q", a.Detail)
		}
		t.Logf("Detail: %s", a.Detail)

		// A programming error (an invalid config) is an error, without the password either.
		broken := bad
		broken.JID = "not a jid@@"
		if _, err := New(broken).Lookup(context.Background(), d); err == nil || strings.Contains(err.Error(), bad.Password) {
			t.Errorf("invalid config: error %v, want one without the password", err)
		}
	})

	t.Run("UnreachableCantTell", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close() // nothing listens there now
		c := cfg
		c.Addr = addr
		d := provider.Dispatch{
			DispatchID: "d-unreach-" + run, Destination: bob, FileName: "x.txt",
			Size: 1, From: time.Now().Add(-time.Minute), Until: time.Now(),
		}
		a, took := timed(t, New(c), d)
		if a.Result != provider.CantTell || strings.Contains(a.Detail, c.Password) || !strings.Contains(a.Detail, addr) {
			t.Errorf("want CantTell naming %s without the password, got %s: %s", addr, a.Result, a.Detail)
		}
		if took > 10*time.Second {
			t.Errorf("a refused connection took %v", took)
		}
	})

	t.Run("Timeout", func(t *testing.T) {
		// A server that accepts and never speaks: the lookup's own timeout ends it.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				defer c.Close()
			}
		}()
		c := cfg
		c.Addr = l.Addr().String()
		c.Timeout = 1500 * time.Millisecond
		d := provider.Dispatch{
			DispatchID: "d-timeout-" + run, Destination: bob, FileName: "x.txt",
			Size: 1, From: time.Now().Add(-time.Minute), Until: time.Now(),
		}
		a, took := timed(t, New(c), d)
		if a.Result != provider.CantTell || !strings.Contains(a.Detail, "ran out of time") {
			t.Errorf("want CantTell saying it ran out of time, got %s: %s", a.Result, a.Detail)
		}
		if took > 5*time.Second {
			t.Errorf("took %v with a 1.5s timeout", took)
		}
	})

	mu.Lock()
	defer mu.Unlock()
	t.Logf("Lookup timings against the test bed: %v", timings)
}

// The link of an upload names the file: its last segment, URL-decoded.
func TestLinkNameFromUploadURL(t *testing.T) {
	u := &url.URL{Scheme: "https", Host: "localhost:5281", Path: "/file_share/abc/a b ü%.txt"}
	got, ok := fileName(u.String())
	if !ok || got != "a b ü%.txt" {
		t.Fatalf("fileName(%s) = %q %v", u, got, ok)
	}
}

// noBindings: no object is bound to any dispatch.
type noBindings struct{}

func (noBindings) ObjectBinding(context.Context, string) (string, error) { return "", nil }

// peerSend logs in as cfg's account (a peer) and sends to a chat message whose body is
// link, with the same URL in jabber:x:oob and a <delay/> stamped stamp (what a client
// that relays old messages, or lies, puts there); id is the stanza's id.
func peerSend(t *testing.T, cfg Config, to, link, stamp, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := New(cfg)
	s, err := p.connect(ctx, jid.MustParse(cfg.JID).Bare())
	if err != nil {
		t.Fatalf("%s logging in: %v", cfg.JID, err)
	}
	defer s.close()
	body := xmlstream.Wrap(xmlstream.Token(xml.CharData(link)), xml.StartElement{Name: xml.Name{Local: "body"}})
	delay := xmlstream.Wrap(nil, xml.StartElement{Name: xml.Name{Space: nsDelay, Local: "delay"}, Attr: []xml.Attr{{Name: xml.Name{Local: "stamp"}, Value: stamp}}})
	msg := stanza.Message{To: jid.MustParse(to), Type: stanza.ChatMessage, ID: id}
	if err := s.s.Send(ctx, msg.Wrap(xmlstream.MultiReader(body, oob.Data{URL: link}.TokenReader(), delay))); err != nil {
		t.Fatalf("%s sending %s: %v", cfg.JID, link, err)
	}
	ping := struct {
		XMLName xml.Name `xml:"urn:xmpp:ping ping"`
	}{}
	if err := s.iq(ctx, stanza.GetIQ, ping, nil); err != nil {
		t.Fatalf("ping after sending %s: %v", link, err)
	}
}

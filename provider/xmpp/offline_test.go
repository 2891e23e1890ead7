//go:build unix

package xmpp

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"github.com/sendonce/sendonce/gate"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"mellium.im/xmlstream"
	"mellium.im/xmpp/jid"

	"github.com/sendonce/sendonce/provider"
)

// Tests that need no server.

const secret = "s3cr3t-Pa55word"

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "xmpp.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadConfig(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	full := `{"jid": "alice@localhost", "password": "` + secret + `", "addr": "127.0.0.1:5222"}`

	t.Run("file", func(t *testing.T) {
		cfg, err := LoadConfig(writeConfig(t, full), env())
		if err != nil {
			t.Fatal(err)
		}
		want := Config{JID: "alice@localhost", Password: secret, Addr: "127.0.0.1:5222", StartTLS: true}
		if !reflect.DeepEqual(cfg, want) {
			t.Errorf("got %+v, want %+v", cfg, want)
		}
	})
	t.Run("environment overrides the file", func(t *testing.T) {
		cfg, err := LoadConfig(writeConfig(t, full), env(EnvJID, "carl@example.org", EnvPassword, "other", EnvAddr, "[::1]:5223"))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.JID != "carl@example.org" || cfg.Password != "other" || cfg.Addr != "[::1]:5223" || !cfg.StartTLS {
			t.Errorf("got %+v", cfg)
		}
	})
	t.Run("environment only", func(t *testing.T) {
		cfg, err := LoadConfig("", env(EnvJID, "alice@localhost", EnvPassword, secret))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Addr != "" || !cfg.StartTLS || cfg.Timeout != 0 {
			t.Errorf("got %+v", cfg)
		}
	})
	t.Run("optional fields", func(t *testing.T) {
		cfg, err := LoadConfig(writeConfig(t, `{"jid":"alice@localhost","password":"`+secret+`","starttls":false,"server_name":"xmpp.localhost","timeout":"90s"}`), env())
		if err != nil {
			t.Fatal(err)
		}
		if cfg.StartTLS || cfg.ServerName != "xmpp.localhost" || cfg.Timeout != 90*time.Second {
			t.Errorf("got %+v", cfg)
		}
	})

	bad := []struct {
		name, body string
		env        func(string) string
		want       string
	}{
		{"missing jid", `{"password":"` + secret + `"}`, env(), "account is missing"},
		{"missing password", `{"jid":"alice@localhost"}`, env(), "password for alice@localhost is missing"},
		{"empty file", ``, env(), "empty"},
		{"syntax error", `{"jid":"alice@localhost","password":"` + secret + `",}`, env(), "syntax error"},
		{"wrong type", `{"jid":"alice@localhost","password":12345}`, env(), `field "password" must be a string`},
		{"misspelt field", `{"jid":"alice@localhost","pasword":"` + secret + `"}`, env(), `unknown field "pasword"`},
		{"two objects", full + full, env(), "extra data"},
		{"no local part", `{"jid":"localhost","password":"` + secret + `"}`, env(), "no local part"},
		{"invalid jid", `{"jid":"a@b@c/","password":"` + secret + `"}`, env(), "not a valid JID"},
		{"address without port", `{"jid":"alice@localhost","password":"` + secret + `","addr":"127.0.0.1"}`, env(), "host:port"},
		{"address with a bad port", `{"jid":"alice@localhost","password":"` + secret + `","addr":"127.0.0.1:99999"}`, env(), "no valid port"},
		{"bad timeout", `{"jid":"alice@localhost","password":"` + secret + `","timeout":"soon"}`, env(), "timeout"},
		{"bad address from the environment", full, env(EnvAddr, "nowhere"), "host:port"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadConfig(writeConfig(t, tt.body), tt.env)
			if err == nil {
				t.Fatalf("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "12345") {
				t.Errorf("error holds the password: %q", err)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		_, err := LoadConfig(filepath.Join(t.TempDir(), "nope.json"), env())
		if err == nil || !errors.Is(err, os.ErrNotExist) {
			t.Errorf("error %v, want not-exist", err)
		}
	})
}

func TestFileName(t *testing.T) {
	for link, want := range map[string]string{
		"https://localhost:5281/file_share/abc/report.pdf":               "report.pdf",
		"https://localhost:5281/file_share/abc/a%20b%20%C3%BC.txt":       "a b ü.txt",
		"https://localhost:5281/file_share/abc/a%2Fb.txt":                "a/b.txt", // one segment, decoded
		"https://localhost:5281/file_share/abc/report.pdf?x=1#frag":      "report.pdf",
		"http://example.org/f.txt":                                       "f.txt",
		"https://localhost:5281/file_share/abc/":                         "",
		"ftp://localhost/f.txt":                                          "",
		"https:///f.txt":                                                 "",
		"not a url":                                                      "",
		"https://localhost:5281/file_share/abc/bad%zz.txt":               "",
		"https://localhost:5281/file_share/abc/%E2%80%AEtxt.exe":         "\u202etxt.exe",
		"https://localhost:5281/file_share/abc/hello-bob.txt":            "hello-bob.txt",
		"https://upload.example.org/slot/123/with%20several%20spaces.md": "with several spaces.md",
	} {
		got, ok := fileName(link)
		if got != want || ok != (want != "") {
			t.Errorf("fileName(%q) = %q, %v; want %q", link, got, ok, want)
		}
	}
}

func TestLinks(t *testing.T) {
	m := archived{
		Body: "here: https://h/a/x.txt and https://h/a/x.txt again, plus http://h/b/y.txt\nftp://h/z",
		OOB:  []string{" https://h/o/x.txt "},
	}
	got := strings.Join(m.links(), " ")
	want := "https://h/o/x.txt https://h/a/x.txt http://h/b/y.txt"
	if got != want {
		t.Errorf("links %q, want %q", got, want)
	}
}

func TestPrefsCover(t *testing.T) {
	bob := jid.MustParse("bob@localhost")
	tests := []struct {
		name string
		p    prefsXML
		err  error
		dest jid.JID
		want bool
	}{
		{"always", prefsXML{Default: "always"}, nil, bob, true},
		{"always, by name only", prefsXML{Default: "always"}, nil, jid.JID{}, true},
		{"always but never bob", prefsXML{Default: "always", Never: []string{"Bob@LocalHost"}}, nil, bob, false},
		{"always but never someone else", prefsXML{Default: "always", Never: []string{"carl@localhost"}}, nil, bob, true},
		{"always but never someone, by name only", prefsXML{Default: "always", Never: []string{"carl@localhost"}}, nil, jid.JID{}, false},
		{"roster", prefsXML{Default: "roster"}, nil, bob, false},
		{"roster, bob always", prefsXML{Default: "roster", Always: []string{"bob@localhost"}}, nil, bob, true},
		{"never", prefsXML{Default: "never"}, nil, bob, false},
		{"prefs unreadable", prefsXML{}, errors.New("feature-not-implemented"), bob, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := prefsCover(tt.p, tt.err, tt.dest)
			if got != tt.want || why == "" {
				t.Errorf("prefsCover = %v (%s), want %v", got, why, tt.want)
			}
		})
	}
}

// feed runs one stanza through the collector as the session's Serve would: the
// start element, then a reader of its inner tokens and end element.
func feed(t *testing.T, c *collector, raw string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(raw))
	tok, err := d.Token()
	if err != nil {
		t.Fatal(err)
	}
	start := tok.(xml.StartElement)
	rw := struct {
		xml.TokenReader
		xmlstream.Encoder
	}{xmlstream.InnerElement(d), nil}
	if err := c.HandleXMPP(rw, &start); err != nil {
		t.Fatal(err)
	}
}

func TestCollectorReadsArchiveResults(t *testing.T) {
	c := newCollector(jid.MustParse("alice@localhost"))
	c.track("q1")
	result := func(from, queryID, id string) string {
		fromAttr := ""
		if from != "" {
			fromAttr = ` from='` + from + `'`
		}
		return `<message xmlns='jabber:client' to='alice@localhost/x'` + fromAttr + `>
  <result xmlns='urn:xmpp:mam:2' queryid='` + queryID + `' id='` + id + `'>
    <forwarded xmlns='urn:xmpp:forward:0'>
      <delay xmlns='urn:xmpp:delay' stamp='2026-11-30T11:16:05.123Z'/>
      <message xmlns='jabber:client' from='alice@localhost/gajim.testbed' to='bob@localhost' type='chat' id='m1'>
        <body>https://localhost:5281/file_share/ID1/hello-bob.txt</body>
        <x xmlns='jabber:x:oob'><url>https://localhost:5281/file_share/ID1/hello-bob.txt</url></x>
        <x xmlns='jabber:x:other'><url>https://elsewhere/nope.txt</url></x>
        <origin-id xmlns='urn:xmpp:sid:0' id='o1'/>
      </message>
    </forwarded>
  </result>
</message>`
	}
	feed(t, c, result("", "q1", "A1"))
	feed(t, c, result("", "other-query", "A2"))                            // not ours
	feed(t, c, result("mallory@evil", "q1", "A3"))                         // not from the archive
	feed(t, c, `<message xmlns='jabber:client'><body>hi</body></message>`) // not a result
	feed(t, c, `<iq xmlns='jabber:client' type='get' id='x'><ping xmlns='urn:xmpp:ping'/></iq>`)
	q := c.take("q1")
	if q == nil || len(q.errs) != 0 || len(q.msgs) != 1 {
		t.Fatalf("collected %+v, want one message", q)
	}
	m := q.msgs[0]
	if m.ID != "A1" || !m.At.Equal(time.Date(2026, 11, 30, 11, 16, 5, 123e6, time.UTC)) ||
		m.From.String() != "alice@localhost/gajim.testbed" || m.To.String() != "bob@localhost" || m.Type != "chat" ||
		m.Body != "https://localhost:5281/file_share/ID1/hello-bob.txt" ||
		len(m.OOB) != 1 || m.OOB[0] != "https://localhost:5281/file_share/ID1/hello-bob.txt" {
		t.Errorf("parsed %+v", m)
	}
	if c.take("q1") != nil {
		t.Errorf("take did not forget the query")
	}

	// A result without an id cannot be an object: the query fails rather than miss it.
	c.track("q2")
	feed(t, c, strings.Replace(result("", "q2", ""), " id=''", "", 1))
	if q := c.take("q2"); q == nil || len(q.errs) != 1 || len(q.msgs) != 0 {
		t.Errorf("a result without id: %+v, want an error", q)
	}
}

// testFetcher is the real fetcher for cfg, trusting the test server's certificate.
func testFetcher(cfg Config, srv *httptest.Server) *fetcher {
	f := newFetcher(cfg)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	f.client.Transport.(*http.Transport).TLSClientConfig.RootCAs = pool
	return f
}

func TestFetch(t *testing.T) {
	content := []byte("the bytes\n")
	sum := sha256.Sum256(content)
	big := make([]byte, 3<<20)
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/ok/f.txt":
			w.Write(content)
		case "/big/f.txt":
			w.Header().Set("Content-Length", strconv.Itoa(len(big)))
			w.Write(big)
		case "/chunked/f.txt":
			w.(http.Flusher).Flush() // no Content-Length: the length is found while reading
			w.Write(append(append([]byte{}, content...), 'x'))
		case "/redirect/f.txt":
			http.Redirect(w, r, "http://"+r.Host+"/ok/f.txt", http.StatusFound)
		case "/elsewhere/f.txt":
			http.Redirect(w, r, "https://other.example/ok/f.txt", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	f := testFetcher(Config{JID: "alice@localhost", DownloadHosts: []string{"127.0.0.1"}, AllowPrivateAddresses: true}, srv)
	ctx := context.Background()

	if r := f.fetch(ctx, srv.URL+"/ok/f.txt", int64(len(content))); r.err != nil || r.sha256 != hex.EncodeToString(sum[:]) {
		t.Errorf("ok: %+v", r)
	}
	// Longer than the file sent: other bytes, not "cannot tell".
	for _, path := range []string{"/big/f.txt", "/chunked/f.txt"} {
		if r := f.fetch(ctx, srv.URL+path, int64(len(content))); r.err != nil || r.sha256 == "" || r.sha256 == hex.EncodeToString(sum[:]) {
			t.Errorf("%s: %+v, want the digest of other bytes", path, r)
		}
	}
	for path, want := range map[string]string{
		"/missing/f.txt":   "404",
		"/redirect/f.txt":  "non-https",
		"/elsewhere/f.txt": "another host",
	} {
		r := f.fetch(ctx, srv.URL+path, int64(len(content)))
		if r.err == nil || r.sha256 != "" || !strings.Contains(r.err.Error(), want) {
			t.Errorf("%s: %+v, want an error saying %q", path, r, want)
		}
	}
	before := hits.Load()
	if r := f.fetch(ctx, strings.Replace(srv.URL, "https:", "http:", 1)+"/ok/f.txt", 10); r.err == nil || !strings.Contains(r.err.Error(), "not https") {
		t.Errorf("http link: %+v", r)
	}
	if hits.Load() != before {
		t.Errorf("an http link was fetched")
	}
}

// TestFetchOnlyFromTheUploadService: links to another host than the account's domain
// (or download_hosts) are never fetched, and neither is a loopback or private address,
// even under an allowed name that resolves there, unless the configuration allows it.
func TestFetchOnlyFromTheUploadService(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("x"))
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	ctx := context.Background()
	for _, tc := range []struct {
		name, link string
		cfg        Config
		want       string
	}{
		{"a foreign host", "https://evil.example/f.txt", Config{JID: "alice@localhost"}, "not the account's upload service"},
		{"loopback by address", srv.URL + "/f.txt", Config{JID: "alice@localhost", DownloadHosts: []string{"127.0.0.1"}}, "loopback"},
		{"loopback by an allowed name", "https://localhost:" + port + "/f.txt", Config{JID: "alice@localhost"}, "loopback"},
		{"the account's domain elsewhere", "https://upload.localhost.example/f.txt", Config{JID: "alice@localhost"}, "not the account's upload service"},
	} {
		r := testFetcher(tc.cfg, srv).fetch(ctx, tc.link, 1)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("%s: %+v; want an error saying %q", tc.name, r, tc.want)
		}
	}
	if hits.Load() != 0 {
		t.Errorf("%d refused downloads reached the server", hits.Load())
	}
	for _, bad := range []string{"127.0.0.1:443", "10.1.2.3:443", "192.168.0.1:443", "169.254.1.1:443", "[::1]:443", "[fe80::1]:443", "[fd00::1]:443", "0.0.0.0:443", "[::ffff:127.0.0.1]:443",
		"100.100.1.1:443", "198.18.0.1:443", "240.0.0.1:443", "[64:ff9b::a00:1]:443", "[2002:a00:1::1]:443", "[2001:0:a00:1::1]:443"} {
		if err := checkPublicAddress(bad); err == nil {
			t.Errorf("%s passed as public", bad)
		}
	}
	for _, ok := range []string{"93.184.215.14:443", "[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:443"} {
		if err := checkPublicAddress(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

func TestCollect(t *testing.T) {
	content := []byte("report bytes")
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if strings.HasPrefix(r.URL.Path, "/gone/") {
			http.NotFound(w, r)
			return
		}
		w.Write(content)
	}))
	defer srv.Close()
	p := New(Config{JID: "alice@localhost", Password: secret})
	p.http = testFetcher(Config{JID: "alice@localhost", DownloadHosts: []string{"127.0.0.1"}, AllowPrivateAddresses: true}, srv)

	alice := jid.MustParse("alice@localhost")
	at := time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC)
	msg := func(id, from, to, typ, body string, oob ...string) archived {
		m := archived{ID: id, At: at, Type: typ, Body: body, OOB: oob}
		if from != "" {
			m.From = jid.MustParse(from)
		}
		if to != "" {
			m.To = jid.MustParse(to)
		}
		return m
	}
	link := srv.URL + "/file_share/X/r%C3%A9port.pdf" // "réport.pdf", é precomposed (NFC)
	msgs := []archived{
		msg("1", "alice@localhost/gajim", "Bob@LocalHost/phone", "chat", link, link), // ours, to bob
		msg("2", "", "carl@localhost", "chat", "see "+link),                          // ours (empty from), to carl, body only
		msg("3", "bob@localhost/x", "alice@localhost", "chat", link, link),           // incoming: not a dispatch
		msg("4", "alice@localhost/gajim", "bob@localhost", "error", link, link),      // an error bounce
		msg("5", "alice@localhost/gajim", "bob@localhost", "chat", srv.URL+"/file_share/Y/other.pdf"),
		msg("6", "alice@localhost/gajim", "bob@localhost", "chat", "", srv.URL+"/gone/Z/r%C3%A9port.pdf"),
		msg("7", "alice@localhost/gajim", "", "chat", link), // no recipient
	}
	d := provider.Dispatch{FileName: "re\u0301port.pdf", Size: int64(len(content))} // the same name, decomposed (NFD)
	objs, notes, refused := p.collect(context.Background(), msgs, alice, d)
	if refused {
		t.Errorf("refused with two downloads made: want false")
	}
	var ids []string
	for _, o := range objs {
		ids = append(ids, o.ID)
	}
	if strings.Join(ids, ",") != "1,2,6" {
		t.Fatalf("objects %v, want 1,2,6", ids)
	}
	sum := sha256.Sum256(content)
	if objs[0].Recipient != "xmpp:bob@localhost" || objs[1].Recipient != "xmpp:carl@localhost" {
		t.Errorf("recipients %q %q", objs[0].Recipient, objs[1].Recipient)
	}
	if objs[0].SHA256 != hex.EncodeToString(sum[:]) || objs[1].SHA256 != objs[0].SHA256 || objs[2].SHA256 != "" {
		t.Errorf("sums %q %q %q", objs[0].SHA256, objs[1].SHA256, objs[2].SHA256)
	}
	if objs[0].FileName != d.FileName || objs[0].Link != link || !objs[0].At.Equal(at) {
		t.Errorf("object %+v", objs[0])
	}
	if hits.Load() != 2 { // the shared link once, the gone one once
		t.Errorf("%d downloads, want 2", hits.Load())
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "6") || !strings.Contains(notes[0], "404") {
		t.Errorf("notes %q", notes)
	}

	// Without allow_private_addresses, the loopback server is refused at once, each
	// note names the setting, and the refusal is final: asking again cannot change it.
	p.http = testFetcher(Config{JID: "alice@localhost", DownloadHosts: []string{"127.0.0.1"}}, srv)
	before := hits.Load()
	objs, notes, refused = p.collect(context.Background(), msgs, alice, d)
	if len(objs) != 3 || !refused || hits.Load() != before {
		t.Errorf("%d objects, refused %v, %d downloads; want 3, refused, none", len(objs), refused, hits.Load()-before)
	}
	for _, n := range notes {
		if !strings.Contains(n, `"allow_private_addresses": true`) {
			t.Errorf("note %q does not name the setting", n)
		}
	}
	// One refused by the settings (a host outside the account) and others downloaded:
	// not final.
	msgs = append(msgs, msg("8", "alice@localhost/gajim", "bob@localhost", "chat", "", "https://elsewhere.example/x/r%C3%A9port.pdf"))
	p.http = testFetcher(Config{JID: "alice@localhost", DownloadHosts: []string{"127.0.0.1"}, AllowPrivateAddresses: true}, srv)
	objs, notes, refused = p.collect(context.Background(), msgs, alice, d)
	if len(objs) != 4 || refused || len(notes) != 2 || !strings.Contains(notes[1], `"download_hosts"`) {
		t.Errorf("%d objects, refused %v, notes %q; want 4, not refused, the outside host's note naming download_hosts", len(objs), refused, notes)
	}
}

func TestLookupRefusesBadInput(t *testing.T) {
	good := provider.Dispatch{
		DispatchID: "d", Destination: idOf("xmpp:bob@localhost"), FileName: "f.txt", Size: 1,
		SHA256: strings.Repeat("ab", 32), From: time.Now().Add(-time.Minute), Until: time.Now(),
	}
	cfg := Config{JID: "alice@localhost", Password: secret, Addr: "127.0.0.1:1", StartTLS: true}
	for name, mutate := range map[string]func(*provider.Dispatch, *Config){
		"no file name":          func(d *provider.Dispatch, _ *Config) { d.FileName = "" },
		"a path":                func(d *provider.Dispatch, _ *Config) { d.FileName = "a/b.txt" },
		"no window":             func(d *provider.Dispatch, _ *Config) { d.From = time.Time{} },
		"reversed window":       func(d *provider.Dispatch, _ *Config) { d.From, d.Until = d.Until, d.From },
		"negative size":         func(d *provider.Dispatch, _ *Config) { d.Size = -1 },
		"bad sha256":            func(d *provider.Dispatch, _ *Config) { d.SHA256 = "xyz" },
		"title destination":     func(d *provider.Dispatch, _ *Config) { d.Destination, _ = gate.Title("Bob") },
		"another provider's id": func(d *provider.Dispatch, _ *Config) { d.Destination = idOf("matrix:@bob:localhost") },
		"no password":           func(_ *provider.Dispatch, c *Config) { c.Password = "" },
		"bad jid":               func(_ *provider.Dispatch, c *Config) { c.JID = "@@" },
		"bad addr":              func(_ *provider.Dispatch, c *Config) { c.Addr = "localhost" },
		"negative timeout":      func(_ *provider.Dispatch, c *Config) { c.Timeout = -time.Second },
	} {
		t.Run(name, func(t *testing.T) {
			d, c := good, cfg
			mutate(&d, &c)
			a, err := New(c).Lookup(context.Background(), d)
			if err == nil {
				t.Fatalf("no error; answer %+v", a)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error holds the password: %v", err)
			}
		})
	}
	// A lookup by name only (no destination) is valid input: here it cannot
	// connect, which is CantTell and no error.
	d := good
	d.Destination = gate.Identity{}
	a, err := New(cfg).Lookup(context.Background(), d)
	if err != nil || a.Result != provider.CantTell || strings.Contains(a.Detail, secret) {
		t.Errorf("by name only, unreachable: %+v %v", a, err)
	}
}

// TestNoPlainByDefault: the login uses SCRAM only unless allow_plain is set.
func TestNoPlainByDefault(t *testing.T) {
	names := func(cfg Config) string {
		var out []string
		for _, m := range New(cfg).mechanisms() {
			out = append(out, m.Name)
		}
		return strings.Join(out, " ")
	}
	if got := names(Config{}); strings.Contains(got, "PLAIN") || !strings.Contains(got, "SCRAM-SHA-1") {
		t.Errorf("default mechanisms %q; want SCRAM only", got)
	}
	if got := names(Config{AllowPlain: true}); !strings.HasSuffix(got, "PLAIN") {
		t.Errorf("with allow_plain: %q; want PLAIN last", got)
	}
}

// TestCollectorPeersCannotSteerTheSearch: another sender's archived message is a result
// of its page and never an object, whatever it holds: a stamp from long ago or none that
// parses, no id, a delay of its own inside its message, an address mellium refuses. It
// neither fails the search nor is read as the account's. The account's own message with
// a stamp that does not parse still fails it (the search cannot say it saw it).
func TestCollectorPeersCannotSteerTheSearch(t *testing.T) {
	result := func(queryID, id, stamp, from, to string) string {
		return `<message xmlns='jabber:client' to='alice@localhost/x'>
  <result xmlns='urn:xmpp:mam:2' queryid='` + queryID + `' id='` + id + `'>
    <forwarded xmlns='urn:xmpp:forward:0'>
      <delay xmlns='urn:xmpp:delay' stamp='` + stamp + `'/>
      <message xmlns='jabber:client' from='` + from + `' to='` + to + `' type='chat'>
        <delay xmlns='urn:xmpp:delay' stamp='1999-01-01T00:00:00Z'/>
        <body>https://localhost:5281/file_share/ID9/hello-bob.txt</body>
      </message>
    </forwarded>
  </result>
</message>`
	}
	c := newCollector(jid.MustParse("alice@localhost/any"))
	c.track("q")
	feed(t, c, result("q", "P1", "1999-01-01T00:00:00Z", "bob@localhost/phone", "alice@localhost"))   // back-dated
	feed(t, c, result("q", "P2", "not a stamp", "bob@localhost/phone", "alice@localhost"))            // a stamp that does not parse
	feed(t, c, result("q", "", "2026-11-30T11:16:05Z", "bob@localhost/phone", "alice@localhost"))     // no id
	feed(t, c, result("q", "P4", "2026-11-30T11:16:05Z", "bob@localhost/phone", "a@b@c"))             // an address mellium refuses
	feed(t, c, result("q", "P5", "2026-11-30T11:16:05Z", "@@bad", "alice@localhost"))                 // a sender that is no JID
	feed(t, c, result("q", "A1", "2026-11-30T11:16:05Z", "alice@localhost/gajim", "bob@localhost"))   // ours
	feed(t, c, result("q", "A2", "2026-11-30T11:16:06Z", "ALICE@localhost/other", "carol@localhost")) // ours, another resource
	q := c.take("q")
	if q == nil || len(q.errs) != 0 || len(q.msgs) != 7 {
		t.Fatalf("collected %+v; want 7 results, no error", q)
	}
	var ours []string
	for _, m := range q.msgs {
		if !m.Foreign {
			ours = append(ours, m.ID)
		}
	}
	if strings.Join(ours, ",") != "A1,A2" {
		t.Errorf("read as the account's own: %v; want A1,A2", ours)
	}
	objects, _, _ := (&Provider{http: &fetcher{allowed: func(string) bool { return false }}}).collect(context.Background(), q.msgs, jid.MustParse("alice@localhost"),
		provider.Dispatch{FileName: "hello-bob.txt", Size: 1})
	if len(objects) != 2 || objects[0].ID != "A1" || objects[1].ID != "A2" {
		t.Errorf("objects %+v; want A1 and A2 only", objects)
	}

	c.track("q2")
	feed(t, c, result("q2", "A3", "not a stamp", "alice@localhost/gajim", "bob@localhost"))
	if q := c.take("q2"); q == nil || len(q.errs) != 1 {
		t.Errorf("our own message with a stamp that does not parse: %+v; want an error", q)
	}
}

// idOf is a provider id as a dispatch names it: the zero Identity for "".
func idOf(s string) gate.Identity {
	if s == "" {
		return gate.Identity{}
	}
	id, err := gate.ProviderID(s)
	if err != nil {
		panic(err)
	}
	return id
}

package console_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/service/console"
)

// people is a token table the test changes as it goes.
type people struct {
	mu sync.Mutex
	m  map[string][2]string // secret -> name, role ("agent" opens nothing here)
}

func (p *people) Person(hash string) (string, console.Role, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var e [2]string
	ok := false
	for secret, v := range p.m {
		if console.TokenHash(secret) == hash {
			e, ok = v, true
		}
	}
	if !ok || e[1] == "agent" {
		return "", "", nil
	}
	return e[0], console.Role(e[1]), nil
}

const hostile = `<img src=x onerror=alert(1)>.txt`

// bed is a store with one unknown attempt (a file named with markup, to a title with
// markup) and one verified one, and a console over it.
type bed struct {
	t      *testing.T
	client *sendonce.Client
	people *people
	srv    *httptest.Server
	key    string // the unknown attempt's key
	unk    string // its dispatch id
	annKey string // the private key file of the store's authorizer, ann
}

func newBed(t *testing.T) *bed {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	loc := filepath.Join(dir, "store.db")
	opt := sendonce.Options{StateDir: filepath.Join(dir, "state"), EvidenceRoot: filepath.Join(dir, "evidence")}
	kg, err := sendonce.GenerateAuthorizerKey(filepath.Join(dir, "ann.key"))
	if err != nil {
		t.Fatal(err)
	}
	ann, _ := sendonce.ParseAuthorizerKey("ann=" + kg.PublicKey)
	if _, err := sendonce.Init(ctx, loc, sendonce.InitRequest{FirstAuthorizer: &ann}, opt); err != nil {
		t.Fatal(err)
	}
	c, err := sendonce.Open(ctx, loc, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	b := &bed{annKey: kg.PrivateKeyFile, t: t, client: c, people: &people{m: map[string][2]string{"op-secret": {"olga", "operator"}, "au-secret": {"audrey", "auditor"}, "ag-secret": {"agent-a", "agent"}}}}
	b.key, b.unk = b.attempt("<b>Bob</b> שלום", hostile, "one", gate.SendStatusUnknown)
	b.attempt("xmpp:carol@example.org", "report.pdf", "two", gate.NotSent)
	ws, err := c.Workstation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	con, err := console.New(console.Config{Client: c, People: b.people, Workstation: ws.Workstation})
	if err != nil {
		t.Fatal(err)
	}
	b.srv = httptest.NewServer(con)
	t.Cleanup(func() { con.Close(); b.srv.Close() })
	return b
}

// attempt claims, crosses send (unless not_sent) and records outcome for a file of
// that name.
func (b *bed) attempt(to, name, body string, outcome gate.Outcome) (key, dispatch string) {
	t, ctx := b.t, context.Background()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	dest := sendonce.Destination{Title: to}
	if strings.HasPrefix(to, "xmpp:") {
		dest = sendonce.Destination{ProviderID: to}
	}
	res, err := b.client.Claim(ctx, sendonce.ClaimRequest{Destination: dest, Content: sendonce.Content{Path: path}, Task: "task-" + body})
	if err != nil {
		t.Fatal(err)
	}
	ref := sendonce.PermitRef{Key: res.Key, Task: res.Task, Token: res.Grant.Token}
	if outcome != gate.NotSent {
		if _, err := b.client.Cross(ctx, ref, gate.Send, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.client.Record(ctx, ref, sendonce.RecordRequest{Outcome: outcome}); err != nil {
		t.Fatal(err)
	}
	return res.Key, res.Grant.DispatchID
}

// browser is a person's browser: a cookie jar, no redirects followed by itself.
type browser struct {
	t    testing.TB
	b    *bed
	http *http.Client
}

func (b *bed) browser() *browser { return b.browserFor(b.t) }

func (b *bed) browserFor(t testing.TB) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, b: b, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (br *browser) do(method, path string, form url.Values) (*http.Response, string) {
	br.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, br.b.srv.URL+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := br.http.Do(req)
	if err != nil {
		br.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (br *browser) login(secret string) *http.Response { return br.loginTo(secret, "/") }

// postWith posts a form with the request headers given (a browser's Origin and
// Sec-Fetch-Site), and returns the answer's status.
func (br *browser) postWith(path string, form url.Values, headers map[string]string) int {
	br.t.Helper()
	req, _ := http.NewRequest("POST", br.b.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := br.http.Do(req)
	if err != nil {
		br.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (br *browser) loginTo(secret, next string) *http.Response {
	resp, _ := br.do("POST", "/login", url.Values{"token": {secret}, "next": {next}})
	return resp
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (br *browser) csrf(page string) string {
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		br.t.Fatalf("no CSRF token on the page:\n%s", page)
	}
	return m[1]
}

func TestLoginAndRoles(t *testing.T) {
	b := newBed(t)
	br := b.browser()
	if resp, _ := br.do("GET", "/", nil); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login") {
		t.Fatalf("without a session: %d %s; want a redirect to the login page", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := br.login("ag-secret"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an agent's token: %d; want 401 (it opens nothing here)", resp.StatusCode)
	}
	if resp, _ := br.do("GET", "/", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after an agent's login the console opened: %d", resp.StatusCode)
	}
	resp := br.login("op-secret")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("an operator's login: %d", resp.StatusCode)
	}
	ck := resp.Cookies()
	if len(ck) != 1 || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].Path != "/" {
		t.Fatalf("the session cookie: %+v; want HttpOnly, SameSite=Strict, Path=/", ck)
	}
	resp, page := br.do("GET", "/", nil)
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != 200 || !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Fatalf("the needs page: %d, CSP %q", resp.StatusCode, csp)
	}
	if !strings.Contains(page, "olga") || !strings.Contains(page, "Log out") {
		t.Fatalf("the page does not say who is logged in:\n%s", page)
	}
	// A revoked token ends its session at the next request.
	b.people.mu.Lock()
	delete(b.people.m, "op-secret")
	b.people.mu.Unlock()
	if resp, _ := br.do("GET", "/", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after the token was revoked: %d; want the login page", resp.StatusCode)
	}
}

func TestNeedsAPersonEscapesWhatOthersWrote(t *testing.T) {
	b := newBed(t)
	br := b.browser()
	br.login("au-secret")
	_, page := br.do("GET", "/", nil)
	if strings.Contains(page, "<img") || strings.Contains(page, "<b>Bob") {
		t.Fatalf("markup from a file name or a title reached the page unescaped:\n%s", page)
	}
	if !strings.Contains(page, "&lt;img src=x onerror=alert(1)&gt;.txt") || !strings.Contains(page, "&lt;b&gt;Bob&lt;/b&gt;") {
		t.Fatalf("the unknown attempt's file and destination are not on the page as text:\n%s", page)
	}
	if !strings.Contains(page, "weak: title") || !strings.Contains(page, "send_status_unknown") {
		t.Fatalf("the row does not show the title's weakness or the state:\n%s", page)
	}
	if strings.Contains(page, "report.pdf") {
		t.Fatal("a not_sent attempt is listed as needing a person")
	}
	_, page = br.do("GET", "/deliveries", nil)
	if !strings.Contains(page, "report.pdf") || !strings.Contains(page, "&lt;img") {
		t.Fatalf("the deliveries list lacks an attempt:\n%s", page)
	}
	_, page = br.do("GET", "/deliveries?state=not_sent", nil)
	if !strings.Contains(page, "report.pdf") || strings.Contains(page, "&lt;img") {
		t.Fatalf("the state filter:\n%s", page)
	}
	_, page = br.do("GET", "/deliveries?dest_id=xmpp:carol@example.org", nil)
	if !strings.Contains(page, "report.pdf") || strings.Contains(page, "&lt;img") {
		t.Fatalf("the destination filter:\n%s", page)
	}
	_, page = br.do("GET", "/deliveries?day=yesterday", nil)
	if !strings.Contains(page, "is not a day") {
		t.Fatalf("a wrong day is not named:\n%s", page)
	}
}

func TestAuditorCannotAct(t *testing.T) {
	b := newBed(t)
	br := b.browser()
	br.login("au-secret")
	_, page := br.do("GET", "/key?k="+url.QueryEscape(b.key), nil)
	if strings.Contains(page, "Record the delivery") || strings.Contains(page, "Ask the provider again") {
		t.Fatal("an auditor's key page offers actions")
	}
	resp, _ := br.do("POST", "/confirm", url.Values{"csrf": {br.csrf(page)}, "key": {b.key}, "dispatch": {b.unk}, "note": {"x"}, "sure": {"yes"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an auditor's confirm: %d; want 403", resp.StatusCode)
	}
	st, _ := b.client.Status(context.Background(), sendonce.StatusRequest{Key: b.key})
	if st.Status != gate.StatusSendStatusUnknown {
		t.Fatalf("after an auditor's refused action the key is %s", st.Status)
	}
}

func TestOperatorConfirmsADelivery(t *testing.T) {
	b := newBed(t)
	br := b.browser()
	br.login("op-secret")
	_, page := br.do("GET", "/key?k="+url.QueryEscape(b.key), nil)
	form := url.Values{"key": {b.key}, "dispatch": {b.unk}, "note": {"Bob said he has it"}, "sure": {"yes"}}
	if resp, _ := br.do("POST", "/confirm", form); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a confirm without the CSRF token: %d; want 403", resp.StatusCode)
	}
	form.Set("csrf", br.csrf(page))
	resp, _ := br.do("POST", "/confirm", form)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("confirm: %d", resp.StatusCode)
	}
	_, page = br.do("GET", resp.Header.Get("Location"), nil)
	if !strings.Contains(page, "Recorded: attempt") {
		t.Fatalf("the key page does not say what was recorded:\n%s", page)
	}
	st, _ := b.client.Show(context.Background(), sendonce.StatusRequest{Key: b.key})
	if st.Status != gate.StatusSentVerified {
		t.Fatalf("after the confirmation the key is %s", st.Status)
	}
	found := false
	for _, e := range st.Intents[0].Events {
		found = found || (e.Kind == "resolved" && e.Detail["provider"] == sendonce.ProviderPerson && strings.HasPrefix(e.Detail["by"], "olga") && e.Detail["note"] == "Bob said he has it")
	}
	if !found {
		t.Fatalf("no resolved event records who confirmed it and how: %+v", st.Intents[0].Events)
	}
	// A second confirmation of the same attempt is refused by the store's rules.
	_, page = br.do("GET", "/key?k="+url.QueryEscape(b.key), nil)
	if strings.Contains(page, "Record the delivery as confirmed") {
		t.Fatal("a settled attempt still offers a confirmation")
	}
	form.Set("csrf", br.csrf(page))
	resp, _ = br.do("POST", "/confirm", form)
	_, page = br.do("GET", resp.Header.Get("Location"), nil)
	if !strings.Contains(page, "Nothing was recorded") {
		t.Fatalf("a second confirmation was not refused:\n%s", page)
	}
}

func TestAFormFromAnotherSiteIsRefused(t *testing.T) {
	b := newBed(t)
	br := b.browser()
	br.login("op-secret")
	_, page := br.do("GET", "/key?k="+url.QueryEscape(b.key), nil)
	form := url.Values{"csrf": {br.csrf(page)}, "key": {b.key}}
	for _, h := range []map[string]string{{"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"}, {"Origin": "null"}} {
		if got := br.postWith("/reconcile", form, h); got != http.StatusForbidden {
			t.Errorf("a form posted with %v: %d; want 403", h, got)
		}
	}
	// A browser's own form: Sec-Fetch-Site says so, whatever Origin says.
	if got := br.postWith("/reconcile", form, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "null"}); got != http.StatusSeeOther {
		t.Fatalf("the console's own form: %d; want it taken (303)", got)
	}
	// After the login, a page of this console and nowhere else: a browser drops a tab
	// or a newline from a URL and reads a backslash as a slash.
	for next, want := range map[string]string{
		"/deliveries?state=held": "/deliveries?state=held", "/key?k=v2%3Atitle%3ABob": "/key?k=v2%3Atitle%3ABob",
		"//evil.example/": "/", "/\t/evil.example": "/", "/\n/evil.example": "/", "/\\evil.example": "/",
		"https://evil.example/": "/", "evil": "/", "/%09/x": "/%09/x",
	} {
		if loc := br.loginTo("op-secret", next).Header.Get("Location"); loc != want {
			t.Errorf("login with next=%q went to %q; want %q", next, loc, want)
		}
	}
}

func TestOperatorAcceptsASignedAuthorization(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	storeID, _ := b.client.StoreID(ctx)
	priv, err := sendonce.ReadPrivateKey(b.annKey)
	if err != nil {
		t.Fatal(err)
	}
	signed := filepath.Join(t.TempDir(), "auth.json")
	if _, err := sendonce.SignAuthorization(sendonce.SignRequest{StoreID: storeID, Key: b.key, Revision: 1, Name: "ann", PrivateKey: priv,
		ExpiresAt: time.Now().Add(time.Hour), Out: signed}); err != nil {
		t.Fatal(err)
	}
	content, _ := os.ReadFile(signed)
	br := b.browser()
	br.login("op-secret")
	_, page := br.do("GET", "/key?k="+url.QueryEscape(b.key), nil)
	if !strings.Contains(page, "Accept the authorization") {
		t.Fatal("a consumed key's page offers no authorization")
	}
	post := func(file []byte, reason string) string {
		t.Helper()
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		mw.WriteField("csrf", br.csrf(page))
		mw.WriteField("key", b.key)
		mw.WriteField("reason", reason)
		fw, _ := mw.CreateFormFile("signed", "auth.json")
		fw.Write(file)
		mw.Close()
		req, _ := http.NewRequest("POST", b.srv.URL+"/authorize", &body)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		resp, err := br.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("authorize: %d", resp.StatusCode)
		}
		_, page = br.do("GET", resp.Header.Get("Location"), nil)
		return page
	}
	tampered := bytes.Replace(content, []byte(`"revision": 1`), []byte(`"revision": 2`), 1)
	if got := post(tampered, "resend"); !strings.Contains(got, "Nothing was changed") {
		t.Fatalf("a tampered authorization was not refused:\n%s", got)
	}
	if got := post(content, "Bob lost the file"); !strings.Contains(got, "Authorized: revision 1") {
		t.Fatalf("the signed authorization was not accepted:\n%s", got)
	}
	st, _ := b.client.Show(ctx, sendonce.StatusRequest{Key: b.key})
	if st.Status != gate.StatusFree {
		t.Fatalf("after the authorization the key is %s; want free for one redelivery", st.Status)
	}
	found := false
	for _, e := range st.Intents[0].Events {
		found = found || (e.Kind == "authorized" && e.Detail["authorizer"] == "ann" && strings.HasPrefix(e.Detail["by"], "olga"))
	}
	if !found {
		t.Fatalf("no authorized event names who accepted it: %+v", st.Intents[0].Events)
	}
	if got := post(content, "again"); !strings.Contains(got, "already used") {
		t.Fatalf("the same signature was accepted twice:\n%s", got)
	}
	// An authorized key needs no person any more.
	_, page = br.do("GET", "/", nil)
	if strings.Contains(page, "&lt;img") {
		t.Fatal("the reopened key is still listed as needing a person")
	}
}

// TestLiveListSaysWhenItCannot: the live stream sends the list's rows, and when the
// store cannot be read it says so (the page then shows the list is stale).
func TestLiveListSaysWhenItCannot(t *testing.T) {
	b := newBed(t)
	br := b.browser()
	br.login("au-secret")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", b.srv.URL+"/live", nil)
	resp, err := br.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("/live: %d %s", resp.StatusCode, ct)
	}
	events := bufio.NewScanner(resp.Body)
	next := func() (string, string) {
		t.Helper()
		var event string
		var data []string
		for events.Scan() {
			line := events.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			case line == "" && event != "":
				return event, strings.Join(data, "\n")
			}
		}
		t.Fatalf("the stream ended: %v", events.Err())
		return "", ""
	}
	if ev, data := next(); ev != "needs" || !strings.Contains(data, "&lt;img src=x") {
		t.Fatalf("the first event: %s %q; want the list's rows, escaped", ev, data)
	}
	b.client.Close() // the store cannot be read any more
	if ev, data := next(); ev != "failed" || !strings.Contains(data, "the store cannot be read") {
		t.Fatalf("after the store closed: %s %q; want it said", ev, data)
	}
}

// TestLiveNamesCannotBreakTheStream: an event stream ends a line at a carriage return
// too, which HTML escaping leaves alone: a file name holding one must not end the
// list's event early nor start an event of its own.
func TestLiveNamesCannotBreakTheStream(t *testing.T) {
	b := newBed(t)
	b.attempt("Zed", "x\r\revent: ended\rdata: gone\r\r.txt", "three", gate.SendStatusUnknown)
	br := b.browser()
	br.login("au-secret")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", b.srv.URL+"/live", nil)
	resp, err := br.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Read the first event as a browser does: CR, LF and CRLF each end a line.
	r := bufio.NewReader(resp.Body)
	var events []string
	var data []string
	event := ""
	for len(events) == 0 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.ReplaceAll(strings.TrimSuffix(line, "\n"), "\r\n", "\n"), "\r") {
			switch {
			case strings.HasPrefix(l, "event: "):
				event = strings.TrimPrefix(l, "event: ")
			case strings.HasPrefix(l, "data: "):
				data = append(data, strings.TrimPrefix(l, "data: "))
			case l == "" && event != "":
				events = append(events, event+" "+strings.Join(data, "\n"))
				event, data = "", nil
			}
		}
	}
	if !strings.HasPrefix(events[0], "needs ") || !strings.Contains(events[0], "report") && !strings.Contains(events[0], "Zed") || !strings.Contains(events[0], "&lt;img") {
		t.Fatalf("the first event a browser reads: %q; want the whole list", events)
	}
	if len(events) > 1 {
		t.Fatalf("a file name made %d events: %q", len(events), events)
	}
}

// TestABundleIsItsAttemptsOwn: the store's evidence path is written by whichever
// workstation made the attempt; a bundle in an attempt's place that is another
// attempt's is never shown as this one's evidence.
func TestABundleIsItsAttemptsOwn(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	// Carol's attempt (not_sent) is the one whose bundle is put in Zed's place.
	carol, err := b.client.Status(ctx, sendonce.StatusRequest{Destination: sendonce.Destination{ProviderID: "xmpp:carol@example.org"}, Content: sendonce.Content{SHA256: sha("two")}})
	if err != nil || len(carol.Intents) != 1 {
		t.Fatalf("carol's attempt: %v %v", carol, err)
	}
	other := carol.Intents[0].Attempts[0]
	path := filepath.Join(t.TempDir(), "zed.txt")
	os.WriteFile(path, []byte("zed"), 0o600)
	res, err := b.client.Claim(ctx, sendonce.ClaimRequest{Destination: sendonce.Destination{Title: "Zed"}, Content: sendonce.Content{Path: path}, Task: "zed"})
	if err != nil {
		t.Fatal(err)
	}
	ref := sendonce.PermitRef{Key: res.Key, Task: res.Task, Token: res.Grant.Token}
	b.client.Cross(ctx, ref, gate.Send, "")
	dir := filepath.Join(b.client.EvidenceRoot(), res.Grant.DispatchID)
	rec, err := evidence.Create(dir, evidence.Manifest{Task: other.Task, Token: other.Token, DispatchID: other.DispatchID, Keys: []string{carol.Key},
		Identity: "xmpp:carol@example.org", IdentityStrength: "strong", FileName: "report.pdf", ContentSHA256: sha("two"), Size: 3}, evidence.SystemClock())
	if err != nil {
		t.Fatal(err)
	}
	rec.Close()
	if _, err := b.client.Record(ctx, ref, sendonce.RecordRequest{Outcome: gate.SendStatusUnknown, Evidence: dir}); err != nil {
		t.Fatal(err)
	}
	br := b.browser()
	br.login("op-secret")
	_, page := br.do("GET", "/key?k="+url.QueryEscape(res.Key), nil)
	if strings.Contains(page, "Verified:") || !strings.Contains(page, "attempt "+other.DispatchID+"&#39;s") {
		t.Fatalf("another attempt's bundle in this attempt's place:\n%s", page)
	}
	for _, p := range []string{"/evidence/report", "/evidence/bundle"} {
		if resp, _ := br.do("GET", p+"?k="+url.QueryEscape(res.Key)+"&d="+res.Grant.DispatchID, nil); resp.StatusCode != http.StatusConflict {
			t.Errorf("%s of another attempt's bundle: %d; want 409", p, resp.StatusCode)
		}
	}
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

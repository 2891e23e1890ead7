//go:build cgo

package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/sendonce/sendonce/service"
)

// These tests run 'sendonce serve' as a real process, on a unix socket or a free
// loopback port, and talk HTTP to it. Every response they get is validated against the
// service's OpenAPI description (/v1/openapi.json) by libopenapi-validator.

// svc is one running service and what it was started with.
type svc struct {
	t       *testing.T
	dir     string
	store   string
	socket  string // unix socket path ("" on TCP)
	addr    string // 127.0.0.1:PORT on TCP
	tokens  string
	agents  map[string]string // token name -> secret
	proc    *sendonceProc
	args    []string
	env     []string
	checker *openapiChecker
}

type svcOptions struct {
	tcp     bool
	fixture string   // the recorded fixture deliveries replay (verified-text-file)
	live    *testBed // deliveries drive the test bed's desktop instead
	store   string   // an initialized store to serve instead of a new SQLite file
	agents  int      // tokens agent-1..agent-N (at least 1)
	extra   []string // more serve flags
	env     []string // e.g. SENDONCE_TEST_KILL_AFTER=serve_cross
	socket  string   // the socket's path (default: sendonce.sock in the test's folder)
	// noDesktop serves without a display: no --replay, no --display, DISPLAY unset.
	noDesktop bool
}

func startService(t *testing.T, o svcOptions) *svc {
	t.Helper()
	dir := t.TempDir()
	s := &svc{t: t, dir: dir, store: filepath.Join(dir, "sendonce.db"), tokens: filepath.Join(dir, "tokens.json"), agents: map[string]string{}}
	if o.store != "" {
		s.store = o.store // made and initialized by the test (a shared store)
	} else if r := runSendonce(t, 30*time.Second, nil, "--store", s.store, "init"); r.code != 0 {
		t.Fatalf("init: %v", r)
	}
	for i := 1; i <= max(1, o.agents); i++ {
		name := fmt.Sprintf("agent-%d", i)
		res, err := service.CreateToken(s.tokens, name, service.RoleAgent, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		s.agents[name] = res.Token
	}
	listen := ""
	if o.tcp {
		s.addr = freePort(t)
		listen = s.addr
	} else {
		s.socket = cmp.Or(o.socket, filepath.Join(dir, "sendonce.sock"))
		listen = "unix:" + s.socket
	}
	staging := filepath.Join(dir, "staging")
	os.Mkdir(staging, 0o750)
	os.Chmod(staging, 0o750)
	if o.fixture == "" {
		o.fixture = "verified-text-file"
	}
	s.args = []string{"--store", s.store, "serve", "--listen", listen, "--tokens", s.tokens}
	switch {
	case o.noDesktop:
		s.args = append(s.args, "--staging", staging)
		o.env = append(o.env, "DISPLAY=")
	case o.live != nil:
		s.args = append(s.args, "--display", o.live.display(t), "--staging", o.live.staging(t))
	default:
		s.args = append(s.args, "--replay", filepath.Join("..", "..", "testdata", "fixtures", o.fixture), "--staging", staging, "--sent-item-timeout", "2s")
	}
	s.args = append(s.args, o.extra...)
	s.env = o.env
	s.start()
	return s
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// start starts the service process (again) and waits until it answers.
func (s *svc) start() {
	s.t.Helper()
	s.proc = startSendonce(s.t, s.env, s.args...)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := s.raw(context.Background(), "GET", "/v1/healthz", s.token(1), nil, nil)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if s.proc.exited() || time.Now().After(deadline) {
			s.t.Fatalf("the service did not come up: %v", s.proc.wait(s.t, time.Second))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *svc) token(i int) string { return s.agents[fmt.Sprintf("agent-%d", i)] }

func (s *svc) base() string {
	if s.socket != "" {
		return "unix:" + s.socket
	}
	return "http://" + s.addr
}

// httpClient talks to the service over its socket or port, validating every answer.
func (s *svc) httpClient() *http.Client {
	var tr http.RoundTripper = http.DefaultTransport
	if s.socket != "" {
		sock := s.socket
		tr = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}, MaxIdleConnsPerHost: 100}
	} else {
		tr = &http.Transport{MaxIdleConnsPerHost: 100}
	}
	if s.checker == nil {
		s.checker = newOpenAPIChecker(s.t)
	}
	return &http.Client{Transport: s.checker.wrap(tr), Timeout: 2 * time.Minute}
}

func (s *svc) url(path string) string {
	if s.socket != "" {
		return "http://sendonce" + path
	}
	return "http://" + s.addr + path
}

// raw sends one request; headers are added as given.
func (s *svc) raw(ctx context.Context, method, path, token string, body []byte, headers map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.url(path), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return s.httpClient().Do(req)
}

// answer is a response, read.
type answer struct {
	code   int
	header http.Header
	body   map[string]any
	text   string
}

func (a answer) String() string { return fmt.Sprintf("%d %s", a.code, strings.TrimSpace(a.text)) }

func (a answer) result() map[string]any {
	if r, ok := a.body["result"].(map[string]any); ok {
		return r
	}
	return a.body
}

func (s *svc) do(method, path, token, idemKey string, body any) answer {
	s.t.Helper()
	var b []byte
	switch v := body.(type) {
	case nil:
	case []byte:
		b = v
	default:
		b, _ = json.Marshal(v)
	}
	h := map[string]string{"Content-Type": "application/json"}
	if idemKey != "" {
		h["Idempotency-Key"] = idemKey
	}
	resp, err := s.raw(context.Background(), method, path, token, b, h)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	a := answer{code: resp.StatusCode, header: resp.Header, text: string(text)}
	json.Unmarshal(text, &a.body)
	return a
}

func (s *svc) post(path, token, idemKey string, body any) answer {
	s.t.Helper()
	return s.do("POST", path, token, idemKey, body)
}

func (s *svc) get(path, token string) answer {
	s.t.Helper()
	return s.do("GET", path, token, "", nil)
}

// claimBody is a claim of content for Bob by task.
func claimBody(content, task string) map[string]any {
	return map[string]any{"to": "Bob", "dest_id": "xmpp:bob@localhost", "content": base64.StdEncoding.EncodeToString([]byte(content)), "task": task}
}

func permitOf(t *testing.T, a answer) map[string]any {
	t.Helper()
	if a.code != 200 || a.body["decision"] != "granted" {
		t.Fatalf("claim: %v; want granted", a)
	}
	return map[string]any{"key": a.body["key"], "task": a.body["task"], "token": a.body["token"]}
}

func with(m map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

// openapiChecker validates every response against the service's own description.
type openapiChecker struct {
	t    *testing.T
	v    validator.Validator
	n    int
	fail func(msg string) // t.Error by default
	sync.Mutex
}

func newOpenAPIChecker(t *testing.T) *openapiChecker {
	t.Helper()
	spec, err := service.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := libopenapi.NewDocument(spec)
	if err != nil {
		t.Fatalf("the OpenAPI description does not parse: %v", err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("the OpenAPI description cannot be used: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("openapi.json: %s: %s", e.Message, e.Reason)
		}
		t.FailNow()
	}
	return &openapiChecker{t: t, v: v, fail: func(msg string) { t.Error(msg) }}
}

type checkingTransport struct {
	c    *openapiChecker
	next http.RoundTripper
}

func (c *openapiChecker) wrap(next http.RoundTripper) http.RoundTripper {
	return checkingTransport{c: c, next: next}
}

func (ct checkingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := ct.next.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	check := resp
	check2 := *check
	check2.Body = io.NopCloser(bytes.NewReader(body))
	if !knownPath(r.URL.Path) {
		return resp, nil // an unknown endpoint's 404 has no operation to check against; its test checks the problem
	}
	ct.c.Lock()
	ok, errs := ct.c.v.ValidateHttpResponse(r, &check2)
	ct.c.n++
	ct.c.Unlock()
	if !ok {
		var msgs []string
		for _, e := range errs {
			msgs = append(msgs, e.Message+": "+e.Reason)
			for _, se := range e.SchemaValidationErrors {
				msgs = append(msgs, "  "+se.FieldPath+": "+se.Reason)
			}
		}
		ct.c.fail(fmt.Sprintf("%s %s answered %d, which the OpenAPI description does not allow:\n%s\nbody: %.400s", r.Method, r.URL.Path, resp.StatusCode, strings.Join(msgs, "\n"), body))
	}
	return resp, nil
}

func knownPath(p string) bool {
	switch {
	case strings.HasPrefix(p, "/v1/deliveries/"):
		return true
	}
	switch p {
	case "/v1/claim", "/v1/check", "/v1/cross", "/v1/renew", "/v1/record", "/v1/reconcile", "/v1/deliveries",
		"/v1/status", "/v1/show", "/v1/healthz", "/v1/metrics", "/v1/openapi.json":
		return true
	}
	return false
}

// TestServeGateContractOverHTTP walks the gate contract over a unix socket: claim,
// check, cross, renew, record, status, show; a repeated Idempotency-Key replays; a
// repeated cross is refused as crossed with the first crossing's time.
func TestServeGateContractOverHTTP(t *testing.T) {
	s := startService(t, svcOptions{})
	tok := s.token(1)
	a := s.post("/v1/claim", tok, "c1", claimBody("report", "one"))
	p := permitOf(t, a)
	if p["task"] != "agent-1/one" || a.body["identity_strength"] != "strong" {
		t.Fatalf("claim: %v; want the task agent-1/one, strong", a)
	}
	again := s.post("/v1/claim", tok, "c1", claimBody("report", "one"))
	if again.code != 200 || again.body["token"] != a.body["token"] || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the same Idempotency-Key again: %v; want the stored grant", again)
	}
	if r := s.post("/v1/claim", tok, "c1", claimBody("another file", "one")); r.code != 422 || r.body["kind"] != "idempotency_conflict" || r.body["exit_code"] != nil {
		t.Fatalf("the same key with another file: %v; want 422 idempotency_conflict, exit_code null", r)
	}
	r := s.post("/v1/claim", s.token(1), "c2", claimBody("report", "two"))
	if retry, _ := strconv.Atoi(r.header.Get("Retry-After")); r.code != 409 || r.body["kind"] != "held" || r.body["exit_code"] != float64(4) ||
		retry < 280 || retry > 300 {
		t.Fatalf("a claim by another task while held: %v (Retry-After %q); want 409 held, exit_code 4, Retry-After the holder's lease (300 s)", r, r.header.Get("Retry-After"))
	}
	if r := s.post("/v1/check", tok, "k1", with(p, "boundary", "open_picker")); r.code != 200 || r.body["decision"] != "ok" {
		t.Fatalf("check: %v", r)
	}
	if r := s.post("/v1/renew", tok, "r1", with(p, "lease_seconds", 300)); r.code != 200 {
		t.Fatalf("renew: %v", r)
	}
	if r := s.post("/v1/cross", tok, "x1", with(p, "boundary", "choose_file")); r.code != 200 || r.body["crossed"] != true {
		t.Fatalf("cross: %v", r)
	}
	for _, key := range []string{"x1", "x2"} {
		r := s.post("/v1/cross", tok, key, with(p, "boundary", "choose_file"))
		res := r.result()
		if r.code != 409 || r.body["kind"] != "crossed" || r.body["exit_code"] != float64(3) || res["replayed"] != true || res["first_crossed_at"] == nil {
			t.Fatalf("cross again (Idempotency-Key %s): %v; want 409 crossed, exit_code 3, replayed with the first crossing's time", key, r)
		}
	}
	// Another agent cannot name this agent's task.
	if r := s.post("/v1/record", s.token(1), "n1", with(p, "task", "agent-2/one", "outcome", "not_sent")); r.code != 400 || r.body["field"] != "task" {
		t.Fatalf("naming another agent's task: %v; want 400 on task", r)
	}
	// An agent's bare word that it was delivered is recorded unknown, with its claim noted.
	r = s.post("/v1/record", tok, "rec1", with(p, "outcome", "sent_verified"))
	if r.code != 409 || r.body["kind"] != "consumed" || r.result()["outcome"] != "send_status_unknown" || r.result()["requested_outcome"] != "sent_verified" {
		t.Fatalf("record sent_verified unchecked: %v; want 409 consumed, send_status_unknown recorded", r)
	}
	st := s.get("/v1/status?key="+a.body["key"].(string), tok)
	if st.code != 200 || !strings.Contains(st.text, `"send_status_unknown"`) {
		t.Fatalf("status: %v", st)
	}
	show := s.get("/v1/show?key="+a.body["key"].(string), tok)
	if show.code != 200 || !strings.Contains(show.text, "the agent reported sent_verified") {
		t.Fatalf("show does not note the agent's claim: %v", show)
	}
	// A new Idempotency-Key for the consumed intent gets its recorded outcome, never a grant.
	if r := s.post("/v1/claim", tok, "c3", claimBody("report", "three")); r.code != 409 || r.body["kind"] != "consumed" || r.result()["status"] != "send_status_unknown" {
		t.Fatalf("a new key for a consumed intent: %v; want 409 consumed with the recorded status", r)
	}
	m := s.get("/v1/metrics", tok)
	for _, want := range []string{"sendonce_grants_total 1", `sendonce_refusals_total{kind="crossed"} 2`, "sendonce_replays_total 1", "sendonce_deliveries_in_flight 0"} {
		if !strings.Contains(m.text, want) {
			t.Errorf("metrics lack %q:\n%s", want, m.text)
		}
	}
	// The service's own health: a leak shows as these growing with the requests served.
	for _, want := range []*regexp.Regexp{regexp.MustCompile(`(?m)^go_goroutines [1-9][0-9]*$`), regexp.MustCompile(`(?m)^go_memstats_heap_inuse_bytes [1-9][0-9]*$`)} {
		if !want.MatchString(m.text) {
			t.Errorf("metrics lack %v:\n%s", want, m.text)
		}
	}
	if s.checker.n < 15 {
		t.Fatalf("only %d responses were validated", s.checker.n)
	}
}

// TestServeBadRequests: each wrong input gets a clear problem, and nothing is recorded.
func TestServeBadRequests(t *testing.T) {
	s := startService(t, svcOptions{tcp: true, agents: 2, extra: []string{"--max-body", "4096", "--read-timeout", "1s"}})
	tok := s.token(1)
	good := claimBody("payload", "one")
	cases := []struct {
		name, path, token, key string
		body                   any
		code                   int
		kind, field            string
		exit                   any
	}{
		{"no token", "/v1/claim", "", "b1", good, 401, "unauthorized", "", nil},
		{"a wrong token", "/v1/claim", "sendonce_not-a-token", "b2", good, 401, "unauthorized", "", nil},
		{"no Idempotency-Key", "/v1/claim", tok, "", good, 400, "bad_input", "", float64(2)},
		{"malformed JSON", "/v1/claim", tok, "b3", []byte(`{"to": "Bob",`), 400, "bad_input", "body", float64(2)},
		{"two JSON values", "/v1/claim", tok, "b4", []byte(`{"task":"a"} {"task":"b"}`), 400, "bad_input", "body", float64(2)},
		{"closing brackets after the object", "/v1/claim", tok, "b4b", append(mustJSON(good), []byte("}]]")...), 400, "bad_input", "body", float64(2)},
		{"a wrong type", "/v1/claim", tok, "b5", with(good, "lease_seconds", "long"), 400, "bad_input", "lease_seconds", float64(2)},
		{"an unknown field", "/v1/claim", tok, "b6", with(good, "path", "/etc/passwd"), 400, "bad_input", "body", float64(2)},
		{"empty content", "/v1/claim", tok, "b7e", with(good, "content", ""), 400, "bad_input", "content", float64(2)},
		{"content that is not base64", "/v1/claim", tok, "b7", with(good, "content", "%%%"), 400, "bad_input", "content", float64(2)},
		{"no destination", "/v1/claim", tok, "b8", with(good, "to", "", "dest_id", ""), 400, "bad_input", "", float64(2)},
		{"an oversized body", "/v1/claim", tok, "b9", with(good, "content", base64.StdEncoding.EncodeToString(make([]byte, 8000))), 413, "bad_input", "", float64(2)},
		{"a path to deliver", "/v1/deliveries", tok, "b10", map[string]any{"to": "Bob", "file_name": "x.txt", "content": "aGk=", "file": "/etc/shadow"}, 400, "bad_input", "body", float64(2)},
		{"a bad boundary", "/v1/cross", tok, "b11", map[string]any{"key": "v2:title:Bob:00", "task": "one", "token": 1, "boundary": "launch"}, 400, "bad_input", "", float64(2)},
		{"an unknown endpoint", "/v1/send", tok, "b12", good, 404, "not_found", "", nil},
		{"resolve (a person's, never an agent's)", "/v1/resolve", tok, "b13", map[string]any{"dispatch_id": "x"}, 404, "not_found", "", nil},
	}
	for _, c := range cases {
		a := s.post(c.path, c.token, c.key, c.body)
		if c.name == "a path to deliver" && !strings.Contains(a.text, `unknown field \"file\"`) {
			t.Errorf("a path to deliver: %v; want the unknown field named", a)
		}
		if a.code != c.code || a.body["kind"] != c.kind || (c.field != "" && a.body["field"] != c.field) || a.body["exit_code"] != c.exit || a.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %v; want %d %s (field %q, exit_code %v) as problem+json", c.name, a, c.code, c.kind, c.field, c.exit)
		}
		if strings.Contains(a.text, s.token(1)) {
			t.Errorf("%s: the answer holds the token", c.name)
		}
	}
	// A 401 says how to authenticate (RFC 9110 11.6.1): the Bearer scheme, and
	// invalid_token when a token was sent but is not known (RFC 6750 3.1).
	for name, c := range map[string]struct{ token, want string }{
		"no token":      {"", `Bearer realm="sendonce"`},
		"a wrong token": {"sendonce_not-a-token", `Bearer realm="sendonce", error="invalid_token"`},
	} {
		if a := s.post("/v1/claim", c.token, "b14", good); a.code != 401 || a.header.Get("WWW-Authenticate") != c.want {
			t.Errorf("%s: %d with WWW-Authenticate %q; want 401 with %q", name, a.code, a.header.Get("WWW-Authenticate"), c.want)
		}
	}
	// The scheme's name is case-insensitive (RFC 9110 11.1).
	for _, scheme := range []string{"bearer", "BEARER", "Bearer"} {
		req, _ := http.NewRequest("GET", s.url("/v1/healthz"), nil)
		req.Header.Set("Authorization", scheme+" "+tok)
		resp, err := s.httpClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("Authorization: %s TOKEN: %d; want 200", scheme, resp.StatusCode)
		}
	}
	// Two Idempotency-Key headers: which one the request meant is unknowable; refused.
	req, _ := http.NewRequest("POST", s.url("/v1/claim"), bytes.NewReader(mustJSON(good)))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("Idempotency-Key", "k-one")
	req.Header.Add("Idempotency-Key", "k-two")
	resp, err := s.httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	twoKeys, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(twoKeys), "2 Idempotency-Key headers") {
		t.Errorf("two Idempotency-Key headers: %d %s; want 400 naming them", resp.StatusCode, twoKeys)
	}
	// A slow client: headers never finished within the read timeout; the connection is closed.
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/claim HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n", s.addr, tok)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	n, _ := conn.Read(make([]byte, 1))
	conn.Close()
	if n != 0 || time.Since(start) > 9*time.Second {
		t.Errorf("a client that never finishes its headers was not cut off (read %d bytes)", n)
	}
	// Nothing was claimed or recorded by any of it.
	st := s.get("/v1/show?to=Bob&dest_id=xmpp:bob@localhost&sha256="+sha256hex("payload"), tok)
	if st.code != 200 || !strings.Contains(st.text, `"free"`) || strings.Contains(st.text, `"kind"`) {
		t.Fatalf("after the bad requests: %v; want free with no events", st)
	}
	// A revoked token stops working at its next request.
	if _, err := service.RevokeToken(s.tokens, "agent-2", time.Now()); err != nil {
		t.Fatal(err)
	}
	if a := s.get("/v1/healthz", s.token(2)); a.code != 401 {
		t.Fatalf("a revoked token: %v; want 401", a)
	}
	logs := s.proc.errb.String()
	if strings.Contains(logs, s.token(1)) || strings.Contains(logs, base64.StdEncoding.EncodeToString([]byte("payload"))) {
		t.Fatal("the access log holds a token or file contents")
	}
}

func sha256hex(s string) string {
	return fmt.Sprintf("%x", sha256.Sum256([]byte(s)))
}

// TestServeRace64: 64 clients with 64 tokens race for one key, 5 rounds (a new file
// each round): exactly one grant a round; every other answer is held or consumed.
func TestServeRace64(t *testing.T) {
	const clients, rounds = 64, 5
	s := startService(t, svcOptions{agents: clients})
	for round := 0; round < rounds; round++ {
		content := fmt.Sprintf("race round %d", round)
		var wg sync.WaitGroup
		answers := make([]answer, clients)
		startLine := make(chan struct{})
		for i := 0; i < clients; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-startLine
				answers[i] = s.post("/v1/claim", s.token(i+1), fmt.Sprintf("r%d-c%d", round, i), claimBody(content, "race"))
			}(i)
		}
		close(startLine)
		wg.Wait()
		granted := 0
		for i, a := range answers {
			switch {
			case a.code == 200 && a.body["decision"] == "granted":
				granted++
			case a.code == 409 && (a.body["kind"] == "held" || a.body["kind"] == "consumed"):
			default:
				t.Fatalf("round %d, client %d: %v; want a grant or 409 held/consumed", round, i, a)
			}
		}
		if granted != 1 {
			t.Fatalf("round %d: %d grants; want exactly 1", round, granted)
		}
	}
}

// TestServeOneTaskResumes: one token, one task, many concurrent claims: each resume
// fences the one before, and of all the permits handed out at most one crosses.
func TestServeOneTaskResumes(t *testing.T) {
	const n = 16
	s := startService(t, svcOptions{tcp: true})
	tok := s.token(1)
	var wg sync.WaitGroup
	permits := make([]map[string]any, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			a := s.post("/v1/claim", tok, fmt.Sprintf("claim-%d", i), claimBody("resumed file", "the-task"))
			if a.code == 200 {
				permits[i] = map[string]any{"key": a.body["key"], "task": a.body["task"], "token": a.body["token"]}
			}
		}(i)
	}
	wg.Wait()
	tokens := map[any]bool{}
	for i, p := range permits {
		if p == nil {
			t.Fatalf("claim %d of the same task was refused; a task resumes its own claim", i)
		}
		tokens[p["token"]] = true
	}
	if len(tokens) != n {
		t.Fatalf("%d distinct tokens for %d resumes; each resume gets a new token", len(tokens), n)
	}
	crossed := make([]answer, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			crossed[i] = s.post("/v1/cross", tok, fmt.Sprintf("cross-%d", i), with(permits[i], "boundary", "choose_file"))
		}(i)
	}
	wg.Wait()
	ok := 0
	for i, a := range crossed {
		switch {
		case a.code == 200:
			ok++
		case a.code == 412 && a.body["kind"] == "stale":
		default:
			t.Fatalf("cross %d: %v; want 200 or 412 stale", i, a)
		}
	}
	if ok > 1 {
		t.Fatalf("%d permits crossed; at most one may", ok)
	}
}

// TestServeKilledBetweenCrossAndResponse: the service dies (SIGKILL) after a crossing is
// durable and before its answer; restarted, the client's retry with the same
// Idempotency-Key learns the truth from the store: crossed, never a second crossing.
func TestServeKilledBetweenCrossAndResponse(t *testing.T) {
	s := startService(t, svcOptions{env: []string{"SENDONCE_TEST_KILL_AFTER=serve_cross"}})
	tok := s.token(1)
	claim := s.post("/v1/claim", tok, "claim-1", claimBody("killed", "one"))
	p := permitOf(t, claim)
	resp, err := s.raw(context.Background(), "POST", "/v1/cross", tok, mustJSON(with(p, "boundary", "choose_file")), map[string]string{"Idempotency-Key": "cross-1"})
	if err == nil {
		resp.Body.Close()
		t.Fatalf("the cross was answered (%d); the service should have died first", resp.StatusCode)
	}
	if r := s.proc.wait(t, 10*time.Second); r.signal != 9 {
		t.Fatalf("the service: %v; want killed by SIGKILL", r)
	}
	s.env = nil
	s.start()
	r := s.post("/v1/cross", tok, "cross-1", with(p, "boundary", "choose_file"))
	if r.code != 409 || r.body["kind"] != "crossed" || r.result()["replayed"] != true || r.result()["first_crossed_at"] == nil {
		t.Fatalf("the retry after the restart: %v; want 409 crossed, replayed, with the first crossing's time", r)
	}
	if other := s.post("/v1/cross", tok, "cross-1", with(p, "boundary", "send")); other.code != 422 || other.body["kind"] != "idempotency_conflict" {
		t.Fatalf("the crossing's Idempotency-Key with another boundary after the restart: %v; want 422", other)
	}
	if again := s.post("/v1/claim", tok, "claim-1", claimBody("killed", "one")); again.code != 200 || again.body["replayed"] != true || again.body["token"] != claim.body["token"] {
		t.Fatalf("the claim's retry after the restart: %v; want the stored grant, replayed", again)
	}
	show := s.get("/v1/show?key="+p["key"].(string), tok)
	if n := strings.Count(show.text, `"boundary":"choose_file","at"`); n != 1 {
		t.Fatalf("%d choose_file crossings in the store; want 1:\n%s", n, show.text)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestServeStoreReplaced: a store re-initialized under the running service fails every
// request closed (503), health included.
func TestServeStoreReplaced(t *testing.T) {
	s := startService(t, svcOptions{})
	tok := s.token(1)
	permitOf(t, s.post("/v1/claim", tok, "c1", claimBody("before", "one")))
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(s.store + suffix)
	}
	if r := runSendonce(t, 30*time.Second, nil, "--store", s.store, "init"); r.code != 0 {
		t.Fatalf("init again: %v", r)
	}
	if a := s.post("/v1/claim", tok, "c2", claimBody("before", "two")); a.code != 503 || a.body["kind"] != "fail_closed" || a.body["exit_code"] != float64(5) {
		t.Fatalf("a claim on the replaced store: %v; want 503 fail_closed, exit_code 5", a)
	}
	if a := s.get("/v1/healthz", tok); a.code != 503 {
		t.Fatalf("health on the replaced store: %v; want 503", a)
	}
	// Without a token, liveness: the process serves; nothing else is said.
	if a := s.get("/v1/healthz", ""); a.code != 200 || strings.TrimSpace(a.text) != `{"status":"ok"}` {
		t.Fatalf("liveness without a token: %d %q; want 200 and the status alone", a.code, a.text)
	}
}

// TestServeRefusesUnsafeSetups: a non-loopback listen without TLS, half a TLS pair, no
// token file, a socket another service answers on.
func TestServeRefusesUnsafeSetups(t *testing.T) {
	s := startService(t, svcOptions{})
	other := filepath.Join(t.TempDir(), "none.json")
	open := filepath.Join(t.TempDir(), "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777) // past the umask: anyone may put a socket of their own here
	for name, args := range map[string][]string{
		"a socket folder others can write": {"--listen", "unix:" + filepath.Join(open, "sendonce.sock")},
		"not loopback":                     {"--listen", "0.0.0.0:0"},
		"half a TLS pair":                  {"--listen", "127.0.0.1:0", "--tls-cert", "cert.pem"},
		"no token file":                    {"--listen", "127.0.0.1:0", "--tokens", other},
		"a live socket":                    {"--listen", "unix:" + s.socket},
		"a relative socket":                {"--listen", "unix:sock"},
		"not an address":                   {"--listen", "somewhere"},
	} {
		full := append([]string{"--json", "--store", s.store, "serve", "--tokens", s.tokens}, args...)
		r := runSendonce(t, 30*time.Second, nil, full...)
		if r.code != 2 {
			t.Errorf("%s: %v; want exit 2", name, r)
		}
	}
	if a := s.get("/v1/healthz", s.token(1)); a.code != 200 {
		t.Fatalf("the first service after the refusals: %v", a)
	}
}

// fixedAnswer answers every request with one response.
type fixedAnswer struct {
	code        int
	contentType string
	body        string
}

func (f fixedAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: f.code, Header: http.Header{"Content-Type": {f.contentType}}, Body: io.NopCloser(strings.NewReader(f.body)), Request: r}, nil
}

// TestOpenAPICheckerCatchesDrift: the validator the HTTP tests rely on refuses answers
// the description does not allow, so a passing test means something.
func TestOpenAPICheckerCatchesDrift(t *testing.T) {
	c := newOpenAPIChecker(t)
	for _, tc := range []struct {
		name string
		ans  fixedAnswer
		bad  bool
	}{
		{"a decision", fixedAnswer{200, "application/json", `{"decision":"ok","key":"k","task":"a/b","token":1}`}, false},
		{"a wrong type", fixedAnswer{200, "application/json", `{"decision":5,"key":"k","task":"a/b","token":1}`}, true},
		{"a field nobody described", fixedAnswer{200, "application/json", `{"decision":"ok","granted_twice":true}`}, true},
		{"a problem", fixedAnswer{409, "application/problem+json", `{"type":"t","title":"Conflict","status":409,"detail":"d","kind":"crossed","exit_code":3}`}, false},
		{"a problem without its exit code's type", fixedAnswer{409, "application/problem+json", `{"type":"t","title":"Conflict","status":409,"detail":"d","kind":"crossed","exit_code":"three"}`}, true},
	} {
		var failed []string
		c.fail = func(msg string) { failed = append(failed, msg) }
		req, _ := http.NewRequest("POST", "http://sendonce/v1/check", strings.NewReader(`{}`))
		resp, err := c.wrap(tc.ans).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := len(failed) > 0; got != tc.bad {
			t.Errorf("%s: refused=%v, want %v (%v)", tc.name, got, tc.bad, failed)
		}
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key, as PEM files.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sendonce test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestServeTLSBeyondLoopback: with a certificate the service listens on every address;
// a client that trusts it gets its answers, plain HTTP gets none.
func TestServeTLSBeyondLoopback(t *testing.T) {
	s := startService(t, svcOptions{tcp: true})
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	_, port, _ := net.SplitHostPort(freePort(t))
	p := startSendonce(t, nil, "--store", s.store, "serve", "--listen", "0.0.0.0:"+port, "--tokens", s.tokens,
		"--tls-cert", certFile, "--tls-key", keyFile, "--replay", "../../testdata/fixtures/verified-text-file", "--staging", t.TempDir())
	client := &http.Client{Timeout: 10 * time.Second, Transport: newOpenAPIChecker(t).wrap(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}})}
	var resp *http.Response
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		req, _ := http.NewRequest("GET", "https://127.0.0.1:"+port+"/v1/healthz", nil)
		req.Header.Set("Authorization", "Bearer "+s.token(1))
		var err error
		if resp, err = client.Do(req); err == nil {
			break
		}
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("the TLS service did not answer: %v %v", err, p.wait(t, time.Second))
		}
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil {
		t.Fatalf("healthz over TLS: %d", resp.StatusCode)
	}
	plain, err := http.Get("http://127.0.0.1:" + port + "/v1/healthz")
	if err == nil {
		plain.Body.Close()
		if plain.StatusCode == 200 {
			t.Fatal("plain HTTP was answered on the TLS listener")
		}
	}
}

// TestServeMatrixDestination: the HTTP service takes a matrix: destination id as any
// other: granted under its canonical key, and the other spelling of the same user
// refused.
func TestServeMatrixDestination(t *testing.T) {
	s := startService(t, svcOptions{})
	tok := s.token(1)
	body := map[string]any{"to": "Bob", "dest_id": "matrix:@Bob:LocalHost", "content": base64.StdEncoding.EncodeToString([]byte("minutes")), "task": "m1"}
	a := s.post("/v1/claim", tok, "m1", body)
	if a.code != 200 || a.body["decision"] != "granted" || !strings.HasPrefix(fmt.Sprint(a.body["key"]), "v2:matrix:@bob%3Alocalhost:") {
		t.Fatalf("a claim to matrix:@Bob:LocalHost: %v", a)
	}
	body["dest_id"], body["task"] = "matrix:@bob:localhost", "m2"
	if a := s.post("/v1/claim", tok, "m2", body); a.code != 409 {
		t.Fatalf("the same user spelled otherwise: %v; want 409 (held)", a)
	}
}

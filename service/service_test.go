package service

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/sendonce/sendonce"
)

func TestTokens(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens.json")
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	made, err := CreateToken(file, "agent-a", RoleAgent, now)
	if err != nil || !strings.HasPrefix(made.Token, tokenPrefix) {
		t.Fatalf("create: %+v %v", made, err)
	}
	b, _ := os.ReadFile(file)
	if strings.Contains(string(b), made.Token) {
		t.Fatal("the token file holds the token itself, not its hash")
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Fatalf("the token file is %v; want 0600", fi.Mode().Perm())
	}
	for name, bad := range map[string]string{"a taken name": "agent-a", "a slash": "a/b", "upper case": "Agent", "empty": ""} {
		if _, err := CreateToken(file, bad, RoleAgent, now); !errors.Is(err, sendonce.ErrInvalid) {
			t.Errorf("%s (%q): %v; want bad input", name, bad, err)
		}
	}
	tokens := &Tokens{Path: file}
	if got, err := tokens.Lookup(made.Token); err != nil || got != "agent-a" {
		t.Fatalf("lookup: %q %v", got, err)
	}
	if got, _ := tokens.Lookup(made.Token + "x"); got != "" {
		t.Fatalf("a wrong token matched %q", got)
	}
	other, _ := CreateToken(file, "agent-b", RoleAgent, now)
	if _, err := RevokeToken(file, "agent-a", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, _ := tokens.Lookup(made.Token); got != "" {
		t.Fatalf("a revoked token still matches %q", got)
	}
	if got, _ := tokens.Lookup(other.Token); got != "agent-b" {
		t.Fatalf("the other token after a revocation: %q", got)
	}
	list, _ := ListTokens(file)
	if len(list.Tokens) != 2 || list.Tokens[0].RevokedAt.IsZero() || !list.Tokens[1].RevokedAt.IsZero() {
		t.Fatalf("list: %+v", list)
	}
	if _, err := RevokeToken(file, "nobody", now); !errors.Is(err, sendonce.ErrInvalid) {
		t.Fatalf("revoking an unknown name: %v", err)
	}
	os.WriteFile(file, []byte("{not json"), 0o600)
	if _, err := tokens.Lookup(other.Token); !errors.Is(err, sendonce.ErrUnavailable) {
		t.Fatalf("an unreadable token file: %v; want fail-closed", err)
	}
}

func TestTaskNames(t *testing.T) {
	c := &call{agent: "agent-a"}
	for _, tc := range []struct {
		sub, want string
		required  bool
		bad       bool
	}{
		{sub: "x", want: "agent-a/x"},
		{sub: "agent-a/x", want: "agent-a/x"},
		{sub: "agent-b/x", bad: true},
		{sub: "agent-a/x/y", bad: true},
		{sub: "/x", bad: true},
		{sub: "", required: true, bad: true},
		{sub: "x y\n", bad: true},
	} {
		got, err := c.task(tc.sub, tc.required)
		if (err != nil) != tc.bad || (!tc.bad && got != tc.want) {
			t.Errorf("task(%q): %q %v; want %q (bad %v)", tc.sub, got, err, tc.want, tc.bad)
		}
	}
	c.key = "key-1"
	first, err := c.task("", false)
	if err != nil || !strings.HasPrefix(first, "agent-a/t-") {
		t.Errorf("a new task: %q %v", first, err)
	}
	if again, _ := c.task("", false); again != first {
		t.Errorf("the same Idempotency-Key names another task (%q, then %q): a retry could not be replayed", first, again)
	}
	c.key = "key-2"
	if other, _ := c.task("", false); other == first {
		t.Errorf("another Idempotency-Key names the same task %q", other)
	}
}

func TestFingerprint(t *testing.T) {
	base := fingerprint("POST", "/v1/claim", "a", []byte(`{"to":"Bob","content":"aGVsbG8=","task":"x"}`))
	same := []string{`{"task":"x", "content":"aGVsbG8=",  "to":"Bob"}`, "{\n\"to\": \"Bob\", \"content\": \"aGVsbG8=\", \"task\": \"x\"}\n"}
	for _, b := range same {
		if got := fingerprint("POST", "/v1/claim", "a", []byte(b)); got != base {
			t.Errorf("%s: another fingerprint for the same request", b)
		}
	}
	differ := map[string]string{
		"other bytes":  fingerprint("POST", "/v1/claim", "a", []byte(`{"to":"Bob","content":"aGVsbG9v","task":"x"}`)),
		"other path":   fingerprint("POST", "/v1/deliveries", "a", []byte(`{"to":"Bob","content":"aGVsbG8=","task":"x"}`)),
		"other agent":  fingerprint("POST", "/v1/claim", "b", []byte(`{"to":"Bob","content":"aGVsbG8=","task":"x"}`)),
		"other task":   fingerprint("POST", "/v1/claim", "a", []byte(`{"to":"Bob","content":"aGVsbG8=","task":"y"}`)),
		"not JSON":     fingerprint("POST", "/v1/claim", "a", []byte(`{"to":"Bob"`)),
		"a number now": fingerprint("POST", "/v1/claim", "a", []byte(`{"to":"Bob","content":"aGVsbG8=","task":"x","lease_seconds":1}`)),
	}
	for what, fp := range differ {
		if fp == base {
			t.Errorf("%s: the same fingerprint", what)
		}
	}
}

func TestPreferWait(t *testing.T) {
	for h, want := range map[string]time.Duration{"wait=5": 5 * time.Second, "respond-async, wait=0": 0, "return=minimal": -1, "wait=x": -1} {
		got, ok := preferWait(h)
		if (want < 0 && ok) || (want >= 0 && (!ok || got != want)) {
			t.Errorf("Prefer: %s: %v %v; want %v", h, got, ok, want)
		}
	}
}

func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	b, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                     `json:"openapi"`
		Paths   map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi: %v %q", err, doc.OpenAPI)
	}
	for _, p := range []string{"/v1/claim", "/v1/check", "/v1/cross", "/v1/renew", "/v1/record", "/v1/reconcile", "/v1/deliveries",
		"/v1/deliveries/{id}", "/v1/status", "/v1/show", "/v1/healthz", "/v1/metrics", "/v1/openapi.json"} {
		if _, ok := doc.Paths[p]; !ok {
			t.Errorf("the description has no %s", p)
		}
	}
}

// FuzzDecodeClaim: the strict decoder never panics, and what it accepts survives a
// round trip unchanged.
func FuzzDecodeClaim(f *testing.F) {
	for _, s := range []string{`{"to":"Bob","content":"aGk=","task":"x"}`, `{"task":"x"}}]]`, `{"sha256":"00","task":"t","lease_seconds":5}`, `{`, `[]`, `{"path":"/etc"}`, `{"content":"%%"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var b ClaimBody
		err := decode(body, &b)
		if err == nil && !json.Valid(body) {
			t.Fatalf("%q is not JSON, and it was accepted", body)
		}
		if err != nil {
			if !errors.Is(err, sendonce.ErrInvalid) {
				t.Fatalf("a decode error that is not bad input: %v", err)
			}
			return
		}
		if _, err := contentOf(b.Content, b.SHA256); err == nil && len(b.Content) == 0 && b.SHA256 == "" {
			t.Fatalf("%s: a claim with no bytes and no digest names content", body)
		}
		again, _ := json.Marshal(b)
		var b2 ClaimBody
		if len(b.Content) == 0 {
			b.Content = nil // "" and absent both say: no bytes (omitempty)
		}
		if err := decode(again, &b2); err != nil || !reflect.DeepEqual(b, b2) {
			t.Fatalf("round trip: %+v -> %s -> %+v (%v)", b, again, b2, err)
		}
	})
}

func TestRememberedIsBounded(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := &Server{cfg: Config{Retention: DefaultRetention, Now: func() time.Time { return now }}, remembered: map[string]*remembered{}}
	done := make(chan struct{})
	close(done)
	running := &remembered{done: make(chan struct{})}
	s.remembered["running"] = running
	s.remembered["expired"] = &remembered{done: done, at: now.Add(-25 * time.Hour)}
	for i := 0; i < maxRemembered; i++ {
		s.remembered[strconv.Itoa(i)] = &remembered{done: done, at: now.Add(time.Duration(i-maxRemembered) * time.Millisecond)}
	}
	s.shed()
	if n := len(s.remembered); n > maxRemembered*9/10+1 {
		t.Fatalf("%d responses kept after shedding; want at most %d", n, maxRemembered*9/10+1)
	}
	if s.remembered["running"] != running || s.remembered["expired"] != nil {
		t.Fatal("shedding dropped a running request or kept an expired one")
	}
	if s.remembered[strconv.Itoa(maxRemembered-1)] == nil || s.remembered["0"] != nil {
		t.Fatal("shedding dropped a newer response before an older one")
	}
}

// TestOpenAPIListsErrorsAndServers: every operation names its 4XX and 5XX answers (not
// only a default), 401 carries WWW-Authenticate, and the document says where it is
// served.
func TestOpenAPIListsErrorsAndServers(t *testing.T) {
	b, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Servers []struct {
			URL string `json:"url"`
		} `json:"servers"`
		Paths      map[string]map[string]struct{ Responses map[string]json.RawMessage } `json:"paths"`
		Components struct {
			Responses map[string]struct {
				Headers map[string]json.RawMessage `json:"headers"`
			} `json:"responses"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Servers) == 0 || doc.Servers[0].URL == "" {
		t.Error("the description has no servers")
	}
	if _, ok := doc.Components.Responses["Unauthorized"].Headers["WWW-Authenticate"]; !ok {
		t.Error("the 401 answer does not describe WWW-Authenticate")
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			var four, five bool
			for code := range op.Responses {
				four = four || strings.HasPrefix(code, "4")
				five = five || strings.HasPrefix(code, "5")
			}
			if _, ok := op.Responses["401"]; !ok || !four || !five {
				t.Errorf("%s %s lists %v: want its 4XX (401 among them) and 5XX answers", method, path, keys(op.Responses))
			}
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// FuzzIdempotencyKeyIsOneRule: the Idempotency-Key schema the description publishes
// accepts exactly the keys the server accepts.
func FuzzIdempotencyKeyIsOneRule(f *testing.F) {
	b, err := OpenAPI()
	if err != nil {
		f.Fatal(err)
	}
	var doc struct {
		Components struct {
			Parameters map[string]struct {
				Schema *jsonschema.Schema `json:"schema"`
			} `json:"parameters"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		f.Fatal(err)
	}
	published, err := doc.Components.Parameters["IdempotencyKey"].Schema.Resolve(nil)
	if err != nil {
		f.Fatal(err)
	}
	for _, k := range []string{"", "a", "a b", "ключ", "k\t", strings.Repeat("x", 200), strings.Repeat("x", 201), "550e8400-e29b-41d4-a716-446655440000", "~!", "\x7f", "a\nb"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		if ValidIdempotencyKey(k) != (published.Validate(k) == nil) {
			t.Fatalf("key %q: the server says %v, the published schema %v", k, ValidIdempotencyKey(k), published.Validate(k))
		}
	})
}

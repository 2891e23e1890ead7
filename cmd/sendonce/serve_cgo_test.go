//go:build cgo

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fixtureFile is the file a recorded fixture delivered: its name and bytes.
func fixtureFile(t *testing.T, fixture string) (string, []byte) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "fixtures", fixture, "file", "*"))
	if len(files) != 1 {
		t.Fatalf("fixture %s has %d files", fixture, len(files))
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Base(files[0]), b
}

// TestServeDeliverOverHTTP: a delivery with the bytes in the body (the recorded
// fixture's desktop): 202 and a Location when it outlasts the client's wait, the result
// there; the same Idempotency-Key replays the 202; a new key for the same file and
// destination gets the recorded outcome (409 consumed), never a second send.
func TestServeDeliverOverHTTP(t *testing.T) {
	s := startService(t, svcOptions{})
	tok := s.token(1)
	name, content := fixtureFile(t, "verified-text-file")
	body := map[string]any{"to": "Bob", "dest_id": "xmpp:bob@localhost", "file_name": name, "content": base64.StdEncoding.EncodeToString(content), "task": "d1"}
	firstDone := make(chan answer, 1)
	go func() { firstDone <- s.do("POST", "/v1/deliveries", tok, "d-1", body) }()
	// The same key while the first request runs: 409 in_progress, Retry-After, no exit code.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(s.get("/v1/metrics", tok).text, "sendonce_deliveries_in_flight 1"); {
		if time.Now().After(deadline) {
			t.Fatal("the first delivery did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	running := s.post("/v1/deliveries", tok, "d-1", body)
	if running.code != 409 || running.body["kind"] != "in_progress" || running.header.Get("Retry-After") == "" || running.body["exit_code"] != nil {
		t.Fatalf("the same key while its request runs: %v; want 409 in_progress with Retry-After and exit_code null", running)
	}
	first := <-firstDone
	var final answer
	switch first.code {
	case 202:
		loc := first.header.Get("Location")
		if loc == "" || first.body["location"] != loc || first.header.Get("Retry-After") == "" {
			t.Fatalf("202 without a Location to poll: %v", first)
		}
		if again := s.post("/v1/deliveries", tok, "d-1", body); again.code != 202 || again.header.Get("Location") != loc {
			t.Fatalf("the same key while running: %v; want the 202 again", again)
		}
		deadline := time.Now().Add(time.Minute)
		for final = s.get(loc, tok); final.code == 202 && time.Now().Before(deadline); final = s.get(loc, tok) {
			time.Sleep(200 * time.Millisecond)
		}
		if other := s.get(loc, s.token(2)); other.code != 404 {
			t.Fatalf("another agent's delivery: %v; want 404", other)
		}
	case 200:
		final = first
	default:
		t.Fatalf("deliver: %v", first)
	}
	if final.code != 200 || final.body["outcome"] != "sent_verified" || !strings.HasPrefix(final.body["task"].(string), "agent-1/") {
		t.Fatalf("the delivery's result: %v; want sent_verified by agent-1's task", final)
	}
	second := s.post("/v1/deliveries", tok, "d-2", with(body, "task", "d2"))
	if second.code != 409 || second.body["kind"] != "consumed" || second.result()["gate"] != "sent_verified" {
		t.Fatalf("a new key for the delivered file: %v; want 409 consumed with the recorded outcome", second)
	}
	changed := with(body, "content", base64.StdEncoding.EncodeToString(append(content, '!')))
	if r := s.post("/v1/deliveries", tok, "d-2", changed); r.code != 422 {
		t.Fatalf("a changed file under the same key: %v; want 422", r)
	}
	for _, bad := range []map[string]any{with(body, "file_name", "../x.txt"), with(body, "content", ""), with(body, "to", "")} {
		if r := s.post("/v1/deliveries", tok, "bad-"+bad["file_name"].(string)+bad["to"].(string), bad); r.code != 400 {
			t.Fatalf("a bad delivery %v: %v; want 400", bad, r)
		}
	}
}

// TestServeDeliverWaitsWhenAsked: Prefer: wait=0 answers 202 at once.
func TestServeDeliverWaitsWhenAsked(t *testing.T) {
	s := startService(t, svcOptions{})
	name, content := fixtureFile(t, "verified-text-file")
	body := mustJSON(map[string]any{"to": "Bob", "file_name": name, "content": base64.StdEncoding.EncodeToString(content)})
	resp, err := s.raw(context.Background(), "POST", "/v1/deliveries", s.token(1), body, map[string]string{"Idempotency-Key": "w-1", "Prefer": "wait=0"})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 202 {
		t.Fatalf("Prefer: wait=0: %d; want 202", resp.StatusCode)
	}
	loc := resp.Header.Get("Location")
	deadline := time.Now().Add(time.Minute)
	a := s.get(loc, s.token(1))
	for ; a.code == 202 && time.Now().Before(deadline); a = s.get(loc, s.token(1)) {
		time.Sleep(200 * time.Millisecond)
	}
	if a.code != 200 || a.body["outcome"] != "sent_verified" || a.body["identity_strength"] != "weak" {
		t.Fatalf("the result: %v; want sent_verified (weak: a title only)", a)
	}
	// The same request again, as a client that lost the 202 would send it: the replay
	// is the delivery's result now, not the stored 202 (running).
	replay, err := s.raw(context.Background(), "POST", "/v1/deliveries", s.token(1), body, map[string]string{"Idempotency-Key": "w-1", "Prefer": "wait=0"})
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Body.Close()
	var got map[string]any
	json.NewDecoder(replay.Body).Decode(&got)
	if replay.StatusCode != 200 || got["outcome"] != "sent_verified" || got["dispatch_id"] != a.body["dispatch_id"] || replay.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the request replayed after the delivery ended: %d %v (replayed %q); want 200 with the delivery's sent_verified", replay.StatusCode, got, replay.Header.Get("Idempotent-Replayed"))
	}
}

// TestMCPForService: 'sendonce mcp --service' is an MCP server with no store of its
// own: it reads the agent's file and delivers through the service.
func TestMCPForService(t *testing.T) {
	s := startService(t, svcOptions{})
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte(s.token(1)+"\n"), 0o600)
	dir := t.TempDir()
	name, content := fixtureFile(t, "verified-text-file")
	file := filepath.Join(dir, name)
	os.WriteFile(file, content, 0o644)
	cmd := exec.Command(self(t), "mcp", "--service", s.base(), "--service-token-file", tokenFile, "--allow-dir", dir)
	cmd.Env = append(os.Environ(), "SENDONCE_AS_CLI=1")
	cmd.Stderr = os.Stderr
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "service-test"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := strings.Join(toolNames(t, cs), ","); strings.Contains(got, "verify_evidence") || !strings.Contains(got, "deliver") {
		t.Fatalf("tools in --service mode: %s; want deliver, status, show, reconcile and no verify_evidence", got)
	}
	args := map[string]any{"to": "Bob", "dest_id": "xmpp:bob@localhost", "file": file}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "deliver", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	out := structured(t, res)
	if out["outcome"] != "sent_verified" || out["this_call"] != true || out["decision"] != "granted" {
		t.Fatalf("deliver through the service: %v", out)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "deliver", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if again := structured(t, res); again["outcome"] != "sent_verified" || again["this_call"] != false || again["decision"] != "refused" {
		t.Fatalf("the same call again: %v; want the recorded outcome, refused", again)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "status", Arguments: map[string]any{"to": "Bob", "dest_id": "xmpp:bob@localhost", "file": file}})
	if err != nil {
		t.Fatal(err)
	}
	if st := structured(t, res); !strings.Contains(mustString(st), "sent_verified") {
		t.Fatalf("status through the service: %v", st)
	}
	// The service recorded the task under this token's name.
	show := s.get("/v1/show?to=Bob&dest_id=xmpp:bob@localhost&sha256="+sha256hex(string(content)), s.token(1))
	if !strings.Contains(show.text, `"agent-1/`) {
		t.Fatalf("the recorded task does not name the token: %v", show)
	}
}

func mustString(v any) string { return string(mustJSON(v)) }

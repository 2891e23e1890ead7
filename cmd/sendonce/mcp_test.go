//go:build cgo

package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpFixture is a store, a staging folder and the fixture's file in a folder the
// server allows, for an MCP server whose deliveries replay the fixture.
type mcpFixture struct {
	store, staging, dir, file, sum, fixture string
}

func newMCPFixture(t *testing.T, fixture string) mcpFixture {
	t.Helper()
	f := mcpFixture{store: newStore(t), fixture: filepath.Join("..", "..", "testdata", "fixtures", fixture)}
	f.dir, f.staging = t.TempDir(), filepath.Join(t.TempDir(), "staging")
	os.Mkdir(f.staging, 0o750)
	os.Chmod(f.staging, 0o750)
	files, _ := filepath.Glob(filepath.Join(f.fixture, "file", "*"))
	if len(files) != 1 {
		t.Fatalf("fixture %s has %d files", fixture, len(files))
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	f.file = filepath.Join(f.dir, filepath.Base(files[0]))
	os.WriteFile(f.file, b, 0o644)
	h := sha256.Sum256(b)
	f.sum = hex.EncodeToString(h[:])
	return f
}

func (f mcpFixture) args(extra ...string) []string {
	return append([]string{"mcp", "--store", f.store, "--replay", f.fixture, "--staging", f.staging, "--allow-dir", f.dir, "--sent-item-timeout", "2s"}, extra...)
}

// toolNames lists the tools the server offers the session.
func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	return names
}

func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %v", res.Content)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	json.Unmarshal(b, &out)
	return out
}

// TestMCPOverStdio: the SDK's client starts 'sendonce mcp' as a process and talks to
// it over stdio: a delivery is this call's; the same call again answers with the
// recorded outcome, this_call false.
func TestMCPOverStdio(t *testing.T) {
	f := newMCPFixture(t, "verified-text-file")
	cmd := exec.Command(self(t), f.args()...)
	cmd.Env = append(os.Environ(), "SENDONCE_AS_CLI=1")
	cmd.Stderr = os.Stderr
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	args := map[string]any{"to": "Bob", "dest_id": "xmpp:bob@localhost", "file": f.file}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "deliver", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	out := structured(t, res)
	if out["outcome"] != "sent_verified" || out["this_call"] != true || out["sha256"] != f.sum {
		t.Fatalf("deliver over stdio: %v", out)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "deliver", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	again := structured(t, res)
	if again["outcome"] != "sent_verified" || again["this_call"] != false || again["decision"] != "refused" {
		t.Fatalf("the same call again over stdio: %v", again)
	}
}

// bearer adds the token to every request.
type bearer struct{ token, host string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	if b.host != "" {
		r.Host = b.host
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpHTTP is a 'sendonce mcp --http' process on a loopback port: its URL, address and
// bearer token.
type mcpHTTP struct{ url, addr, token string }

// startMCPHTTP starts 'sendonce mcp --http' with args (and its token file) and env, and
// waits until it serves.
func startMCPHTTP(t *testing.T, args, env []string) mcpHTTP {
	t.Helper()
	token := strings.Repeat("s3cr3t-", 6)
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte(token+"\n"), 0o600)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(self(t), append(args, "--http", addr, "--token-file", tokenFile)...)
	cmd.Env = append(append(os.Environ(), "SENDONCE_AS_CLI=1"), env...)
	startServingMCP(t, cmd)
	return mcpHTTP{url: "http://" + addr + "/", addr: addr, token: token}
}

// startServingMCP starts cmd, a 'sendonce mcp --http', and waits until it says it
// serves; it is interrupted when the test ends.
func startServingMCP(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "serving streamable HTTP") {
				ready <- sc.Text()
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		t.Fatalf("%v did not start serving", cmd.Args)
	}
}

// TestMCPOverHTTP: 'sendonce mcp --http' on loopback requires the bearer token and
// refuses a request whose Host is not the listener's; a client with the token works.
func TestMCPOverHTTP(t *testing.T) {
	f := newMCPFixture(t, "verified-text-file")
	m := startMCPHTTP(t, f.args(), nil)
	url, addr, token := m.url, m.addr, m.token
	post := func(token, host string) int {
		req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if host != "" {
			req.Host = host
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	_, port, _ := net.SplitHostPort(addr)
	for _, c := range []struct {
		name, token, host string
		want              int
	}{
		{"no token", "", "", http.StatusUnauthorized},
		{"a wrong token", strings.Repeat("x", 42), "", http.StatusUnauthorized},
		{"a foreign Host", token, "evil.example:" + port, http.StatusForbidden},
		{"another port's Host", token, fmt.Sprintf("localhost:%d", 1), http.StatusForbidden},
	} {
		if got := post(c.token, c.host); got != c.want {
			t.Errorf("%s: HTTP %d; want %d", c.name, got, c.want)
		}
	}
	ctx := context.Background()
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token: token}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-test"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "status", Arguments: map[string]any{"to": "Bob", "file": f.file}})
	if err != nil {
		t.Fatal(err)
	}
	if out := structured(t, res); out["status"] != "free" {
		t.Fatalf("status over HTTP: %v", out)
	}
}

// TestMCPRefusesBadSetups: --http off loopback, without a token file, or with a token
// file others can read, is refused before anything starts.
func TestMCPRefusesBadSetups(t *testing.T) {
	store := newStore(t)
	open := filepath.Join(t.TempDir(), "token")
	os.WriteFile(open, []byte(strings.Repeat("t", 40)), 0o644)
	for name, args := range map[string][]string{
		"no token file":    {"mcp", "--store", store, "--http", "127.0.0.1:0"},
		"a readable token": {"mcp", "--store", store, "--http", "127.0.0.1:0", "--token-file", open},
		"not loopback":     {"mcp", "--store", store, "--http", "0.0.0.0:0", "--token-file", open},
	} {
		if out, code := cli(t, nil, args...); code != exitUsage {
			t.Errorf("%s: exit %d %s; want %d", name, code, out, exitUsage)
		}
	}
}

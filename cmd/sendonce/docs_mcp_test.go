//go:build cgo

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPHostSnippets: every MCP host configuration docs/mcp.md shows starts a server
// that answers, as the host would reach it: the stdio ones are started as written
// (sendonce being this test binary), the HTTP ones reach the server started by the
// page's own command lines; each lists the tools and says a file in the allowed folder
// is free to deliver. /home/me is a temporary folder, and the store is made first with
// `sendonce init`, as the page says.
func TestMCPHostSnippets(t *testing.T) {
	page := readDoc(t, "docs/mcp.md")
	home := t.TempDir()
	outbox := filepath.Join(home, "outbox")
	if err := os.Mkdir(outbox, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(outbox, "minutes.txt")
	os.WriteFile(file, []byte("minutes of Monday\n"), 0o600)
	env := []string{"HOME=" + home, "XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"), "SENDONCE_STORE=", "SENDONCE_STATE_DIR=", "DISPLAY="}
	if out, code := cli(t, env, "init"); code != 0 {
		t.Fatalf("init: %d %s", code, out)
	}
	real := strings.NewReplacer("/home/me", home)

	// The HTTP server, from the page's shell block: the token file made by its first
	// line, the server started by its second (on a free port in place of 8765).
	port := freePort(t)
	var shell []string
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "head -c 32 /dev/urandom") || strings.HasPrefix(line, "sendonce mcp --http") {
			shell = append(shell, real.Replace(strings.ReplaceAll(line, "127.0.0.1:8765", port)))
		}
	}
	if len(shell) != 2 {
		t.Fatalf("docs/mcp.md: want the token line and the server line, found %q", shell)
	}
	if out, err := exec.Command("bash", "-c", shell[0]).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v %s", shell[0], err, out)
	}
	token, err := os.ReadFile(filepath.Join(home, ".sendonce-token"))
	if err != nil {
		t.Fatal(err)
	}
	server := exec.Command(self(t), strings.Fields(shell[1])[1:]...)
	server.Env = append(append(os.Environ(), "SENDONCE_AS_CLI=1"), env...)
	startServingMCP(t, server)

	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(page, -1)
	stdio, overHTTP := 0, 0
	for i, b := range blocks {
		var cfg map[string]map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
		}
		if err := json.Unmarshal([]byte(b[1]), &cfg); err != nil {
			t.Fatalf("snippet %d: %v\n%s", i, err, b[1])
		}
		servers := cfg["mcpServers"]
		if servers == nil {
			servers = cfg["servers"]
		}
		entry, ok := servers["sendonce"]
		if !ok {
			t.Fatalf("snippet %d names no sendonce server:\n%s", i, b[1])
		}
		var transport mcp.Transport
		switch {
		case entry.Command != "":
			if entry.Command != "sendonce" {
				t.Fatalf("snippet %d runs %q", i, entry.Command)
			}
			args := slices.Clone(entry.Args)
			for j := range args {
				args[j] = real.Replace(args[j])
			}
			cmd := exec.Command(self(t), args...)
			cmd.Env = append(append(os.Environ(), "SENDONCE_AS_CLI=1"), env...)
			transport = &mcp.CommandTransport{Command: cmd}
			stdio++
		case entry.URL != "":
			if entry.URL != "http://127.0.0.1:8765/" || entry.Headers["Authorization"] != "Bearer TOKEN" {
				t.Fatalf("snippet %d: %s %v: not the server the page starts", i, entry.URL, entry.Headers)
			}
			transport = &mcp.StreamableClientTransport{Endpoint: "http://" + port + "/",
				HTTPClient: &http.Client{Transport: bearer{token: strings.TrimSpace(string(token))}}}
			overHTTP++
		default:
			t.Fatalf("snippet %d has neither a command nor a url", i)
		}
		ctx := context.Background()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "docs-snippet"}, nil).Connect(ctx, transport, nil)
		if err != nil {
			t.Fatalf("snippet %d: %v", i, err)
		}
		names := toolNames(t, cs)
		if !slices.Contains(names, "deliver") || !slices.Contains(names, "status") {
			t.Errorf("snippet %d: tools %v", i, names)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "status", Arguments: map[string]any{"to": "Bob", "file": file}})
		if err != nil || res.IsError || !strings.Contains(toolText(res), `"free"`) {
			t.Errorf("snippet %d: status of a file in the allowed folder: %v %s", i, err, toolText(res))
		}
		cs.Close()
	}
	if stdio < 2 || overHTTP < 2 {
		t.Errorf("%d stdio and %d HTTP snippets run; the page shows at least two of each", stdio, overHTTP)
	}
}

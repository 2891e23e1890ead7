//go:build cgo

package main

import (
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServeWithoutADisplay: a service started with no display (DISPLAY unset, no
// --display) on a socket whose folder does not exist yet: it makes the folder (0755),
// says it has no display, and serves; the gate and status work, and a delivery is
// refused as bad input naming the display, before anything is claimed.
func TestServeWithoutADisplay(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "run", "sendonce", "sendonce.sock")
	s := startService(t, svcOptions{noDesktop: true, socket: socket})
	fi, err := os.Stat(filepath.Dir(socket))
	if err != nil || fi.Mode().Perm()&0o022 != 0 || fi.Mode().Perm()&0o055 != 0o055 {
		t.Fatalf("the socket's folder: %v %v; want it made, writable by the service's user alone, open to others' agents", fi.Mode(), err)
	}
	tok := s.token(1)
	name, content := fixtureFile(t, "verified-text-file")
	body := map[string]any{"to": "Bob", "dest_id": "xmpp:bob@localhost", "file_name": name, "content": base64.StdEncoding.EncodeToString(content), "task": "d1"}
	a := s.post("/v1/deliveries", tok, "d-1", body)
	if a.code != 400 || a.body["kind"] != "bad_input" || !strings.Contains(a.text, "display") {
		t.Fatalf("a delivery without a display: %d %s; want 400 bad_input naming the display", a.code, a.text)
	}
	if st := s.get("/v1/status?to=Bob&dest_id=xmpp:bob@localhost&sha256="+sha256hex(string(content)), tok); st.code != 200 || !strings.Contains(st.text, `"free"`) {
		t.Fatalf("after the refused delivery: %v; want the key free", st)
	}
	p := permitOf(t, s.post("/v1/claim", tok, "c1", claimBody("gate only", "one")))
	if r := s.post("/v1/record", tok, "r1", with(p, "outcome", "not_sent")); r.code != 200 {
		t.Fatalf("record without a display: %v", r)
	}
	if !strings.Contains(s.proc.errb.String(), "no display") {
		t.Errorf("the service did not say it has no display:\n%s", s.proc.errb.String())
	}
}

// TestMCPWithoutADisplay: 'sendonce mcp' with no display starts; its status tool
// answers, and its deliver tool answers bad input naming the display, with nothing
// claimed.
func TestMCPWithoutADisplay(t *testing.T) {
	f := newMCPFixture(t, "verified-text-file")
	cmd := exec.Command(self(t), "mcp", "--store", f.store, "--staging", f.staging, "--allow-dir", f.dir)
	cmd.Env = append(os.Environ(), "SENDONCE_AS_CLI=1", "DISPLAY=")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "no-display-test"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("mcp without a display: %v\n%s", err, stderr.String())
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "deliver", Arguments: map[string]any{"to": "Bob", "dest_id": "xmpp:bob@localhost", "file": f.file}})
	if err != nil {
		t.Fatal(err)
	}
	out := toolText(res)
	if !res.IsError || !strings.Contains(out, "bad_input") || !strings.Contains(out, "display") {
		t.Fatalf("deliver without a display: %s; want a bad_input tool error naming the display", out)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "status", Arguments: map[string]any{"to": "Bob", "dest_id": "xmpp:bob@localhost", "file": f.file}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || !strings.Contains(toolText(res), `"free"`) {
		t.Fatalf("status after the refused delivery: %s; want free", toolText(res))
	}
}

// toolText is a tool result's text content.
func toolText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

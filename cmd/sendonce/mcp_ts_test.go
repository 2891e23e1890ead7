//go:build cgo

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Tests through a client nobody here wrote: the official TypeScript MCP SDK, with its
// defaults (no roots capability), over stdio and over streamable HTTP. The client is
// testdata/mcp-client (installed by scripts/setup-deps); it reports what it saw, and
// these tests judge it.

// tsServer is how the TypeScript client reaches a sendonce MCP server: the command line
// it starts (stdio), or a URL and token (streamable HTTP).
type tsServer struct {
	command []string
	env     []string
	http    *mcpHTTP
}

// runTSClient runs one scenario of testdata/mcp-client/client.mjs and returns what the
// client printed.
func runTSClient(t *testing.T, srv tsServer, scenario string, args any) map[string]any {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "testdata", "mcp-client"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatalf("the TypeScript MCP SDK is not installed in %s (scripts/setup-deps installs it): %v", dir, err)
	}
	a, _ := json.Marshal(args)
	cmd := exec.Command("node", filepath.Join(dir, "client.mjs"), scenario)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "MCP_ARGS="+string(a)), srv.env...)
	if srv.http != nil {
		cmd.Env = append(cmd.Env, "MCP_TRANSPORT=http", "MCP_URL="+srv.http.url, "MCP_TOKEN="+srv.http.token)
	} else {
		c, _ := json.Marshal(srv.command)
		cmd.Env = append(cmd.Env, "MCP_TRANSPORT=stdio", "MCP_COMMAND="+string(c), "SENDONCE_AS_CLI=1")
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("the TypeScript client (%s): %v\n%s\n%s", scenario, err, stdout.String(), stderr.String())
	}
	var out map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("the TypeScript client printed %q: %v\n%s", stdout.String(), err, stderr.String())
	}
	t.Logf("TypeScript client, %s over %s, in %v: %s", scenario, map[bool]string{true: "streamable HTTP", false: "stdio"}[srv.http != nil], time.Since(start).Round(time.Millisecond), stdout.String())
	return out
}

// toolAnswer is one call's answer as the client saw it.
func toolAnswer(t *testing.T, out map[string]any, name string) (isError bool, text string, protocolErr map[string]any) {
	t.Helper()
	a, ok := out[name].(map[string]any)
	if !ok {
		t.Fatalf("the client reported no %s: %v", name, out)
	}
	pe, _ := a["protocolError"].(map[string]any)
	isError, _ = a["isError"].(bool)
	text, _ = a["text"].(string)
	return isError, text, pe
}

// TestTypeScriptClientContract: what an agent on the TypeScript SDK gets, over stdio and
// streamable HTTP: the tools listed; a file outside the allowed folders is a bad_input
// tool result (the server never asks a client without roots for them); status and show
// never hash a file outside them, nor tell whether it exists; an unknown, missing or
// mistyped argument is a bad_input tool result naming the field; a delivery (replayed)
// is this call's, and the same call again is refused with the recorded outcome; and no
// call leaves the client a stray message.
func TestTypeScriptClientContract(t *testing.T) {
	for _, name := range []string{"stdio", "streamable HTTP"} {
		t.Run(name, func(t *testing.T) {
			f := newMCPFixture(t, "verified-text-file")
			secrets := t.TempDir()
			outside := filepath.Join(secrets, "workstation.key")
			os.WriteFile(outside, []byte("a private key"), 0o600)
			args := map[string]any{"outside": outside, "missing": filepath.Join(secrets, "nothing.here"), "inside": f.file}
			srv := tsServer{command: append([]string{self(t)}, f.args()...)}
			if name == "streamable HTTP" {
				srv = tsServer{http: ptrTo(startMCPHTTP(t, f.args(), nil))}
			}
			out := runTSClient(t, srv, "contract", args)
			if tools, _ := out["tools"].([]any); len(tools) < 5 || !slices.Contains(tools, any("deliver")) || !slices.Contains(tools, any("status")) {
				t.Errorf("tools/list: %v", out["tools"])
			}
			for call, want := range map[string]map[string]any{
				"deliverInside": {"outcome": "sent_verified", "this_call": true, "decision": "granted"},
				"deliverAgain":  {"outcome": "sent_verified", "this_call": false, "decision": "refused"},
			} {
				answer, _ := out[call].(map[string]any)
				got, _ := answer["structured"].(map[string]any)
				for k, v := range want {
					if got[k] != v {
						t.Errorf("%s: %s is %v; want %v (%v)", call, k, got[k], v, answer)
					}
				}
			}
			for _, c := range []struct{ call, want string }{
				{"deliverOutside", "bad_input: file: " + outside + " is outside"},
				{"statusOutside", "bad_input: file: " + outside + " is outside"},
				{"showOutside", "bad_input: file: " + outside + " is outside"},
				{"unknownField", "bad_input: colour: is not an argument of deliver"},
				{"missingField", "bad_input: file: is required"},
				{"wrongType", "bad_input: key: must be a JSON string"},
			} {
				isError, text, pe := toolAnswer(t, out, c.call)
				if pe != nil || !isError || !strings.HasPrefix(text, c.want) {
					t.Errorf("%s: tool error %v %q, protocol error %v; want a tool result %q", c.call, isError, text, pe, c.want)
				}
				if strings.Contains(text, "a private key") {
					t.Errorf("%s: the answer holds the file's contents", c.call)
				}
			}
			_, outsideText, _ := toolAnswer(t, out, "statusOutside")
			_, missingText, _ := toolAnswer(t, out, "statusMissing")
			if strings.ReplaceAll(missingText, args["missing"].(string), outside) != outsideText {
				t.Errorf("a file outside that exists answers %q, one that does not %q: the answer tells which exists", outsideText, missingText)
			}
			if isError, text, pe := toolAnswer(t, out, "statusInside"); isError || pe != nil || !strings.Contains(text, f.sum) {
				t.Errorf("status of the file inside: %v %q %v; want its key (SHA-256 %s)", isError, text, pe, f.sum)
			}
			if errs, _ := out["clientErrors"].([]any); len(errs) != 0 {
				t.Errorf("the client's protocol layer reported %v", errs)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestLiveTypeScriptClientCancels: an agent on the TypeScript SDK cancels its delivery
// (the SDK sends notifications/cancelled) as the first steps run, over stdio and over
// streamable HTTP. Nothing more reaches the client for that call: no progress and no
// response (the SDK would report either as a message for an unknown request). The
// delivery stops before any boundary: not_sent, with the cancellation as the recorded
// cause, and the server holds no copy.
func TestLiveTypeScriptClientCancels(t *testing.T) {
	for _, transport := range []string{"stdio", "streamable HTTP"} {
		t.Run(transport, func(t *testing.T) {
			l := newLive(t)
			file, sum := l.file("ts-cancel.txt")
			args := []string{"mcp", "--store", l.store, "--display", l.bed.display(t), "--staging", l.bed.staging(t), "--allow-dir", l.dir}
			srv := tsServer{command: append([]string{self(t)}, args...), env: liveEnv}
			if transport != "stdio" {
				srv = tsServer{http: ptrTo(startMCPHTTP(t, args, liveEnv))}
			}
			before := uploads(t, l.uploadDir())
			out := runTSClient(t, srv, "cancel", map[string]any{"file": file, "dest_id": "xmpp:bob@localhost", "abortOn": "open start chat", "waitMs": 4000})
			if out["aborted"] != true {
				t.Fatalf("the client never saw the step it cancels at: %v", out)
			}
			if _, _, pe := toolAnswer(t, out, "answer"); pe == nil || !strings.Contains(fmt.Sprint(pe["message"]), "the agent gave up") {
				t.Errorf("the cancelled call answered %v; want the client's own abort", out["answer"])
			}
			if after, _ := out["progressAfter"].([]any); len(after) != 0 {
				t.Errorf("progress after the cancel: %v", after)
			}
			if errs, _ := out["clientErrors"].([]any); len(errs) != 0 {
				t.Errorf("the client received messages for the cancelled call: %v", errs)
			}
			_, show, _ := toolAnswer(t, out, "show")
			var st map[string]any
			json.Unmarshal([]byte(show), &st)
			if st["status"] != "not_sent" {
				t.Errorf("after the cancel: %s; want not_sent", show)
			}
			// The bundle records why the step stopped: the cancellation.
			for _, a := range attemptsOf(t, st) {
				steps, err := os.ReadFile(filepath.Join(fmt.Sprint(a["evidence"]), "steps.jsonl"))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(steps), "context canceled") || strings.Contains(string(steps), "keyboard focus") {
					t.Errorf("the evidence of the cancelled attempt does not name the cancellation as its cause:\n%s", steps)
				}
			}
			time.Sleep(time.Second)
			if n := countSHA(newUploads(before, uploads(t, l.uploadDir())), sum); n != 0 {
				t.Errorf("the server holds %d copies of the cancelled file", n)
			}
		})
	}
}

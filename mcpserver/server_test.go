package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sendonce/sendonce"
)

// testServer is a store in a temporary folder and the MCP server over it, connected to
// a client through in-memory transports.
type testServer struct {
	srv  *Server
	cs   *mcp.ClientSession
	work string
}

func newTestServer(t *testing.T, configure func(*Server), roots ...string) *testServer {
	t.Helper()
	return newTestServerFor(t, configure, nil, roots...)
}

// newTestServerFor is newTestServer with a client of these options (nil: the SDK's
// defaults, which declare the roots capability).
func newTestServerFor(t *testing.T, configure func(*Server), opts *mcp.ClientOptions, roots ...string) *testServer {
	t.Helper()
	ctx := context.Background()
	work := t.TempDir()
	loc := filepath.Join(work, "sendonce.db")
	if _, err := sendonce.Init(ctx, loc, sendonce.InitRequest{}, sendonce.Options{}); err != nil {
		t.Fatal(err)
	}
	c, err := sendonce.Open(ctx, loc, sendonce.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s := &Server{Client: c, Version: "test"}
	if configure != nil {
		configure(s)
	}
	st, ct := mcp.NewInMemoryTransports()
	if _, err := s.New().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test"}, opts)
	for _, r := range roots {
		client.AddRoots(&mcp.Root{URI: "file://" + r})
	}
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return &testServer{srv: s, cs: cs, work: work}
}

func (ts *testServer) call(t *testing.T, name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := ts.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out map[string]any
	if b, err := json.Marshal(res.StructuredContent); err == nil {
		json.Unmarshal(b, &out)
	}
	return res, out
}

func errorText(res *mcp.CallToolResult) string {
	if !res.IsError || len(res.Content) == 0 {
		return ""
	}
	t, _ := res.Content[0].(*mcp.TextContent)
	if t == nil {
		return ""
	}
	return t.Text
}

// TestToolsAndAnnotations: the tools, with the annotations the spec defines and a typed
// output schema each; the gate tools only when asked for.
func TestToolsAndAnnotations(t *testing.T) {
	for _, gateTools := range []bool{false, true} {
		ts := newTestServer(t, func(s *Server) { s.GateTools = gateTools })
		res, err := ts.cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		tools := map[string]*mcp.Tool{}
		for _, tool := range res.Tools {
			tools[tool.Name] = tool
			if tool.OutputSchema == nil || tool.InputSchema == nil || tool.Annotations == nil {
				t.Errorf("%s: no typed input, output or annotations", tool.Name)
			}
		}
		want := []string{"deliver", "status", "show", "reconcile", "verify_evidence"}
		if gateTools {
			want = append(want, "claim", "check", "cross", "renew", "record")
		}
		if len(tools) != len(want) {
			t.Fatalf("gate tools %v: %d tools; want %v", gateTools, len(tools), want)
		}
		for _, name := range want {
			if tools[name] == nil {
				t.Fatalf("no tool %s", name)
			}
		}
		for _, name := range []string{"status", "show", "verify_evidence"} {
			if !tools[name].Annotations.ReadOnlyHint {
				t.Errorf("%s is not read-only", name)
			}
		}
		d := tools["deliver"].Annotations
		if d.ReadOnlyHint || d.DestructiveHint == nil || *d.DestructiveHint || !d.IdempotentHint || d.OpenWorldHint == nil || !*d.OpenWorldHint {
			t.Errorf("deliver annotations %+v; want not destructive, idempotent, open-world", d)
		}
		if !strings.Contains(tools["deliver"].Description, "do not send it again with this or any other tool") {
			t.Errorf("the deliver description does not say what send_status_unknown means")
		}
		if gateTools && !strings.Contains(tools["cross"].Description, "record send_status_unknown") {
			t.Errorf("the gate tools do not say to record send_status_unknown when unsure")
		}
	}
}

func TestStatusAndBadInput(t *testing.T) {
	ts := newTestServer(t, nil)
	const key = "v2:xmpp:bob@localhost:8a3c67892f82af22b58377b8e85bb41899053788d3aa3b81d2e6b4580e917c29"
	res, out := ts.call(t, "status", map[string]any{"key": key})
	if res.IsError || out["status"] != "free" {
		t.Fatalf("status: %+v %v", res, out)
	}
	res, _ = ts.call(t, "status", map[string]any{"key": "nonsense"})
	if !strings.HasPrefix(errorText(res), "bad_input:") {
		t.Fatalf("a malformed key: %q; want a bad_input tool error", errorText(res))
	}
}

// TestArgumentsAreBadInput: an unknown argument, a missing one and one of the wrong type
// are bad_input tool errors that name the field, as the CLI and the HTTP service name
// it, on every tool.
func TestArgumentsAreBadInput(t *testing.T) {
	ts := newTestServer(t, func(s *Server) { s.GateTools = true })
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"status", map[string]any{"colour": "red"}, `bad_input: colour: is not an argument of status, which takes dest_id, file, key, to`},
		{"deliver", map[string]any{"to": "Bob", "file": "/x", "path": "/etc/passwd"}, `bad_input: path: is not an argument of deliver`},
		{"deliver", map[string]any{"to": "Bob"}, `bad_input: file: is required`},
		{"claim", map[string]any{"to": "Bob", "file": "/x"}, `bad_input: task: is required`},
		{"status", map[string]any{"key": 7}, `bad_input: key: must be a JSON string, not number`},
		{"renew", map[string]any{"key": "k", "task": "t", "token": "seven"}, `bad_input: token: must be a JSON number, not string`},
	} {
		res, err := ts.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Errorf("%s %v: a protocol error %v; want a bad_input tool result", c.tool, c.args, err)
			continue
		}
		if got := errorText(res); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s %v: %q; want %q", c.tool, c.args, got, c.want)
		}
	}
}

// TestStatusKeepsToTheFolders: status and show with a file hold it to deliver's folder
// rules before touching it: a file outside is never hashed, and the answer for one that
// exists reads as the answer for one that does not.
func TestStatusKeepsToTheFolders(t *testing.T) {
	allowed := t.TempDir()
	ts := newTestServer(t, func(s *Server) { s.AllowDirs = []string{allowed} })
	secret := filepath.Join(t.TempDir(), "key.pem")
	os.WriteFile(secret, []byte("private"), 0o600)
	missing := filepath.Join(filepath.Dir(secret), "missing.pem")
	inside := filepath.Join(allowed, "r.txt")
	os.WriteFile(inside, []byte("r"), 0o644)
	for _, tool := range []string{"status", "show"} {
		res, out := ts.call(t, tool, map[string]any{"to": "Bob", "file": secret})
		text := errorText(res)
		if !strings.HasPrefix(text, "bad_input: file: ") || out["key"] != nil || strings.Contains(text, "private") {
			t.Errorf("%s of a file outside: %q %v; want bad_input and no key", tool, text, out)
		}
		res, _ = ts.call(t, tool, map[string]any{"to": "Bob", "file": missing})
		if other := errorText(res); strings.ReplaceAll(other, missing, secret) != text {
			t.Errorf("%s: a file outside that exists answers %q, one that does not %q: the answer tells which exists", tool, text, other)
		}
		if res, out := ts.call(t, tool, map[string]any{"to": "Bob", "file": inside}); res.IsError || out["status"] != "free" {
			t.Errorf("%s of a file inside: %q %v; want free", tool, errorText(res), out)
		}
	}
}

// TestRootsAskedOnlyWhenDeclared: a client that declared no roots capability (the
// TypeScript SDK's default) is never asked for roots: a file outside the allowed folders
// is a bad_input tool result. A client with roots is asked, and a file under one of them
// is accepted.
func TestRootsAskedOnlyWhenDeclared(t *testing.T) {
	rootDir := t.TempDir()
	f := filepath.Join(rootDir, "r.txt")
	os.WriteFile(f, []byte("r"), 0o644)
	none := newTestServerFor(t, nil, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	res, err := none.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "status", Arguments: map[string]any{"to": "Bob", "file": f}})
	if err != nil || !strings.HasPrefix(errorText(res), "bad_input: file: ") || len(res.InputRequests) != 0 {
		t.Fatalf("a client without roots: %v %+v; want a bad_input tool result", err, res)
	}
	// Roots sent unasked, by a client that declared none, count for nothing.
	res, err = none.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "status", Arguments: map[string]any{"to": "Bob", "file": f},
		InputResponses: mcp.InputResponseMap{"roots": &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: "file:///"}}}}, RequestState: "roots"})
	if err != nil || !strings.HasPrefix(errorText(res), "bad_input: file: ") {
		t.Fatalf("a client without roots sending roots unasked: %v %q; want bad_input", err, errorText(res))
	}
	with := newTestServer(t, nil, rootDir)
	if res, out := with.call(t, "status", map[string]any{"to": "Bob", "file": f}); res.IsError || out["status"] != "free" {
		t.Fatalf("a client with the file's folder as a root: %q %v; want free", errorText(res), out)
	}
}

// TestDeliverWithoutDesktop: in a build without cgo there is no Deliverer; deliver says
// so and nothing is claimed, the other tools work.
func TestDeliverWithoutDesktop(t *testing.T) {
	dir := t.TempDir()
	ts := newTestServer(t, func(s *Server) { s.AllowDirs = []string{dir} })
	f := filepath.Join(dir, "r.txt")
	os.WriteFile(f, []byte("x"), 0o644)
	res, _ := ts.call(t, "deliver", map[string]any{"to": "Bob", "file": f})
	if !strings.Contains(errorText(res), "needs the desktop build") {
		t.Fatalf("deliver without a desktop: %q", errorText(res))
	}
	_, out := ts.call(t, "status", map[string]any{"to": "Bob", "file": f})
	if out["status"] != "free" {
		t.Fatalf("after the refused deliver the key is %v; want free (nothing claimed)", out["status"])
	}
}

// TestGateToolsRefusalIsAResult: a second claim for a held key is a decision, not a tool
// error; bad input is a tool error.
func TestGateToolsRefusalIsAResult(t *testing.T) {
	dir := t.TempDir()
	ts := newTestServer(t, func(s *Server) { s.GateTools = true; s.AllowDirs = []string{dir} })
	f := filepath.Join(dir, "r.txt")
	os.WriteFile(f, []byte("report"), 0o644)
	res, out := ts.call(t, "claim", map[string]any{"to": "Bob", "file": f, "task": "A"})
	if res.IsError || out["decision"] != "granted" {
		t.Fatalf("first claim: %q %v", errorText(res), out)
	}
	// The claim records the name and size of the file it opened (an MCP claim hands
	// over the open file: it recorded no name).
	_, shown := ts.call(t, "show", map[string]any{"to": "Bob", "file": f})
	if b, _ := json.Marshal(shown); !strings.Contains(string(b), `"file_name":"r.txt"`) || !strings.Contains(string(b), `"size":6,`) {
		t.Errorf("show after the claim: %s; want the attempt's file_name r.txt and size 6", b)
	}
	res, out = ts.call(t, "claim", map[string]any{"to": "Bob", "file": f, "task": "B"})
	if res.IsError || out["decision"] != "refused" {
		t.Fatalf("second claim: %q %v; want a refusal as a result", errorText(res), out)
	}
	res, _ = ts.call(t, "claim", map[string]any{"to": "Bob", "file": "r.txt", "task": "C"})
	if !strings.HasPrefix(errorText(res), "bad_input:") {
		t.Fatalf("a relative path: %q; want bad_input", errorText(res))
	}
}

// TestPathsAreChecked: only absolute paths of regular files under an allowed folder or
// a client root, opened beneath it with no link followed: a link is refused wherever it
// leads, and a path with . or .. is refused by its name.
func TestPathsAreChecked(t *testing.T) {
	allowed, other := t.TempDir(), t.TempDir()
	ts := newTestServer(t, func(s *Server) { s.AllowDirs = []string{allowed} })
	in := filepath.Join(allowed, "in.txt")
	out := filepath.Join(other, "out.txt")
	os.WriteFile(in, []byte("in"), 0o644)
	os.WriteFile(out, []byte("out"), 0o644)
	os.Symlink(out, filepath.Join(allowed, "link.txt"))
	os.Symlink(in, filepath.Join(allowed, "inner-link.txt"))
	os.Mkdir(filepath.Join(other, "sub"), 0o755)
	os.Symlink(filepath.Join(other, "sub"), filepath.Join(allowed, "dirlink"))
	for _, c := range []struct{ path, want string }{
		{in, ""},
		{allowed + "//in.txt", ""},
		{out, "outside the client's roots and the allowed folders"},
		{filepath.Join(allowed, "link.txt"), "is a link"},
		{filepath.Join(allowed, "inner-link.txt"), "is a link"},
		{allowed, "is a folder"},
		{"in.txt", "absolute path"},
		{filepath.Join(allowed, "missing.txt"), "no such file"},
		{allowed + "/dirlink/../out.txt", "without . or .."},
		{allowed + "/dirlink/x.txt", "is a link"},
		{allowed + "/./in.txt", "without . or .."},
		{filepath.Join(other, "missing.txt"), "outside the client's roots and the allowed folders"},
		{allowed + "/../" + filepath.Base(other) + "/out.txt", "without . or .."},
	} {
		f, ask, err := ts.srv.openPath(nil, c.path)
		switch {
		case ask != nil:
			t.Errorf("%s: asked for roots without a session", c.path)
		case c.want == "" && err != nil:
			t.Errorf("%s: %v; want it opened", c.path, err)
		case c.want == "":
			b, _ := io.ReadAll(f)
			f.Close()
			if string(b) != "in" {
				t.Errorf("%s: read %q; want the file inside", c.path, b)
			}
		case err == nil || !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: %v; want %q", c.path, err, c.want)
		}
	}
}

// TestAllowedFolderOthersCanWrite: an allowed folder (or a root) that another user can
// write is refused, as a staging folder is, and so is a folder on the way to the file;
// the refusal says how to fix it.
func TestAllowedFolderOthersCanWrite(t *testing.T) {
	allowed := t.TempDir()
	ts := newTestServer(t, func(s *Server) { s.AllowDirs = []string{allowed} })
	f := filepath.Join(allowed, "r.txt")
	os.WriteFile(f, []byte("r"), 0o644)
	os.Chmod(allowed, 0o777)
	res, out := ts.call(t, "status", map[string]any{"to": "Bob", "file": f})
	if text := errorText(res); !strings.HasPrefix(text, "bad_input: file: ") || !strings.Contains(text, "chmod go-w "+allowed) || out["key"] != nil {
		t.Errorf("an allowed folder everyone can write: %q %v; want bad_input naming chmod go-w", text, out)
	}
	os.Chmod(allowed, 0o700)
	sub := filepath.Join(allowed, "shared")
	os.Mkdir(sub, 0o700)
	os.Chmod(sub, 0o770)
	os.WriteFile(filepath.Join(sub, "r.txt"), []byte("r"), 0o644)
	res, _ = ts.call(t, "status", map[string]any{"to": "Bob", "file": filepath.Join(sub, "r.txt")})
	if text := errorText(res); !strings.HasPrefix(text, "bad_input: file: ") || !strings.Contains(text, "writable by its group") {
		t.Errorf("a group-writable folder on the way: %q; want bad_input", text)
	}
	if res, out := ts.call(t, "status", map[string]any{"to": "Bob", "file": f}); res.IsError || out["status"] != "free" {
		t.Errorf("the folder made private again: %q %v; want free", errorText(res), out)
	}
}

// TestMatrixDestinations: a matrix: destination id is taken as any other provider id:
// claimed in its canonical form (the user's localpart and server in lower case), and a
// second claim of the same room's other spelling is refused.
func TestMatrixDestinations(t *testing.T) {
	dir := t.TempDir()
	ts := newTestServer(t, func(s *Server) { s.GateTools = true; s.AllowDirs = []string{dir} })
	f := filepath.Join(dir, "r.txt")
	os.WriteFile(f, []byte("report"), 0o644)
	res, out := ts.call(t, "claim", map[string]any{"to": "Bob", "dest_id": "matrix:@Bob:LocalHost", "file": f, "task": "A"})
	if res.IsError || out["decision"] != "granted" || !strings.HasPrefix(fmt.Sprint(out["key"]), "v2:matrix:@bob%3Alocalhost:") || out["identity_strength"] != "strong" {
		t.Fatalf("a claim to matrix:@Bob:LocalHost: %q %v", errorText(res), out)
	}
	res, out = ts.call(t, "claim", map[string]any{"to": "Bob", "dest_id": "matrix:@bob:localhost", "file": f, "task": "B"})
	if res.IsError || out["decision"] != "refused" {
		t.Fatalf("the same user spelled otherwise: %q %v; want refused", errorText(res), out)
	}
	res, _ = ts.call(t, "claim", map[string]any{"to": "Bob", "dest_id": "matrix:#room:localhost", "file": f, "task": "C"})
	if !strings.HasPrefix(errorText(res), "bad_input:") || !strings.Contains(errorText(res), "dest_id") {
		t.Fatalf("a room alias: %q; want bad_input naming dest_id", errorText(res))
	}
}

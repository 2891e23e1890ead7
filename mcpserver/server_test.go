package mcpserver

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sendonce/sendonce"
)

func connect(t *testing.T) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	loc := filepath.Join(t.TempDir(), "sendonce.db")
	if _, err := sendonce.Init(ctx, loc, sendonce.InitRequest{}, sendonce.Options{}); err != nil {
		t.Fatal(err)
	}
	c, err := sendonce.Open(ctx, loc, sendonce.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	st, ct := mcp.NewInMemoryTransports()
	if _, err := (&Server{Client: c, Version: "test"}).New().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestReadOnlyToolsAreAnnotated(t *testing.T) {
	cs := connect(t)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Annotations == nil || !tool.Annotations.ReadOnlyHint || tool.OutputSchema == nil {
			t.Errorf("%s: annotations %+v, output schema %v; want read-only with a typed output", tool.Name, tool.Annotations, tool.OutputSchema)
		}
	}
	if len(res.Tools) != 3 {
		t.Fatalf("%d tools", len(res.Tools))
	}
}

func TestStatusOfAFreeKeyAndBadInput(t *testing.T) {
	cs := connect(t)
	ctx := context.Background()
	const key = "v2:xmpp:bob@localhost:8a3c67892f82af22b58377b8e85bb41899053788d3aa3b81d2e6b4580e917c29"
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "status", Arguments: map[string]any{"key": key}})
	if err != nil || res.IsError {
		t.Fatalf("status: %v %+v", err, res)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(b), `"status":"free"`) {
		t.Fatalf("structured content %s; want status free", b)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "status", Arguments: map[string]any{"key": "nonsense"}})
	if err != nil || !res.IsError || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "bad_input:") {
		t.Fatalf("a malformed key: %v %+v; want a bad_input tool error", err, res)
	}
}

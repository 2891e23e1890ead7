package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCancelledCallsGetNothingMore: after the client's notifications/cancelled, the
// server sends nothing more for that call (no progress, no response), while other calls
// are answered; without SilenceCancelled the SDK sends the cancelled call's response.
func TestCancelledCallsGetNothingMore(t *testing.T) {
	for _, silenced := range []bool{true, false} {
		srv := mcp.NewServer(&mcp.Implementation{Name: "t"}, nil)
		stopped := make(chan struct{})
		// wait sends progress every 20 ms until its call is cancelled, then answers.
		srv.AddTool(&mcp.Tool{Name: "wait", InputSchema: &jsonschema.Schema{Type: "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for n := 1; ctx.Err() == nil; n++ {
				req.Session.NotifyProgress(context.WithoutCancel(ctx), &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(n)})
				time.Sleep(20 * time.Millisecond)
			}
			// Like the SDK, a handler may still send after its ctx ended.
			req.Session.NotifyProgress(context.WithoutCancel(ctx), &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: -1})
			close(stopped)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
		st, ct := mcp.NewInMemoryTransports()
		var server mcp.Transport = st
		if silenced {
			server = SilenceCancelled(st)
		}
		ctx := context.Background()
		ss, err := srv.Connect(ctx, server, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ss.Close()
		conn, err := ct.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		send := func(id any, method string, params any) {
			p, _ := json.Marshal(params)
			var msg jsonrpc.Message = &jsonrpc.Request{Method: method, Params: p}
			if id != nil {
				rid, _ := jsonrpc.MakeID(id)
				msg = &jsonrpc.Request{ID: rid, Method: method, Params: p}
			}
			if err := conn.Write(ctx, msg); err != nil {
				t.Fatal(err)
			}
		}
		msgs := make(chan jsonrpc.Message, 1000)
		go func() {
			for {
				m, err := conn.Read(ctx)
				if err != nil {
					close(msgs)
					return
				}
				msgs <- m
			}
		}()
		send(float64(0), "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}})
		<-msgs
		send(nil, "notifications/initialized", map[string]any{})
		send(float64(1), "tools/call", map[string]any{"name": "wait", "arguments": map[string]any{}, "_meta": map[string]any{"progressToken": "p1"}})
		<-msgs // the first progress: the call is running
		send(nil, "notifications/cancelled", map[string]any{"requestId": 1, "reason": "the agent gave up"})
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
			t.Fatal("the cancelled handler did not stop")
		}
		send(float64(2), "ping", map[string]any{})
		var late []string
	read:
		for {
			select {
			case m := <-msgs:
				b, _ := jsonrpc.EncodeMessage(m)
				if r, ok := m.(*jsonrpc.Response); ok && r.ID.Raw() == int64(2) {
					break read
				}
				if _, response := m.(*jsonrpc.Response); response || strings.Contains(string(b), `"progress":-1`) {
					late = append(late, string(b))
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no answer to the ping after the cancel")
			}
		}
		switch {
		case silenced && len(late) != 0:
			t.Errorf("after the cancel the server sent %v; want nothing for the cancelled call", late)
		case !silenced && len(late) == 0:
			t.Errorf("without SilenceCancelled nothing came after the cancel: the test no longer shows what it guards against")
		}
	}
}

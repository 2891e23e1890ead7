package mcpserver

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// waitServer has one tool, wait, which sends progress every 20 ms until its call is
// cancelled, then answers (as the SDK lets a handler answer after its ctx ended);
// stopped is closed when it answered.
func waitServer() (*mcp.Server, chan struct{}) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "t"}, nil)
	stopped := make(chan struct{})
	srv.AddTool(&mcp.Tool{Name: "wait", InputSchema: &jsonschema.Schema{Type: "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for n := 1; ctx.Err() == nil; n++ {
			req.Session.NotifyProgress(context.WithoutCancel(ctx), &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(n)})
			time.Sleep(20 * time.Millisecond)
		}
		req.Session.NotifyProgress(context.WithoutCancel(ctx), &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: -1})
		close(stopped)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	})
	return srv, stopped
}

// rawClient speaks newline-delimited JSON-RPC to a server over pipes.
type rawClient struct {
	t     *testing.T
	w     io.Writer
	lines chan string
}

func stdioClient(t *testing.T, silenced bool) (*rawClient, chan struct{}) {
	t.Helper()
	srv, stopped := waitServer()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var tr mcp.Transport = &mcp.IOTransport{Reader: inR, Writer: outW}
	if silenced {
		tr = SilenceCancelledStdio(inR, outW)
	}
	ss, err := srv.Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close(); inW.Close() })
	c := &rawClient{t: t, w: inW, lines: make(chan string, 1000)}
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	return c, stopped
}

func (c *rawClient) send(line string) {
	if _, err := io.WriteString(c.w, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

// until reads lines until one holds want, and returns those before it.
func (c *rawClient) until(want string) []string {
	c.t.Helper()
	var before []string
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				c.t.Fatalf("the server closed before %s", want)
			}
			if strings.Contains(l, want) {
				return before
			}
			before = append(before, l)
		case <-time.After(5 * time.Second):
			c.t.Fatalf("no %s from the server; it sent %v", want, before)
		}
	}
}

func (c *rawClient) initialize(version string) {
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	c.until(`"id":0`)
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
}

// late are the lines for the cancelled call 1 (its response, its progress after the
// cancel).
func late(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, `"id":1,`) || strings.Contains(l, `"progress":-1`) {
			out = append(out, l)
		}
	}
	return out
}

// TestCancelledCallsGetNothingMore: after the client's notifications/cancelled, the
// stdio server sends nothing more for that call (no progress, no response), while other
// calls are answered; without the decorator the SDK sends the cancelled call's response.
func TestCancelledCallsGetNothingMore(t *testing.T) {
	for _, silenced := range []bool{true, false} {
		c, stopped := stdioClient(t, silenced)
		c.initialize("2025-06-18")
		c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait","arguments":{},"_meta":{"progressToken":"p1"}}}`)
		c.until(`"progressToken":"p1"`)
		c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"the agent gave up"}}`)
		<-stopped
		c.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
		got := late(c.until(`"id":2`))
		switch {
		case silenced && len(got) != 0:
			t.Errorf("after the cancel the server sent %v; want nothing for the cancelled call", got)
		case !silenced && len(got) == 0:
			t.Errorf("without the decorator nothing came after the cancel: the test no longer shows what it guards against")
		}
	}
}

// TestCancelledCallInABatch: in a batch (an older protocol's), the cancelled call's
// response is left out of the batch's answer and the other call's is kept.
func TestCancelledCallInABatch(t *testing.T) {
	c, stopped := stdioClient(t, true)
	c.initialize("2025-03-26")
	c.send(`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait","arguments":{},"_meta":{"progressToken":7}}},{"jsonrpc":"2.0","id":3,"method":"ping"}]`)
	c.until(`"progressToken":7`)
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	<-stopped
	before := c.until(`"id":3`)
	if got := late(before); len(got) != 0 {
		t.Fatalf("the batch's answer holds the cancelled call: %v", got)
	}
}

// TestATokenThatIsNoKey: a progress token the client sends as an object (no valid
// token, and no valid map key) crashes nothing: its progress goes out, the call is
// cancelled like any other, and the server answers the next call.
func TestATokenThatIsNoKey(t *testing.T) {
	c, stopped := stdioClient(t, true)
	c.initialize("2025-06-18")
	c.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"wait","arguments":{},"_meta":{"progressToken":{"a":1}}}}`)
	c.until(`"method":"notifications/progress"`)
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`)
	<-stopped
	c.send(`{"jsonrpc":"2.0","id":6,"method":"ping"}`)
	for _, l := range c.until(`"id":6`) {
		if strings.Contains(l, `"id":5`) {
			t.Fatalf("the cancelled call was answered: %s", l)
		}
	}
}

// TestCancelledOverHTTP: over streamable HTTP the cancelled call's event stream carries
// its progress until the cancel, and neither later progress nor its response.
func TestCancelledOverHTTP(t *testing.T) {
	for _, silenced := range []bool{true, false} {
		srv, stopped := waitServer()
		var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
		if silenced {
			h = SilenceCancelledHTTP(h)
		}
		ts := httptest.NewServer(h)
		post := func(session, body string) *http.Response {
			req, _ := http.NewRequest("POST", ts.URL, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if session != "" {
				req.Header.Set("Mcp-Session-Id", session)
				req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		init := post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
		session := init.Header.Get("Mcp-Session-Id")
		io.ReadAll(init.Body)
		init.Body.Close()
		post(session, `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`).Body.Close()
		call := post(session, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait","arguments":{},"_meta":{"progressToken":"p1"}}}`)
		events := bufio.NewScanner(call.Body)
		for events.Scan() && !strings.Contains(events.Text(), `"progressToken":"p1"`) {
		}
		post(session, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`).Body.Close()
		<-stopped
		var rest []string
		for events.Scan() {
			rest = append(rest, events.Text())
		}
		call.Body.Close()
		ts.Close()
		got := late(rest)
		switch {
		case silenced && len(got) != 0:
			t.Errorf("after the cancel the stream carried %v; want nothing for the cancelled call", got)
		case !silenced && len(got) == 0:
			t.Errorf("without the decorator nothing came after the cancel over HTTP: the test no longer shows what it guards against")
		}
	}
}

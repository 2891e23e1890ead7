package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Once the client cancels a request (notifications/cancelled), nothing more is to be
// sent for it: neither progress for its token nor its response, as the protocol asks.
// The SDK cancels the handler's context (the delivery then records the cancellation,
// and this server's progress stops there), but it still writes the handler's answer.
// SilenceCancelled (a transport, for stdio) and SilenceCancelledHTTP (a handler, for
// streamable HTTP) drop what would still go out.

// cancels are one session's calls in flight and the ones the client cancelled.
type cancels struct {
	mu        sync.Mutex
	inFlight  map[any]any  // a call's id -> its progress token (nil: none)
	cancelled map[any]bool // the ids of the calls the client cancelled
	tokens    map[any]bool // their progress tokens
}

func newCancels() *cancels {
	return &cancels{inFlight: map[any]any{}, cancelled: map[any]bool{}, tokens: map[any]bool{}}
}

// params are the fields of a message's params these read.
type params struct {
	RequestID any `json:"requestId"`
	Meta      struct {
		ProgressToken any `json:"progressToken"`
	} `json:"_meta"`
	ProgressToken any `json:"progressToken"`
}

func readParams(raw json.RawMessage) params {
	var p params
	json.Unmarshal(raw, &p) // a message it cannot read is passed on as it is
	return p
}

// received notes a message from the client: a call, or the cancellation of one.
func (c *cancels) received(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case req.IsCall():
		c.inFlight[req.ID.Raw()] = readParams(req.Params).Meta.ProgressToken
	case req.Method == "notifications/cancelled":
		id, err := jsonrpc.MakeID(readParams(req.Params).RequestID)
		if err != nil {
			return
		}
		if token, ok := c.inFlight[id.Raw()]; ok {
			c.cancelled[id.Raw()] = true
			if token != nil {
				c.tokens[token] = true
			}
		}
	}
}

// silenced says whether a message to the client is for a cancelled call: it is then
// not sent. A response ends its call.
func (c *cancels) silenced(msg jsonrpc.Message) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch m := msg.(type) {
	case *jsonrpc.Response:
		id := m.ID.Raw()
		drop := c.cancelled[id]
		if token := c.inFlight[id]; token != nil {
			delete(c.tokens, token)
		}
		delete(c.cancelled, id)
		delete(c.inFlight, id)
		return drop
	case *jsonrpc.Request:
		if m.Method == "notifications/progress" {
			if token := readParams(m.Params).ProgressToken; token != nil {
				return c.tokens[token]
			}
		}
	}
	return false
}

// SilenceCancelled decorates a transport (stdio) so that nothing is sent for a call
// the client cancelled.
func SilenceCancelled(t mcp.Transport) mcp.Transport { return silencing{t} }

type silencing struct{ mcp.Transport }

func (s silencing) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := s.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &silencedConn{Connection: c, calls: newCancels()}, nil
}

type silencedConn struct {
	mcp.Connection
	calls *cancels
}

func (c *silencedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err == nil {
		c.calls.received(msg)
	}
	return msg, err
}

func (c *silencedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if c.calls.silenced(msg) {
		return nil
	}
	return c.Connection.Write(ctx, msg)
}

// SilenceCancelledHTTP decorates a streamable HTTP handler so that nothing is sent for
// a call the client cancelled: it reads the messages each POST carries (per session),
// and drops from the server's event streams the events for cancelled calls.
func SilenceCancelledHTTP(next http.Handler) http.Handler {
	var mu sync.Mutex
	sessions := map[string]*cancels{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Mcp-Session-Id")
		mu.Lock()
		calls := sessions[id]
		switch {
		case r.Method == http.MethodDelete:
			delete(sessions, id)
		case calls == nil:
			calls = newCancels()
			sessions[id] = calls
		}
		mu.Unlock()
		if r.Method != http.MethodPost || calls == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		for _, msg := range decodeMessages(body) {
			calls.received(msg)
		}
		next.ServeHTTP(&eventFilter{ResponseWriter: w, calls: calls}, r)
	})
}

// decodeMessages reads a POST's JSON-RPC message, or batch of them; what it cannot read
// it leaves to the SDK, which answers it.
func decodeMessages(body []byte) []jsonrpc.Message {
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil {
		raws = []json.RawMessage{body}
	}
	var msgs []jsonrpc.Message
	for _, raw := range raws {
		if msg, err := jsonrpc.DecodeMessage(raw); err == nil {
			msgs = append(msgs, msg)
		}
	}
	return msgs
}

// eventFilter passes a server-sent event stream on event by event, without the events
// that carry a message for a cancelled call. Other answers pass as they are.
type eventFilter struct {
	http.ResponseWriter
	calls   *cancels
	pending []byte // an event not yet whole
}

func (f *eventFilter) Write(p []byte) (int, error) {
	if !strings.HasPrefix(f.Header().Get("Content-Type"), "text/event-stream") {
		return f.ResponseWriter.Write(p)
	}
	f.pending = append(f.pending, p...)
	for {
		end := bytes.Index(f.pending, []byte("\n\n"))
		if end < 0 {
			return len(p), nil
		}
		event := f.pending[:end+2]
		if !f.silenced(event) {
			if _, err := f.ResponseWriter.Write(event); err != nil {
				return 0, err
			}
		}
		f.pending = f.pending[end+2:]
	}
}

// silenced says whether an event's data is a message for a cancelled call.
func (f *eventFilter) silenced(event []byte) bool {
	var data []byte
	sc := bufio.NewScanner(bytes.NewReader(event))
	sc.Buffer(nil, len(event)+1)
	for sc.Scan() {
		if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:")); ok {
			data = append(data, bytes.TrimPrefix(d, []byte(" "))...)
		}
	}
	msg, err := jsonrpc.DecodeMessage(data)
	return err == nil && f.calls.silenced(msg)
}

func (f *eventFilter) Flush() {
	if fl, ok := f.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// Unwrap gives http.ResponseController the writer underneath.
func (f *eventFilter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

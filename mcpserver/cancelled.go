package mcpserver

import (
	"bufio"
	"bytes"
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
// SilenceCancelledStdio (a transport over stdin and stdout) and SilenceCancelledHTTP (a
// handler, for streamable HTTP) drop what would still go out. Both work on the wire:
// the SDK's own connection stays as it is (its protocol version, its batches).

// cancels are one session's calls in flight and the ones the client cancelled.
type cancels struct {
	mu        sync.Mutex
	inFlight  map[any]any  // a call's id -> its progress token (nil: none)
	cancelled map[any]bool // the ids of the calls the client cancelled
	tokens    map[any]bool // their progress tokens
	seen      uint64       // the number of the POST that last came for it (HTTP sessions)
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

// key is a request id or a progress token as a map key: a string, or a number as a
// float64 (JSON decodes numbers so; jsonrpc holds ids as int64); anything else is nil (a
// client's object or array is no token).
func key(v any) any {
	switch v := v.(type) {
	case string, float64:
		return v
	case int64:
		return float64(v)
	}
	return nil
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
		if id := key(req.ID.Raw()); id != nil {
			c.inFlight[id] = key(readParams(req.Params).Meta.ProgressToken)
		}
	case req.Method == "notifications/cancelled":
		id := key(readParams(req.Params).RequestID)
		if token, ok := c.inFlight[id]; ok && id != nil {
			c.cancelled[id] = true
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
		id := key(m.ID.Raw())
		drop := id != nil && c.cancelled[id]
		c.forget(id)
		return drop
	case *jsonrpc.Request:
		if m.Method == "notifications/progress" {
			if token := key(readParams(m.Params).ProgressToken); token != nil {
				return c.tokens[token]
			}
		}
	}
	return false
}

// forget ends a call: it is answered, or will never be. c.mu is held.
func (c *cancels) forget(id any) {
	if id == nil {
		return
	}
	if token := c.inFlight[id]; token != nil {
		delete(c.tokens, token)
	}
	delete(c.cancelled, id)
	delete(c.inFlight, id)
}

// decodeLine reads one line of the wire: a JSON-RPC message, or a batch of them. What it
// cannot read it returns as nothing, and the line passes as it is.
func decodeLine(line []byte) (msgs []jsonrpc.Message, batch bool) {
	var raws []json.RawMessage
	if err := json.Unmarshal(line, &raws); err != nil {
		raws = []json.RawMessage{line}
	} else {
		batch = true
	}
	for _, raw := range raws {
		msg, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			return nil, batch
		}
		msgs = append(msgs, msg)
	}
	return msgs, batch
}

// SilenceCancelledStdio is the stdio transport over in and out (newline-delimited
// JSON-RPC) that sends nothing for a call the client cancelled: the lines the client
// sends are read as they pass, and each line the server writes is left out, or written
// without the cancelled call's messages (from a batch). Like the SDK's StdioTransport
// it never closes out.
func SilenceCancelledStdio(in io.ReadCloser, out io.Writer) mcp.Transport {
	calls := newCancels()
	return &mcp.IOTransport{Reader: &notingReader{r: in, calls: calls}, Writer: &silencingWriter{w: out, calls: calls}}
}

// notingReader passes the client's bytes on and notes each whole line's messages.
type notingReader struct {
	r       io.ReadCloser
	calls   *cancels
	pending []byte
}

func (n *notingReader) Read(p []byte) (int, error) {
	k, err := n.r.Read(p)
	n.pending = append(n.pending, p[:k]...)
	for {
		end := bytes.IndexByte(n.pending, '\n')
		if end < 0 {
			break
		}
		msgs, _ := decodeLine(bytes.TrimSpace(n.pending[:end]))
		for _, m := range msgs {
			n.calls.received(m)
		}
		n.pending = n.pending[end+1:]
	}
	if len(n.pending) > mcp.DefaultMaxLineLength {
		n.pending = nil // a line the SDK refuses anyway
	}
	return k, err
}

func (n *notingReader) Close() error { return n.r.Close() }

// silencingWriter writes the server's lines, without the cancelled calls' messages.
type silencingWriter struct {
	w       io.Writer
	calls   *cancels
	pending []byte
}

func (s *silencingWriter) Write(p []byte) (int, error) {
	s.pending = append(s.pending, p...)
	for {
		end := bytes.IndexByte(s.pending, '\n')
		if end < 0 {
			return len(p), nil
		}
		line := s.pending[:end+1]
		if out := s.keep(line); len(out) > 0 {
			if _, err := s.w.Write(out); err != nil {
				return 0, err
			}
		}
		s.pending = s.pending[end+1:]
	}
}

// keep is a line as it goes out: as it is, without a batch's silenced messages, or
// nothing.
func (s *silencingWriter) keep(line []byte) []byte {
	msgs, batch := decodeLine(bytes.TrimSpace(line))
	var kept []jsonrpc.Message
	for _, m := range msgs {
		if !s.calls.silenced(m) {
			kept = append(kept, m)
		}
	}
	switch {
	case len(kept) == len(msgs):
		return line
	case len(kept) == 0:
		return nil
	case !batch:
		return line
	}
	var parts []string
	for _, m := range kept {
		b, err := jsonrpc.EncodeMessage(m)
		if err != nil {
			return line
		}
		parts = append(parts, string(b))
	}
	return []byte("[" + strings.Join(parts, ",") + "]\n")
}

func (s *silencingWriter) Close() error { return nil }

// SilenceCancelledHTTP decorates a streamable HTTP handler so that nothing is sent for
// a call the client cancelled: it reads the messages each POST carries (per session),
// and drops from the server's event streams the events for cancelled calls. A call's
// record ends when its POST is answered; a session's, when it ends, or once staleAfter
// POSTs came and none for it.
func SilenceCancelledHTTP(next http.Handler) http.Handler {
	var mu sync.Mutex
	var posts uint64
	sessions := map[string]*cancels{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Mcp-Session-Id")
		if r.Method != http.MethodPost {
			if r.Method == http.MethodDelete {
				mu.Lock()
				delete(sessions, id)
				mu.Unlock()
			}
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mcp.DefaultMaxRequestBodyBytes))
		if err != nil {
			http.Error(w, "reading the request: "+err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		mu.Lock()
		posts++
		if posts%staleAfter == 0 {
			for sid, c := range sessions {
				if posts-c.seen >= staleAfter {
					delete(sessions, sid)
				}
			}
		}
		calls := sessions[id]
		if calls == nil {
			calls = newCancels()
			if len(sessions) < maxSessions {
				sessions[id] = calls
			}
		}
		calls.seen = posts
		mu.Unlock()
		msgs, _ := decodeLine(body)
		for _, msg := range msgs {
			calls.received(msg)
		}
		next.ServeHTTP(&eventFilter{ResponseWriter: w, calls: calls}, r)
		// The POST is answered: its calls are over, whatever the answer was.
		calls.mu.Lock()
		for _, msg := range msgs {
			if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
				calls.forget(key(req.ID.Raw()))
			}
		}
		calls.mu.Unlock()
	})
}

// staleAfter is how many POSTs may come, none of them a session's, before the session
// is forgotten.
const staleAfter = 10_000

// maxSessions bounds the sessions remembered; past it, new sessions' cancellations are
// still honoured within their own POSTs' lifetime, not remembered across them.
const maxSessions = 10_000

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

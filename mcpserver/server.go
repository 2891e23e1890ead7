// Package mcpserver serves sendonce to AI agents over the Model Context Protocol. Each
// tool is a thin call into the sendonce library. Every outcome, and every refusal
// because a delivery is consumed or held, is a successful tool result an agent cannot
// misread (this_call says whether this call did it, next_step what to do); tool errors
// are only for bad input and for fail-closed, with the kind the CLI's exit codes name.
//
// A retried, repeated or cancelled call never causes a second copy: the gate allows one
// delivery per key, and a call for a key this server is delivering attaches to that
// delivery instead of claiming.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/internal/schema"
)

// Server is the MCP server over one sendonce Client.
type Server struct {
	Client *sendonce.Client
	// Deliverer runs deliveries; nil in a build without the desktop (cgo), where the
	// deliver tool says so and every other tool works.
	Deliverer *sendonce.Deliverer
	// Defaults are the delivery settings a call does not choose: app, display, staging,
	// timeouts, provider config.
	Defaults sendonce.DeliveryRequest
	// AllowDirs are folders whose files may be delivered, besides the client's roots.
	AllowDirs []string
	// GateTools adds claim, check, cross, renew and record, for agents that drive an
	// app themselves.
	GateTools bool
	Version   string
	// Remote, when set, is a sendonce service the tools call instead of Client and
	// Deliverer (sendonce mcp --service): deliver, status, show and reconcile go
	// through it, with the file's bytes read here; the gate tools and verify_evidence
	// (the bundles are the service's) are not offered.
	Remote Remote

	mu      sync.Mutex
	flights map[string]*flight // deliveries running in this server, by key
	// one lets one delivery run at a time: a Deliverer (its OCR engine) runs one, and
	// deliveries share the display anyway.
	one chan struct{}
}

// Remote is a sendonce service, as its client (package service) calls it.
type Remote interface {
	lookup
	Deliver(ctx context.Context, req sendonce.DeliveryRequest) (sendonce.DeliveryResult, error)
}

// lookup is what the read-only tools ask: a *sendonce.Client or a Remote.
type lookup interface {
	Status(ctx context.Context, req sendonce.StatusRequest) (sendonce.StatusResult, error)
	Show(ctx context.Context, req sendonce.StatusRequest) (sendonce.StatusResult, error)
	Reconcile(ctx context.Context, req sendonce.ReconcileRequest) (sendonce.ReconcileResult, error)
}

func (s *Server) lookup() lookup {
	if s.Remote != nil {
		return s.Remote
	}
	return s.Client
}

// deliver is the Remote's or the Deliverer's Deliver, or nil without either.
func (s *Server) deliverFunc() func(context.Context, sendonce.DeliveryRequest) (sendonce.DeliveryResult, error) {
	switch {
	case s.Remote != nil:
		return s.Remote.Deliver
	case s.Deliverer != nil:
		return s.Deliverer.Deliver
	}
	return nil
}

// flight is a delivery in progress that later calls for the same key attach to.
type flight struct {
	done chan struct{}
	out  DeliverOutput
	err  error
}

// New builds the MCP server with its tools.
func (s *Server) New() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "sendonce", Version: s.Version}, &mcp.ServerOptions{
		Instructions: "sendonce delivers a file through a desktop chat app at most once per destination and content, and leaves evidence. " +
			"send_status_unknown means the file may already be with the recipient: never send it again, with this or any other tool; call reconcile, or ask a person.",
	})
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}
	addTool(srv, &mcp.Tool{Name: "deliver", Description: deliverDescription,
		Annotations: &mcp.ToolAnnotations{Title: "Deliver a file once", DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(true)}}, s.deliver)
	addTool(srv, &mcp.Tool{Name: "status", Annotations: readOnly,
		Description: "Where a delivery stands: free, held, not_sent, or consumed (sent_verified, send_status_unknown, sent_rejected). It never sends anything."},
		func(ctx context.Context, req *mcp.CallToolRequest, in StatusInput) (*mcp.CallToolResult, sendonce.StatusResult, error) {
			return s.statusCall(ctx, req, in, s.lookup().Status)
		})
	addTool(srv, &mcp.Tool{Name: "show", Annotations: readOnly,
		Description: "A delivery's status with every decision the gate made about it, in order."},
		func(ctx context.Context, req *mcp.CallToolRequest, in StatusInput) (*mcp.CallToolResult, sendonce.StatusResult, error) {
			return s.statusCall(ctx, req, in, s.lookup().Show)
		})
	if s.Remote == nil {
		addTool(srv, &mcp.Tool{Name: "verify_evidence", Annotations: readOnly,
			Description: "Verify an evidence bundle and authenticate it with the store: authenticated false means nothing outside the bundle vouches for it."},
			s.verifyEvidence)
	}
	addTool(srv, &mcp.Tool{Name: "reconcile", Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(true)},
		Description: "Ask the chat provider about deliveries whose outcome is send_status_unknown, and settle them from its answer. It never sends anything."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in ReconcileInput) (*mcp.CallToolResult, sendonce.ReconcileResult, error) {
			return toolResult(s.lookup().Reconcile(ctx, sendonce.ReconcileRequest{Key: in.Key, ProviderConfig: s.Defaults.ProviderConfig, Staging: s.Defaults.Staging}))
		})
	if s.GateTools && s.Remote == nil {
		s.addGateTools(srv)
	}
	return srv
}

const deliverDescription = `Deliver a file to a conversation of a desktop chat app, at most once per destination and file content, with evidence.
The result's outcome: sent_verified (it arrived; never send it again), not_sent (nothing was sent; you may call deliver again), sent_rejected (it arrived with other bytes or to another recipient; ask a person), send_status_unknown (the file may already be with the recipient: do not send it again with this or any other tool; call reconcile, or ask a person).
this_call is false when an earlier attempt recorded the outcome: a recorded sent_verified is not a delivery by this call. Calling deliver again with the same file and destination is safe: it answers with the recorded outcome and sends nothing.`

// StatusInput names a delivery by key, or by destination and file.
type StatusInput struct {
	Key    string `json:"key,omitempty" jsonschema:"a delivery key as deliver and status print it"`
	To     string `json:"to,omitempty" jsonschema:"the conversation's exact visible title"`
	DestID string `json:"dest_id,omitempty" jsonschema:"the destination's provider id, e.g. xmpp:bob@example.org"`
	File   string `json:"file,omitempty" jsonschema:"absolute path of the file"`
}

// statusCall answers status or show. A file is held to the same folder rules as
// deliver's before it is touched: the server never hashes, or tells the existence of, a
// file outside the allowed folders and the client's roots.
func (s *Server) statusCall(ctx context.Context, req *mcp.CallToolRequest, in StatusInput,
	ask func(context.Context, sendonce.StatusRequest) (sendonce.StatusResult, error)) (*mcp.CallToolResult, sendonce.StatusResult, error) {
	r := sendonce.StatusRequest{Key: in.Key, Destination: sendonce.Destination{Title: in.To, ProviderID: in.DestID}}
	if in.File != "" {
		file, answer := s.fileOrAnswer(req, in.File)
		if answer != nil {
			return answer, sendonce.StatusResult{}, nil
		}
		defer file.Close()
		r.Content = sendonce.Content{File: file}
	}
	return toolResult(ask(ctx, r))
}

// VerifyInput names a bundle.
type VerifyInput struct {
	Bundle string `json:"bundle" jsonschema:"the evidence bundle folder or archive, as deliver returned it"`
}

// ReconcileInput optionally narrows reconcile to one key.
type ReconcileInput struct {
	Key string `json:"key,omitempty" jsonschema:"only this delivery key; every unknown attempt when empty"`
}

// schemaFor is the JSON schema of a result type: its times are RFC 3339 strings.
func schemaFor[T any]() *jsonschema.Schema { return schema.For[T]() }

// toolResult turns a library error into a tool error an agent and a person can act on;
// a result without error is the structured content.
func toolResult[R any](res R, err error) (*mcp.CallToolResult, R, error) {
	if err == nil {
		return nil, res, nil
	}
	var zero R
	return toolError(err), zero, nil
}

func toolError(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s: %v", ErrorKind(err), err)}}}
}

// ErrorKind is an error's kind, as the CLI's exit codes name them.
func ErrorKind(err error) string { return sendonce.ErrorKind(err) }

func ptr[T any](v T) *T { return &v }

// DeliverInput is what a deliver call chooses.
type DeliverInput struct {
	To     string `json:"to" jsonschema:"the conversation's exact visible title, checked on screen before anything is sent"`
	DestID string `json:"dest_id,omitempty" jsonschema:"the destination's provider id (e.g. xmpp:bob@example.org): a strong identity; without it the title alone is a weak one"`
	File   string `json:"file" jsonschema:"absolute path of the file, under one of the client's roots or a folder the server allows"`
	App    string `json:"app,omitempty" jsonschema:"the chat app's profile (default: the server's)"`
	Task   string `json:"task,omitempty" jsonschema:"this task's id, to resume a delivery; a new one when empty"`
}

// DeliverOutput is a deliver call's answer, on top of the library's result.
type DeliverOutput struct {
	// Outcome is sent_verified, not_sent, send_status_unknown or sent_rejected: this
	// call's, or the one an earlier attempt recorded.
	Outcome string `json:"outcome"`
	// Decision is granted (this call delivered), attached (it waited for the same
	// delivery running in this server), or refused (consumed, or held by another).
	Decision string `json:"decision"`
	// ThisCall is true only when this call's delivery recorded the outcome.
	ThisCall     bool          `json:"this_call"`
	PriorAttempt *PriorAttempt `json:"prior_attempt,omitempty"`
	NextStep     string        `json:"next_step"`
	Path         string        `json:"path"`
	SHA256       string        `json:"sha256"`
	Key          string        `json:"key"`
	// Result is the library's delivery result (evidence, reasons, dispatch id, ...).
	Result sendonce.DeliveryResult `json:"result"`
}

// PriorAttempt is the attempt that decided a key before this call.
type PriorAttempt struct {
	DispatchID string `json:"dispatch_id,omitempty"`
	Evidence   string `json:"evidence,omitempty"`
	Status     string `json:"status"`
	Reason     string `json:"reason,omitempty"`
}

// nextStep says plainly what an agent may do after an outcome.
func nextStep(outcome, decision string) string {
	switch {
	case decision == "refused" && outcome == string(gate.StatusHeld):
		return "another executor is delivering this file to this destination now: call status later; never send it another way"
	case outcome == string(gate.SentVerified):
		return "done: the file is with the recipient; do not send it again"
	case outcome == string(gate.NotSent):
		return "nothing was sent: you may call deliver again"
	case outcome == string(gate.SentRejected):
		return "it arrived with other bytes or to another recipient: ask a person; do not send it again"
	}
	return "the file may already be with the recipient: do not send it again with this or any other tool; call reconcile, or ask a person"
}

// deliver runs one delivery, or attaches to the one this server runs for the same key.
func (s *Server) deliver(ctx context.Context, req *mcp.CallToolRequest, in DeliverInput) (*mcp.CallToolResult, DeliverOutput, error) {
	if s.deliverFunc() == nil {
		return toolError(fmt.Errorf("%w: this sendonce was built without the desktop (cgo): deliver needs the desktop build; status, show, reconcile and verify_evidence work", sendonce.ErrInvalid)), DeliverOutput{}, nil
	}
	file, answer := s.fileOrAnswer(req, in.File)
	if answer != nil {
		return answer, DeliverOutput{}, nil // bad input, or the call comes back with the client's roots
	}
	defer file.Close() // opened once: its bytes are hashed, staged and sent
	if in.To == "" {
		return toolError(fmt.Errorf("%w: to (the conversation's visible title) is required", sendonce.ErrInvalid)), DeliverOutput{}, nil
	}
	dest := sendonce.Destination{Title: in.To, ProviderID: in.DestID}
	// The key of what the file holds now: a call for a key already on its way attaches.
	st, err := s.lookup().Status(ctx, sendonce.StatusRequest{Destination: dest, Content: sendonce.Content{File: file}})
	if err != nil {
		return toolError(err), DeliverOutput{}, nil
	}
	f, owner := s.join(st.Key)
	if !owner {
		notify(ctx, req, "attached: this server is delivering the same file to the same destination", st.Key, "")
		select {
		case <-f.done:
		case <-ctx.Done():
			return toolError(ctx.Err()), DeliverOutput{}, nil
		}
		if f.err != nil {
			return toolError(f.err), DeliverOutput{}, nil
		}
		out := f.out
		out.Decision, out.ThisCall = "attached", false
		return nil, out, nil
	}
	out, err := s.run(ctx, req, in, dest, file, filepath.Clean(in.File))
	f.out, f.err = out, err
	s.land(st.Key, f)
	if err != nil {
		return toolError(err), DeliverOutput{}, nil
	}
	return nil, out, nil
}

// join returns the flight for key and whether this call is its owner (the one that
// runs the delivery).
func (s *Server) join(key string) (*flight, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.flights == nil {
		s.flights = map[string]*flight{}
	}
	if f, ok := s.flights[key]; ok {
		return f, false
	}
	f := &flight{done: make(chan struct{})}
	s.flights[key] = f
	return f, true
}

// running is the keys this server is delivering now.
func (s *Server) running() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.flights {
		keys = append(keys, k)
	}
	return keys
}

func (s *Server) turn() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.one == nil {
		s.one = make(chan struct{}, 1)
	}
	return s.one
}

func (s *Server) land(key string, f *flight) {
	s.mu.Lock()
	delete(s.flights, key)
	s.mu.Unlock()
	close(f.done)
}

func (s *Server) run(ctx context.Context, req *mcp.CallToolRequest, in DeliverInput, dest sendonce.Destination, file *os.File, path string) (DeliverOutput, error) {
	r := s.Defaults
	if in.App != "" {
		r.App, r.Profile = in.App, nil
	}
	r.Destination, r.Content, r.Task = dest, sendonce.Content{File: file}, in.Task
	select {
	case s.turn() <- struct{}{}:
		defer func() { <-s.one }()
	case <-ctx.Done():
		return DeliverOutput{}, ctx.Err() // nothing was claimed
	}
	progress := newProgress(ctx, req)
	defer progress.close()
	r.Progress = progress.send
	res, err := s.deliverFunc()(ctx, r)
	out := DeliverOutput{Outcome: res.Outcome, Path: path, Key: res.Key, Result: res}
	if len(res.Keys) > 0 {
		out.SHA256 = keyDigest(res.Key)
	}
	switch {
	case errors.Is(err, sendonce.ErrConsumed), errors.Is(err, sendonce.ErrHeld):
		// A refusal is an answer, not an error: the recorded outcome, or the holder.
		out.Decision, out.ThisCall, out.Outcome = "refused", false, res.Gate
		out.PriorAttempt = &PriorAttempt{DispatchID: res.DispatchID, Evidence: res.Evidence, Status: res.Gate, Reason: res.Stopped}
	case err != nil:
		return DeliverOutput{}, err
	default:
		out.Decision, out.ThisCall = "granted", true
	}
	out.NextStep = nextStep(out.Outcome, out.Decision)
	return out, nil
}

// keyDigest is the SHA-256 a key names (its last part).
func keyDigest(key string) string {
	k, err := gate.ParseKey(key)
	if err != nil {
		return ""
	}
	return k.Digest().String()
}

// progress forwards a delivery's events as MCP progress notifications, when the client
// gave a progress token, without ever blocking the delivery.
type progress struct {
	ch   chan sendonce.Event
	done chan struct{}
}

func newProgress(ctx context.Context, req *mcp.CallToolRequest) *progress {
	p := &progress{ch: make(chan sendonce.Event, 64), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		n := 0
		for e := range p.ch {
			n++
			notifyN(ctx, req, e.Message, e.Key, e.DispatchID, n)
		}
	}()
	return p
}

func (p *progress) send(e sendonce.Event) {
	select {
	case p.ch <- e:
	default: // a slow client loses progress lines, never the delivery's time
	}
}

func (p *progress) close() {
	close(p.ch)
	<-p.done
}

func notify(ctx context.Context, req *mcp.CallToolRequest, msg, key, dispatch string) {
	notifyN(ctx, req, msg, key, dispatch, 1)
}

// notifyN sends one progress notification; the message carries the key and dispatch
// id, so that a client that gave up can ask status later.
//
// Once the call's ctx ended (the client cancelled it, or gave up), nothing more is
// sent for it: the protocol asks that a cancelled request get no further messages.
func notifyN(ctx context.Context, req *mcp.CallToolRequest, msg, key, dispatch string, n int) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil || ctx.Err() != nil {
		return
	}
	if key != "" {
		msg += " (key " + key
		if dispatch != "" {
			msg += ", dispatch " + dispatch
		}
		msg += ")"
	}
	nctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req.Session.NotifyProgress(nctx, &mcp.ProgressNotificationParams{ProgressToken: token, Message: msg, Progress: float64(n)})
}

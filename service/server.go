// Package service is sendonce's HTTP service: the gate contract (claim, check, cross,
// renew, record, status, show) and deliver as JSON under /v1/, with Idempotency-Key
// semantics, bearer tokens per agent, problem+json errors that carry the CLI's exit
// code, an OpenAPI 3.1 description, health and Prometheus metrics.
//
// Run as an OS user of its own (sendonce serve), it is the barrier between agents and
// the gate: only that user can read and write the store, the staging folder, the
// sealing key and the provider account, and reach the display. Agents send the bytes
// in the request; the service never opens a path an agent names.
//
// The package never logs: Config.AccessLog receives one entry per request.
package service

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/sendonce/sendonce/internal/clock"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/gate"
)

// DefaultRetention is how long stored responses to Idempotency-Keys are kept.
const DefaultRetention = 24 * time.Hour

// DefaultMaxBody caps a request body (content included) when Config.MaxBody is zero.
const DefaultMaxBody = 64 << 20

// Config is what a Server serves.
type Config struct {
	Client *sendonce.Client
	// Deliver runs a delivery (a sendonce.Deliverer's Deliver); nil in a build without
	// the desktop, where /v1/deliveries answers 400 and every gate call works.
	Deliver func(context.Context, sendonce.DeliveryRequest) (sendonce.DeliveryResult, error)
	// Defaults are the delivery settings a request does not choose: app, display,
	// staging, provider config, timeouts.
	Defaults sendonce.DeliveryRequest
	// ContentDir is where the service keeps uploaded bytes while it delivers them; only
	// the service's user may read it.
	ContentDir string
	Tokens     *Tokens
	// Guard is asked before each request: an error (the store file was replaced under
	// the running service, say) fails the request closed (503).
	Guard func(context.Context) error
	// Retention is how long responses to Idempotency-Keys are kept (DefaultRetention).
	Retention time.Duration
	// MaxBody caps a request body (DefaultMaxBody); a delivery's content is also capped
	// by the profile's upload limit.
	MaxBody int64
	// DeliveryWait is the longest a deliver request waits before it answers 202 with a
	// Location to poll (the client's Prefer: wait=N may ask for less). Default 30s.
	DeliveryWait time.Duration
	// AccessLog receives one entry per request: never a token or file contents.
	AccessLog func(AccessEntry)
	Now       func() time.Time
	// AfterCross, when set, is called after a crossing is durable and before its
	// response is written: a test hook (the crash tests kill the process there).
	AfterCross func()
}

// AccessEntry is one request as the access log records it.
type AccessEntry struct {
	Method   string
	Path     string
	Status   int
	Agent    string // the token's name; "" when none matched
	Kind     string // the problem's kind, for an error
	Replayed bool   // the response stored for the Idempotency-Key
	Duration time.Duration
}

// Server is the HTTP service. Make one with New; Drain waits for its deliveries.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	openapi []byte
	metrics metrics

	mu         sync.Mutex
	remembered map[string]*remembered // by agent + "\x00" + Idempotency-Key
	deliveries map[string]*delivery   // by id
	one        chan struct{}          // one delivery at a time: they share the display
	inFlight   sync.WaitGroup
}

// New makes the service.
func New(cfg Config) (*Server, error) {
	if cfg.Client == nil || cfg.Tokens == nil {
		return nil, errors.New("service: a Client and Tokens are required")
	}
	if cfg.Deliver != nil && cfg.ContentDir == "" {
		return nil, errors.New("service: deliveries need a ContentDir")
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.DeliveryWait <= 0 {
		cfg.DeliveryWait = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = clock.System
	}
	doc, err := OpenAPI()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), openapi: doc, remembered: map[string]*remembered{},
		deliveries: map[string]*delivery{}, one: make(chan struct{}, 1)}
	s.metrics.init()
	s.route("GET /v1/openapi.json", s.getOpenAPI)
	s.mux.HandleFunc("GET /v1/healthz", s.health)
	s.route("GET /v1/metrics", s.getMetrics)
	s.route("GET /v1/status", s.getStatus(false))
	s.route("GET /v1/show", s.getStatus(true))
	s.route("GET /v1/deliveries/{id}", s.getDelivery)
	s.post("/v1/claim", s.claim)
	s.post("/v1/check", s.check)
	s.postKeyed("/v1/cross", s.cross, false)
	s.post("/v1/renew", s.renew)
	s.post("/v1/record", s.record)
	s.post("/v1/reconcile", s.reconcile)
	s.post("/v1/deliveries", s.deliver)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.problem(w, r, "", http.StatusNotFound, problemBody{Kind: "not_found", Detail: "no such endpoint: " + r.Method + " " + r.URL.Path + " (see /v1/openapi.json)"})
	})
	return s, nil
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Drain waits until every delivery the service started has recorded its outcome, or ctx
// ends. A delivery is never cancelled by a shutdown: one between a crossing and its act
// must reach a recorded outcome.
func (s *Server) Drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.inFlight.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Forget drops the responses stored before the retention, here and in the store.
func (s *Server) Forget(ctx context.Context) error {
	before := s.cfg.Now().Add(-s.cfg.Retention)
	s.mu.Lock()
	for k, m := range s.remembered {
		if m.finished() && m.at.Before(before) {
			delete(s.remembered, k)
		}
	}
	for id, d := range s.deliveries {
		if d.finished() && d.at.Before(before) {
			delete(s.deliveries, id)
		}
	}
	s.mu.Unlock()
	_, err := s.cfg.Client.ForgetRequests(ctx, before)
	return err
}

// call is one authenticated request.
type call struct {
	agent string // the token's name
	key   string // the Idempotency-Key ("" for a GET)
	fp    string // the request's fingerprint
	body  []byte
	r     *http.Request
}

// task is the task id the service records for a client's sub-task: the token's name,
// "/", the sub-task. A client may also send the whole id back, prefixed with its own
// name; it can never name another agent's task.
func (c *call) task(sub string, required bool) (string, error) {
	if sub == "" {
		if required {
			return "", sendonce.FieldErrorf("task", "is required")
		}
		// Made from the Idempotency-Key, so that a retry of the same request names the
		// same task (and the store can replay its answer).
		h := sha256.Sum256([]byte(c.agent + "\x00" + c.key))
		sub = "t-" + hex.EncodeToString(h[:8])
	}
	if i := strings.IndexByte(sub, '/'); i >= 0 {
		if sub[:i] != c.agent {
			return "", sendonce.FieldErrorf("task", "%q names another agent's task: a task is %s/SUBTASK for this token, or SUBTASK", sub, c.agent)
		}
		sub = sub[i+1:]
	}
	if sub == "" || strings.ContainsAny(sub, "/\n\r") || len(sub) > 200 {
		return "", sendonce.FieldErrorf("task", "a sub-task is 1-200 characters on one line, without '/'")
	}
	return c.agent + "/" + sub, nil
}

// reply is a handler's answer: a status and a typed body.
type reply struct {
	status     int
	body       any
	location   string
	retryAfter int
	kind       string    // a problem's kind, for the metrics and the access log
	delivery   *delivery // a 202's delivery: its Idempotency-Key is asked again if it ends held or fail-closed
}

func ok(body any) reply { return reply{status: http.StatusOK, body: body} }

// route adds a GET endpoint: authenticated, guarded, logged.
func (s *Server) route(pattern string, h func(*call) reply) {
	s.mux.HandleFunc(pattern, s.authenticated(h))
}

// authenticated serves h to a request with a known bearer token.
func (s *Server) authenticated(h func(*call) reply) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := s.cfg.Now()
		c, fail := s.admit(w, r)
		if fail != nil {
			s.logged(r, start, *fail, c.agent, false)
			return
		}
		rep := h(c)
		s.write(w, r, rep, nil)
		s.logged(r, start, rep, c.agent, false)
	}
}

func (s *Server) logged(r *http.Request, start time.Time, rep reply, agent string, replayed bool) {
	s.metrics.request(rep.status, rep.kind, replayed)
	if s.cfg.AccessLog != nil {
		s.cfg.AccessLog(AccessEntry{Method: r.Method, Path: r.URL.Path, Status: rep.status, Agent: agent, Kind: rep.kind, Replayed: replayed, Duration: s.cfg.Now().Sub(start)})
	}
}

// admit authenticates a request and asks the guard; a refusal is written.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) (*call, *reply) {
	c := &call{r: r}
	secret, found := BearerToken(r.Header)
	if !found {
		w.Header().Set("WWW-Authenticate", Challenge(""))
		rep := s.problem(w, r, "", http.StatusUnauthorized, problemBody{Kind: "unauthorized", Detail: "every request needs a bearer token: Authorization: Bearer TOKEN (made with 'sendonce token create NAME')"})
		return c, &rep
	}
	name, err := s.cfg.Tokens.Lookup(secret)
	if err != nil {
		rep := s.fail(w, r, err)
		return c, &rep
	}
	if name == "" {
		w.Header().Set("WWW-Authenticate", Challenge("invalid_token"))
		rep := s.problem(w, r, "", http.StatusUnauthorized, problemBody{Kind: "unauthorized", Detail: "the bearer token is unknown or revoked"})
		return c, &rep
	}
	c.agent = name
	if s.cfg.Guard != nil {
		if err := s.cfg.Guard(r.Context()); err != nil {
			rep := s.fail(w, r, err)
			return c, &rep
		}
	}
	return c, nil
}

// BearerToken reads the token of an Authorization header in the Bearer scheme (RFC 6750;
// the scheme's name in any case, RFC 9110 11.1), or false when the request carries none.
func BearerToken(h http.Header) (string, bool) {
	scheme, token, found := strings.Cut(strings.TrimSpace(h.Get("Authorization")), " ")
	token = strings.TrimSpace(token)
	if !found || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}

// Challenge is the WWW-Authenticate header of a 401 (RFC 9110 11.6.1, RFC 6750 3): the
// Bearer scheme, and the error when a token was given but is not accepted.
func Challenge(bearerError string) string {
	if bearerError == "" {
		return `Bearer realm="sendonce"`
	}
	return `Bearer realm="sendonce", error="` + bearerError + `"`
}

// fail writes an error as a problem.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) reply {
	rep := failure(err, nil)
	s.write(w, r, rep, nil)
	return rep
}

func (s *Server) getOpenAPI(c *call) reply {
	return reply{status: http.StatusOK, body: rawJSON(s.openapi)}
}

// Health is /v1/healthz's answer. Without a token it holds the status only (liveness:
// the process serves); with one, the store was asked (readiness) and is named.
type Health struct {
	Status   string `json:"status"` // ok
	Store    string `json:"store,omitempty"`
	InFlight *int   `json:"deliveries_in_flight,omitempty"`
}

// health answers liveness to anyone, and readiness to an agent with a token: a probe
// needs no secret, and learns nothing but that the process serves.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if _, found := BearerToken(r.Header); found {
		s.authenticated(s.getHealth)(w, r)
		return
	}
	start := s.cfg.Now()
	rep := ok(Health{Status: "ok"})
	s.write(w, r, rep, nil)
	s.logged(r, start, rep, "", false)
}

func (s *Server) getHealth(c *call) reply {
	if _, err := s.cfg.Client.StoreID(c.r.Context()); err != nil {
		return failure(fmt.Errorf("%w: %v", sendonce.ErrUnavailable, err), nil)
	}
	inFlight := s.metrics.inFlight()
	return ok(Health{Status: "ok", Store: s.cfg.Client.Store(), InFlight: &inFlight})
}

func (s *Server) getMetrics(c *call) reply {
	return reply{status: http.StatusOK, body: promText(s.metrics.text())}
}

// StatusQuery names a delivery in a GET: its key, or its destination and the SHA-256
// of its bytes.
func statusRequest(r *http.Request) (sendonce.StatusRequest, error) {
	q := r.URL.Query()
	for name := range q {
		switch name {
		case "key", "to", "dest_id", "sha256":
		default:
			return sendonce.StatusRequest{}, sendonce.FieldErrorf(name, "is not a parameter: give key, or to and/or dest_id with sha256")
		}
	}
	req := sendonce.StatusRequest{Key: q.Get("key"), Destination: sendonce.Destination{Title: q.Get("to"), ProviderID: q.Get("dest_id")}}
	if sum := q.Get("sha256"); sum != "" {
		req.Content.SHA256 = sum
	}
	return req, nil
}

func (s *Server) getStatus(events bool) func(*call) reply {
	return func(c *call) reply {
		req, err := statusRequest(c.r)
		if err != nil {
			return failure(err, nil)
		}
		op := s.cfg.Client.Status
		if events {
			op = s.cfg.Client.Show
		}
		res, err := op(c.r.Context(), req)
		if err != nil {
			return failure(err, nil)
		}
		return ok(res)
	}
}

// ClaimBody asks for the right to deliver content to a destination.
type ClaimBody struct {
	To     string `json:"to,omitempty" jsonschema:"the conversation's exact visible title (a weak identity)"`
	DestID string `json:"dest_id,omitempty" jsonschema:"the destination's provider id, e.g. xmpp:bob@example.org (strong)"`
	// Content is the bytes that will be delivered (base64); the service hashes them.
	Content []byte `json:"content,omitempty" jsonschema:"the bytes to be delivered, base64; or give sha256"`
	SHA256  string `json:"sha256,omitempty" jsonschema:"the SHA-256 of the bytes, hex, instead of content"`
	Task    string `json:"task" jsonschema:"the sub-task claiming (the service records TOKEN-NAME/SUBTASK)"`
	Lease   int    `json:"lease_seconds,omitempty" jsonschema:"the lease in seconds (default 300)"`
}

// PermitBody names a granted claim.
type PermitBody struct {
	Key   string `json:"key"`
	Task  string `json:"task"`
	Token uint64 `json:"token"`
}

// BoundaryBody is a check or a cross.
type BoundaryBody struct {
	PermitBody
	Boundary  gate.Boundary `json:"boundary" jsonschema:"open_picker, choose_file or send (cross: choose_file or send)"`
	ChainHead string        `json:"chain_head,omitempty" jsonschema:"the evidence chain head at this moment (cross)"`
}

// RenewBody extends a lease.
type RenewBody struct {
	PermitBody
	Lease int `json:"lease_seconds" jsonschema:"the new lease in seconds, from now"`
}

// RecordBody is an attempt's outcome as its executor reports it.
type RecordBody struct {
	PermitBody
	Outcome   gate.Outcome `json:"outcome" jsonschema:"not_sent, send_status_unknown, sent_verified or sent_rejected (the last two are checked by the service)"`
	ChainHead string       `json:"chain_head,omitempty"`
}

// ReconcileBody asks the service to ask its provider about a key's unknown attempts.
type ReconcileBody struct {
	Key string `json:"key,omitempty"`
}

func (s *Server) claim(c *call) reply {
	var b ClaimBody
	if err := decode(c.body, &b); err != nil {
		return failure(err, nil)
	}
	task, err := c.task(b.Task, true)
	if err != nil {
		return failure(err, nil)
	}
	content, err := contentOf(b.Content, b.SHA256)
	if err != nil {
		return failure(err, nil)
	}
	if b.Lease < 0 {
		return failure(sendonce.FieldErrorf("lease_seconds", "must be positive"), nil)
	}
	res, err := s.cfg.Client.Claim(c.r.Context(), sendonce.ClaimRequest{Destination: sendonce.Destination{Title: b.To, ProviderID: b.DestID},
		Content: content, Task: task, Lease: time.Duration(b.Lease) * time.Second, Request: c.ref()})
	if err != nil {
		rep := failure(err, res)
		if res.Decision != "" && errors.Is(err, sendonce.ErrHeld) {
			rep.retryAfter = untilSeconds(res.HolderLeaseExpiresAt.Time, s.cfg.Now())
		}
		return rep
	}
	s.metrics.granted()
	return ok(res)
}

func untilSeconds(t, now time.Time) int {
	return max(1, int(t.Sub(now).Seconds()+0.999))
}

func (c *call) ref() sendonce.RequestRef {
	return sendonce.RequestRef{Scope: c.agent, ID: c.key, Fingerprint: c.fp}
}

// permitRequest decodes a body v that names a permit (pb, inside v), and the permit.
func (c *call) permitRequest(v any, pb *PermitBody) (sendonce.PermitRef, error) {
	if err := decode(c.body, v); err != nil {
		return sendonce.PermitRef{}, err
	}
	return c.permit(*pb)
}

func (c *call) permit(b PermitBody) (sendonce.PermitRef, error) {
	task, err := c.task(b.Task, true)
	if err != nil {
		return sendonce.PermitRef{}, err
	}
	if b.Key == "" || b.Token == 0 {
		return sendonce.PermitRef{}, sendonce.FieldErrorf("key", "key, task and token (from the claim's grant) are all required")
	}
	return sendonce.PermitRef{Key: b.Key, Task: task, Token: b.Token}, nil
}

func (s *Server) check(c *call) reply {
	var b BoundaryBody
	ref, err := c.permitRequest(&b, &b.PermitBody)
	if err != nil {
		return failure(err, nil)
	}
	d, err := s.cfg.Client.Check(c.r.Context(), ref, b.Boundary)
	return decided(d, err)
}

func decided(d sendonce.Decision, err error) reply {
	if err != nil {
		return failure(err, d)
	}
	return ok(d)
}

func (s *Server) cross(c *call) reply {
	var b BoundaryBody
	ref, err := c.permitRequest(&b, &b.PermitBody)
	if err != nil {
		return failure(err, nil)
	}
	d, err := s.cfg.Client.CrossRequest(c.r.Context(), ref, b.Boundary, b.ChainHead, c.ref())
	if err == nil && s.cfg.AfterCross != nil {
		s.cfg.AfterCross() // a test hook: the process dies between the crossing and its response
	}
	return decided(d, err)
}

func (s *Server) renew(c *call) reply {
	var b RenewBody
	ref, err := c.permitRequest(&b, &b.PermitBody)
	if err != nil {
		return failure(err, nil)
	}
	d, err := s.cfg.Client.Renew(c.r.Context(), ref, time.Duration(b.Lease)*time.Second)
	return decided(d, err)
}

// record records an agent's outcome. sent_verified and sent_rejected are what the
// service checks itself: an agent's bare word is recorded as send_status_unknown, with
// its claim noted, and the service asks its own provider account (reconcile).
func (s *Server) record(c *call) reply {
	var b RecordBody
	ref, err := c.permitRequest(&b, &b.PermitBody)
	if err != nil {
		return failure(err, nil)
	}
	if _, err := gate.ParseOutcome(string(b.Outcome)); err != nil {
		return failure(sendonce.FieldErrorf("outcome", "%v", err), nil)
	}
	asked := b.Outcome
	req := sendonce.RecordRequest{Outcome: asked, ChainHead: b.ChainHead, Request: c.ref()}
	unchecked := asked == gate.SentVerified || asked == gate.SentRejected
	if unchecked {
		req.Outcome = gate.SendStatusUnknown
		req.Note = "the agent reported " + string(asked) + "; the service records only what it checks itself"
	}
	d, err := s.cfg.Client.Record(c.r.Context(), ref, req)
	if err != nil || !unchecked {
		return decided(d, err)
	}
	d.RequestedOutcome = asked
	dispatch := s.dispatchOf(c.r.Context(), ref)
	rec, rerr := s.cfg.Client.Reconcile(c.r.Context(), sendonce.ReconcileRequest{Key: ref.Key, ProviderConfig: s.cfg.Defaults.ProviderConfig, Staging: s.cfg.Defaults.Staging})
	for _, r := range rec.Reconciled {
		if dispatch != "" && r.DispatchID == dispatch && r.Result == "resolved" && (r.Outcome == string(gate.SentVerified) || r.Outcome == string(gate.SentRejected)) {
			d.Outcome, d.Reason = gate.Outcome(r.Outcome), "the service's provider account settled it: "+r.Detail
			return ok(d)
		}
	}
	d.Decision = "refused"
	d.Reason = "recorded send_status_unknown: the service could not confirm " + string(asked) + " with its provider account"
	if rerr != nil {
		d.Reason += " (" + rerr.Error() + ")"
	}
	return failure(fmt.Errorf("%w: %s", sendonce.ErrConsumed, d.Reason), d)
}

// dispatchOf is the dispatch id of the attempt a permit names, or "".
func (s *Server) dispatchOf(ctx context.Context, ref sendonce.PermitRef) string {
	st, err := s.cfg.Client.Status(ctx, sendonce.StatusRequest{Key: ref.Key})
	if err != nil {
		return ""
	}
	for _, in := range st.Intents {
		for _, a := range in.Attempts {
			if a.Token == ref.Token && a.Task == ref.Task {
				return a.DispatchID
			}
		}
	}
	return ""
}

// holderRetry is how many seconds until the live lease on key ends (at least 1).
func (s *Server) holderRetry(ctx context.Context, key string) int {
	st, err := s.cfg.Client.Status(ctx, sendonce.StatusRequest{Key: key})
	if err != nil {
		return 1
	}
	latest := time.Time{}
	for _, in := range st.Intents {
		for _, a := range in.Attempts {
			if a.LeaseExpiresAt.After(latest) {
				latest = a.LeaseExpiresAt.Time
			}
		}
	}
	return untilSeconds(latest, s.cfg.Now())
}

func (s *Server) reconcile(c *call) reply {
	var b ReconcileBody
	if err := decode(c.body, &b); err != nil {
		return failure(err, nil)
	}
	res, err := s.cfg.Client.Reconcile(c.r.Context(), sendonce.ReconcileRequest{Key: b.Key, ProviderConfig: s.cfg.Defaults.ProviderConfig, Staging: s.cfg.Defaults.Staging})
	if err != nil {
		return failure(err, nil)
	}
	return ok(res)
}

// contentOf is a claim's content: the bytes' digest.
func contentOf(b []byte, sum string) (sendonce.Content, error) {
	switch {
	case b != nil && sum != "":
		return sendonce.Content{}, sendonce.FieldErrorf("content", "give content or sha256, not both")
	case b != nil && len(b) == 0:
		return sendonce.Content{}, sendonce.FieldErrorf("content", "is empty: an empty file is never delivered")
	case b != nil:
		return sendonce.Content{SHA256: gate.DigestOf(b).String()}, nil
	case sum != "":
		return sendonce.Content{SHA256: sum}, nil
	}
	return sendonce.Content{}, sendonce.FieldErrorf("content", "is required (base64), or sha256")
}

// writeContent keeps a delivery's bytes in a folder of the service's own, under the
// file name the recipient will see, and returns the file open for reading.
func writeContent(dir, name string, b []byte) (*os.File, func(), error) {
	sub, err := os.MkdirTemp(dir, "upload-")
	if err != nil {
		return nil, nil, fmt.Errorf("%w: content folder: %v", sendonce.ErrUnavailable, err)
	}
	cleanup := func() { os.RemoveAll(sub) }
	path := filepath.Join(sub, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("%w: content folder: %v", sendonce.ErrUnavailable, err)
	}
	f, err := os.Open(path)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return f, func() { f.Close(); cleanup() }, nil
}

func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

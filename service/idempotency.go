package service

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/sendonce/sendonce"
)

// Idempotency-Key: every POST carries one. The same key with the same request (method,
// path, the canonical JSON body with each content's SHA-256 in place of its bytes, and
// the token) gets the stored response; with another request it is 422; while the first
// is still running it is 409 with Retry-After. Responses are kept for the retention,
// per token. Decisions outlive a restart of the service: the store keeps each claim's
// and record's answer under the key in the decision's own transaction, and a crossing
// is refused as crossed whatever key it carries. Held and fail-closed answers are not
// kept: a retry asks again.

// remembered is one Idempotency-Key's request and, once answered, its response.
type remembered struct {
	fp       string
	delivery *delivery // for a 202: the delivery the answer points to
	done     chan struct{}
	status   int
	header   http.Header
	body     []byte
	at       time.Time
}

func (m *remembered) finished() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// post adds a POST endpoint with the Idempotency-Key rules.
func (s *Server) post(path string, h func(*call) reply) { s.postKeyed(path, h, true) }

// postKeyed adds a POST endpoint; replay false asks the handler again for a repeated
// key (its fingerprint is still checked): a crossing is given out once, so a repeated
// cross gets the store's refusal (crossed, replayed), never the stored success.
func (s *Server) postKeyed(path string, h func(*call) reply, replay bool) {
	s.mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
		start := s.cfg.Now()
		c, fail := s.admit(w, r)
		if fail != nil {
			s.logged(r, start, *fail, c.agent, false)
			return
		}
		rep, replayed := s.idempotent(w, c, h, replay)
		s.logged(r, start, rep, c.agent, replayed)
	})
}

func (s *Server) idempotent(w http.ResponseWriter, c *call, h func(*call) reply, replay bool) (reply, bool) {
	r := c.r
	keys := r.Header.Values("Idempotency-Key")
	if len(keys) == 1 {
		c.key = keys[0]
	}
	if len(keys) > 1 || !ValidIdempotencyKey(c.key) {
		detail := "every POST needs an Idempotency-Key header (1-200 printable ASCII characters, no spaces, e.g. a UUID): the same key again gets the same answer"
		if len(keys) > 1 {
			detail = fmt.Sprintf("the request carries %d Idempotency-Key headers: send exactly one", len(keys))
		}
		rep := problemReply(http.StatusBadRequest, problemBody{Kind: "bad_input", ExitCode: exit(sendonce.ExitUsage), Detail: detail})
		s.write(w, r, rep, nil)
		return rep, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		rep := failure(sendonce.FieldErrorf("body", "could not be read: %v", err), nil)
		if errors.As(err, &tooBig) {
			rep = problemReply(http.StatusRequestEntityTooLarge, problemBody{Kind: "bad_input", ExitCode: exit(sendonce.ExitUsage),
				Detail: fmt.Sprintf("the request body is over %d bytes", s.cfg.MaxBody)})
		}
		s.write(w, r, rep, nil)
		return rep, false
	}
	c.body = body
	c.fp = fingerprint(r.Method, r.URL.Path, c.agent, body)

	id := c.agent + "\x00" + c.key
	s.mu.Lock()
	m := s.remembered[id]
	if m != nil && m.finished() && m.at.Before(s.cfg.Now().Add(-s.cfg.Retention)) {
		m = nil
	}
	if m != nil && m.finished() && m.delivery != nil && m.delivery.finished() && !keep(m.delivery.rep) {
		m = nil // the delivery behind the 202 ended held or fail-closed: ask again
	}
	switch {
	case m != nil && m.fp != c.fp:
		s.mu.Unlock()
		rep := problemReply(http.StatusUnprocessableEntity, problemBody{Kind: "idempotency_conflict",
			Detail: "this Idempotency-Key was used for a different request (another body, path or file): use a new key for a new request"})
		s.write(w, r, rep, nil)
		return rep, false
	case m != nil && !m.finished():
		s.mu.Unlock()
		rep := problemReply(http.StatusConflict, problemBody{Kind: "in_progress", Detail: "the request with this Idempotency-Key is still running: retry later with the same key"})
		rep.retryAfter = 1
		s.write(w, r, rep, nil)
		return rep, false
	case m != nil && !replay:
		s.mu.Unlock()
		rep := h(c)
		s.write(w, r, rep, nil)
		return rep, false
	case m != nil && m.delivery != nil && m.delivery.finished():
		// The 202 pointed to a delivery that has ended since: the replay is its
		// result, so that a client that lost the answer learns the outcome at once.
		d := m.delivery
		s.mu.Unlock()
		w.Header().Set("Idempotent-Replayed", "true")
		s.write(w, r, d.rep, nil)
		s.metrics.replayed()
		return d.rep, true
	case m != nil:
		s.mu.Unlock()
		for k, v := range m.header {
			w.Header()[k] = v
		}
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(m.status)
		w.Write(m.body)
		s.metrics.replayed()
		return reply{status: m.status, kind: m.header.Get("X-Sendonce-Kind")}, true
	}
	m = &remembered{fp: c.fp, done: make(chan struct{})}
	s.remembered[id] = m
	if len(s.remembered) > maxRemembered {
		s.shed()
	}
	s.mu.Unlock()

	rep := h(c)
	var buf bytes.Buffer
	rep.status = s.write(w, r, rep, &buf)
	s.mu.Lock()
	if keep(rep) {
		m.status, m.header, m.body, m.at, m.delivery = rep.status, w.Header().Clone(), buf.Bytes(), s.cfg.Now(), rep.delivery
	} else {
		delete(s.remembered, id) // asked again
	}
	close(m.done)
	s.mu.Unlock()
	return rep, false
}

// maxRemembered bounds the responses kept in memory. Past it the oldest finished ones
// are dropped before the retention ends; a retry of a claim, record or cross still
// gets its answer from the store, where the decision's request id lives.
const maxRemembered = 100_000

// shed drops the expired responses and then, while over the bound, the oldest tenth of
// the finished ones. s.mu is held.
func (s *Server) shed() {
	before := s.cfg.Now().Add(-s.cfg.Retention)
	var finished []*remembered
	for k, m := range s.remembered {
		switch {
		case !m.finished():
		case m.at.Before(before):
			delete(s.remembered, k)
		default:
			finished = append(finished, m)
		}
	}
	if len(s.remembered) <= maxRemembered*9/10 {
		return
	}
	slices.SortFunc(finished, func(a, b *remembered) int { return a.at.Compare(b.at) })
	drop := map[*remembered]bool{}
	for _, m := range finished[:len(finished)/10] {
		drop[m] = true
	}
	for k, m := range s.remembered {
		if drop[m] {
			delete(s.remembered, k)
		}
	}
}

// keep says whether a response is an answer a retry gets again: decisions and
// permanent refusals, not held, fail-closed or an interruption.
func keep(rep reply) bool {
	switch rep.kind {
	case "held", "fail_closed", "interrupted", "error":
		return false
	}
	return rep.status < 500
}

// IdempotencyKeyPattern is the one rule for an Idempotency-Key, as the server checks it
// and the OpenAPI description publishes it: 1-200 printable ASCII characters, no spaces.
const IdempotencyKeyPattern = `^[!-~]{1,200}$`

var idempotencyKey = regexp.MustCompile(IdempotencyKeyPattern)

// ValidIdempotencyKey says whether k follows IdempotencyKeyPattern.
func ValidIdempotencyKey(k string) bool { return idempotencyKey.MatchString(k) }

// fingerprint is the SHA-256 of a request: method, path, agent and the canonical JSON
// body, where a "content" member (base64 bytes) stands as its bytes' SHA-256. A body
// that is not JSON is fingerprinted as it is (and refused by its handler).
func fingerprint(method, path, agent string, body []byte) string {
	canon := body
	var v any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if d.Decode(&v) == nil {
		if obj, ok := v.(map[string]any); ok {
			if c, ok := obj["content"].(string); ok {
				b, err := base64.StdEncoding.DecodeString(c)
				if err != nil {
					b = []byte(c)
				}
				sum := sha256.Sum256(b)
				obj["content"] = "sha256:" + hex.EncodeToString(sum[:])
			}
		}
		if b, err := json.Marshal(v); err == nil { // map keys sorted: canonical
			canon = b
		}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", method, path, agent)
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil))
}

// decode reads a JSON body strictly: one object, known fields, right types.
func decode(body []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		var syntaxErr *json.SyntaxError
		var b64 base64.CorruptInputError
		switch {
		case errors.As(err, &b64):
			return sendonce.FieldErrorf("content", "is not base64 (standard alphabet, padded): %v", err)
		case errors.As(err, &typeErr):
			return sendonce.FieldErrorf(typeErr.Field, "must be a JSON %s, not %s", jsonType(typeErr.Type.Kind().String()), typeErr.Value)
		case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
			return sendonce.FieldErrorf("body", "is not a JSON object: %v", err)
		}
		return sendonce.FieldErrorf("body", "%v", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return sendonce.FieldErrorf("body", "holds more than one JSON value, or something after it")
	}
	return nil
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "string"
	case "slice":
		return "string (base64)"
	case "struct", "map":
		return "object"
	case "bool":
		return "boolean"
	}
	return "number"
}

func exit(code int) *int { return &code }

func retryAfter(h http.Header, seconds int) {
	if seconds > 0 {
		h.Set("Retry-After", strconv.Itoa(seconds))
	}
}

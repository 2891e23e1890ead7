package service

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/sendonce/sendonce"
)

// Problem is an error as application/problem+json (RFC 9457), with the error's kind and
// the exit code the CLI would give it (null where the CLI has none: an Idempotency-Key
// conflict, a request still in progress, a missing token).
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail"`
	Kind     string `json:"kind"`
	ExitCode *int   `json:"exit_code"`
	// Field is the request field that was wrong, for bad input.
	Field string `json:"field,omitempty"`
	// Result is the gate's answer when a refusal has one: who holds the key, what an
	// earlier attempt recorded, the first crossing's time.
	Result any `json:"result,omitempty"`
}

type problemBody struct {
	Kind     string
	Detail   string
	ExitCode *int
	Field    string
	Result   any
}

// statusOf is the one table from an error's kind to its HTTP status.
var statusOf = map[string]int{
	"bad_input":            http.StatusBadRequest,
	"idempotency_conflict": http.StatusUnprocessableEntity,
	"consumed":             http.StatusConflict,
	"crossed":              http.StatusConflict,
	"held":                 http.StatusConflict,
	"stale":                http.StatusPreconditionFailed,
	"fail_closed":          http.StatusServiceUnavailable,
	"interrupted":          http.StatusServiceUnavailable,
	"evidence_untrusted":   http.StatusUnprocessableEntity,
	"error":                http.StatusInternalServerError,
}

// failure is an error of the library as a problem reply; result is the gate's answer
// that came with it, if any.
func failure(err error, result any) reply {
	kind := sendonce.ErrorKind(err)
	b := problemBody{Kind: kind, Detail: err.Error(), ExitCode: exit(sendonce.ExitCode(err))}
	if kind == "idempotency_conflict" {
		b.ExitCode = nil // no CLI counterpart
	}
	var fe *sendonce.FieldError
	if errors.As(err, &fe) {
		b.Field = fe.Field
	}
	if !empty(result) {
		b.Result = result
	}
	rep := problemReply(statusOf[kind], b)
	if kind == "held" {
		rep.retryAfter = 1
	}
	return rep
}

func empty(v any) bool {
	switch r := v.(type) {
	case nil:
		return true
	case sendonce.Decision:
		return r.Decision == ""
	case sendonce.ClaimResult:
		return r.Decision == ""
	case sendonce.DeliveryResult:
		return r.Key == ""
	}
	return false
}

func problemReply(status int, b problemBody) reply {
	return reply{status: status, kind: b.Kind, body: Problem{Type: "https://sendonce.dev/problems/" + b.Kind, Title: http.StatusText(status),
		Status: status, Detail: b.Detail, Kind: b.Kind, ExitCode: b.ExitCode, Field: b.Field, Result: b.Result}}
}

func (s *Server) problem(w http.ResponseWriter, r *http.Request, _ string, status int, b problemBody) reply {
	rep := problemReply(status, b)
	s.write(w, r, rep, nil)
	return rep
}

type rawJSON []byte
type promText string

// write writes a reply (and copies its body to keep, when set) and returns the status
// it sent.
func (s *Server) write(w http.ResponseWriter, _ *http.Request, rep reply, keep *bytes.Buffer) int {
	var body []byte
	h := w.Header()
	switch b := rep.body.(type) {
	case rawJSON:
		h.Set("Content-Type", "application/json")
		body = b
	case promText:
		h.Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		body = []byte(b)
	case Problem:
		h.Set("Content-Type", "application/problem+json")
		body, _ = json.Marshal(b)
		h.Set("X-Sendonce-Kind", rep.kind)
	default:
		h.Set("Content-Type", "application/json")
		var err error
		if body, err = json.Marshal(b); err != nil {
			rep = problemReply(http.StatusInternalServerError, problemBody{Kind: "error", Detail: "the answer could not be encoded: " + err.Error()})
			body, _ = json.Marshal(rep.body)
		}
	}
	body = append(body, '\n')
	if rep.location != "" {
		h.Set("Location", rep.location)
	}
	retryAfter(h, rep.retryAfter)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(rep.status)
	w.Write(body)
	if keep != nil {
		keep.Write(body)
	}
	return rep.status
}

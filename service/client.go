package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sendonce/sendonce/internal/clock"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sendonce/sendonce"
)

// Client calls a sendonce service: what `sendonce mcp --service` and Go agents use. A
// call retries a lost response with the same Idempotency-Key, so that a retry learns
// what happened instead of asking again.
type Client struct {
	base  string // http://host:port or https://host:port
	http  *http.Client
	token string
}

// Dial makes a client for a service at addr: unix:PATH, http://HOST:PORT or
// https://HOST:PORT. token is the agent's bearer token.
func Dial(addr, token string) (*Client, error) {
	if token == "" {
		return nil, sendonce.FieldErrorf("token", "is required: the agent's bearer token ('sendonce token create NAME' on the service)")
	}
	c := &Client{token: token, http: &http.Client{}}
	switch {
	case strings.HasPrefix(addr, "unix:"):
		path := strings.TrimPrefix(addr, "unix:")
		if !filepath.IsAbs(path) {
			return nil, sendonce.FieldErrorf("service", "unix:%s: the socket's path must be absolute", path)
		}
		c.base = "http://sendonce"
		c.http.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}}
	case strings.HasPrefix(addr, "http://"), strings.HasPrefix(addr, "https://"):
		u, err := url.Parse(addr)
		if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, sendonce.FieldErrorf("service", "%q is not a service address: unix:PATH, http://HOST:PORT or https://HOST:PORT", addr)
		}
		c.base = strings.TrimSuffix(addr, "/")
	default:
		return nil, sendonce.FieldErrorf("service", "%q is not a service address: unix:PATH, http://HOST:PORT or https://HOST:PORT", addr)
	}
	return c, nil
}

// ProblemError is a problem the service answered. It matches the library's sentinel
// for its kind (ErrConsumed, ErrHeld, ...).
type ProblemError struct {
	Problem    Problem
	RetryAfter time.Duration
}

func (e *ProblemError) Error() string { return e.Problem.Detail }
func (e *ProblemError) Unwrap() error {
	switch e.Problem.Kind {
	case "bad_input":
		return sendonce.ErrInvalid
	case "consumed", "crossed":
		return sendonce.ErrConsumed
	case "held":
		return sendonce.ErrHeld
	case "stale":
		return sendonce.ErrStale
	case "fail_closed":
		return sendonce.ErrUnavailable
	case "evidence_untrusted":
		return sendonce.ErrEvidence
	case "idempotency_conflict":
		return sendonce.ErrRequestReused
	case "interrupted":
		return context.Canceled
	}
	return nil
}

// RetryFor is how long a client asks again for a lost answer.
const RetryFor = 2 * time.Minute

// lost says whether err may mean that the request was made but its answer lost, or
// that the service is restarting: worth asking again with the same key. A bad
// certificate, a bad address or a request that cannot be encoded are not.
func lost(err error) bool {
	var nerr net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EPIPE) ||
		(errors.As(err, &nerr) && nerr.Timeout())
}

// NewKey makes an Idempotency-Key.
func NewKey() string { return newID() }

// Do sends one request and decodes a 2xx answer into out. A POST carries key as its
// Idempotency-Key. A problem is a *ProblemError; its Result, when the service gave one,
// is decoded into out too. It returns the status code.
func (c *Client) Do(ctx context.Context, method, path, key string, in, out any) (int, http.Header, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, resp.Header, err
	}
	if resp.StatusCode < 300 {
		if out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				return resp.StatusCode, resp.Header, fmt.Errorf("the service's answer is unreadable: %v", err)
			}
		}
		return resp.StatusCode, resp.Header, nil
	}
	var p struct {
		Problem
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(b, &p); err != nil || p.Kind == "" {
		return resp.StatusCode, resp.Header, fmt.Errorf("the service answered %s: %.200s", resp.Status, b)
	}
	if len(p.Result) > 0 && out != nil {
		json.Unmarshal(p.Result, out)
	}
	pe := &ProblemError{Problem: p.Problem}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		pe.RetryAfter = time.Duration(s) * time.Second
	}
	return resp.StatusCode, resp.Header, pe
}

// post sends a POST with one Idempotency-Key until it gets an answer: a lost answer
// (the connection broke, or the service is restarting) or a request still in progress
// is asked again with the same key, never with a new one, for at most RetryFor.
func (c *Client) post(ctx context.Context, path string, in, out any) (int, http.Header, error) {
	key := NewKey()
	until := clock.System().Add(RetryFor)
	for {
		code, h, err := c.Do(ctx, http.MethodPost, path, key, in, out)
		var pe *ProblemError
		retry := code == 0 && lost(err) && ctx.Err() == nil
		if errors.As(err, &pe) && pe.Problem.Kind == "in_progress" {
			retry = true
		}
		if retry && clock.System().After(until) {
			return code, h, fmt.Errorf("%w: no answer from the service for %v (the request may have been decided: ask status, or retry with the same request): %v", sendonce.ErrUnavailable, RetryFor, err)
		}
		if !retry {
			return code, h, err
		}
		select {
		case <-ctx.Done():
			return code, h, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func statusQuery(req sendonce.StatusRequest) (url.Values, error) {
	q := url.Values{}
	if req.Key != "" {
		q.Set("key", req.Key)
	}
	if req.Destination.Title != "" {
		q.Set("to", req.Destination.Title)
	}
	if req.Destination.ProviderID != "" {
		q.Set("dest_id", req.Destination.ProviderID)
	}
	sum, err := digest(req.Content)
	if err != nil {
		return nil, err
	}
	if sum != "" {
		q.Set("sha256", sum)
	}
	return q, nil
}

// digest is the SHA-256 of a request's content, read here (as the agent).
func digest(c sendonce.Content) (string, error) {
	if c.SHA256 != "" {
		return c.SHA256, nil
	}
	b, err := readContent(c)
	if err != nil || b == nil {
		return "", err
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:]), nil
}

func readContent(c sendonce.Content) ([]byte, error) {
	switch {
	case c.File != nil:
		if _, err := c.File.Seek(0, io.SeekStart); err != nil {
			return nil, sendonce.FieldErrorf("file", "%v", err)
		}
		return io.ReadAll(c.File)
	case c.Path != "":
		b, err := os.ReadFile(c.Path)
		if err != nil {
			return nil, sendonce.FieldErrorf("file", "%v", err)
		}
		return b, nil
	}
	return nil, nil
}

// Status asks where a delivery stands.
func (c *Client) Status(ctx context.Context, req sendonce.StatusRequest) (sendonce.StatusResult, error) {
	return c.status(ctx, "/v1/status", req)
}

// Show is Status with every decision made about the delivery.
func (c *Client) Show(ctx context.Context, req sendonce.StatusRequest) (sendonce.StatusResult, error) {
	return c.status(ctx, "/v1/show", req)
}

func (c *Client) status(ctx context.Context, path string, req sendonce.StatusRequest) (sendonce.StatusResult, error) {
	q, err := statusQuery(req)
	if err != nil {
		return sendonce.StatusResult{}, err
	}
	var out sendonce.StatusResult
	_, _, err = c.Do(ctx, http.MethodGet, path+"?"+q.Encode(), "", nil, &out)
	return out, err
}

// Reconcile asks the service to ask its own provider account about a key's unknown
// attempts (req.Key; the rest of req is the service's own).
func (c *Client) Reconcile(ctx context.Context, req sendonce.ReconcileRequest) (sendonce.ReconcileResult, error) {
	var out sendonce.ReconcileResult
	_, _, err := c.post(ctx, "/v1/reconcile", ReconcileBody{Key: req.Key}, &out)
	return out, err
}

// Deliver sends the bytes of req.Content (read here, as the agent) to the service and
// waits for the delivery's result, polling while it runs. Only the destination, the
// content, the task and the app of req are sent: the service chooses the rest.
func (c *Client) Deliver(ctx context.Context, req sendonce.DeliveryRequest) (sendonce.DeliveryResult, error) {
	b, err := readContent(req.Content)
	if err != nil {
		return sendonce.DeliveryResult{}, err
	}
	if b == nil {
		return sendonce.DeliveryResult{}, sendonce.FieldErrorf("file", "is required")
	}
	name := req.Content.Path
	if req.Content.File != nil {
		name = req.Content.File.Name()
	}
	body := DeliverBody{To: req.Destination.Title, DestID: req.Destination.ProviderID, FileName: filepath.Base(name), Content: b, Task: req.Task, App: req.App}
	var out sendonce.DeliveryResult
	var accepted DeliveryAccepted
	raw := json.RawMessage{}
	code, _, err := c.post(ctx, "/v1/deliveries", body, &raw)
	if err != nil {
		json.Unmarshal(raw, &out)
		return out, err
	}
	if code != http.StatusAccepted {
		return out, json.Unmarshal(raw, &out)
	}
	if err := json.Unmarshal(raw, &accepted); err != nil {
		return out, err
	}
	for {
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("%w: the delivery goes on in the service: ask status for its key", ctx.Err())
		case <-time.After(time.Second):
		}
		raw = json.RawMessage{}
		code, _, err := c.Do(ctx, http.MethodGet, accepted.Location, "", nil, &raw)
		switch {
		case code == 0 && err != nil && ctx.Err() == nil:
			continue // no answer: ask again
		case err != nil:
			json.Unmarshal(raw, &out)
			return out, err
		case code == http.StatusAccepted:
			continue
		}
		return out, json.Unmarshal(raw, &out)
	}
}

package service

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sendonce/sendonce"
)

// DeliverBody is a delivery: the bytes themselves and where they go. The service never
// opens a path an agent names.
type DeliverBody struct {
	To       string `json:"to" jsonschema:"the conversation's exact visible title, checked on screen before anything is sent"`
	DestID   string `json:"dest_id,omitempty" jsonschema:"the destination's provider id, e.g. xmpp:bob@example.org (strong)"`
	FileName string `json:"file_name" jsonschema:"the file name the recipient sees"`
	Content  []byte `json:"content" jsonschema:"the file's bytes, base64"`
	Task     string `json:"task,omitempty" jsonschema:"the sub-task (the service records TOKEN-NAME/SUBTASK); a new one when empty"`
	App      string `json:"app,omitempty" jsonschema:"the chat app's profile (default: the service's)"`
}

// DeliveryAccepted answers a delivery that did not finish within the client's wait
// (202): poll Location until it answers with the result.
type DeliveryAccepted struct {
	ID       string `json:"id"`
	Status   string `json:"status"` // running
	Location string `json:"location"`
}

// delivery is one delivery the service runs.
type delivery struct {
	id    string
	agent string
	done  chan struct{}
	rep   reply
	at    time.Time
}

func (d *delivery) finished() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

func (s *Server) deliver(c *call) reply {
	if s.cfg.Deliver == nil {
		return failure(sendonce.FieldErrorf("body", "this sendonce service was built without the desktop (cgo): it serves the gate calls, not deliveries"), nil)
	}
	var b DeliverBody
	if err := decode(c.body, &b); err != nil {
		return failure(err, nil)
	}
	if b.To == "" {
		return failure(sendonce.FieldErrorf("to", "is required: the conversation's exact visible title"), nil)
	}
	if b.FileName == "" || b.FileName != filepath.Base(b.FileName) || b.FileName == "." || b.FileName == ".." || strings.ContainsAny(b.FileName, "\x00\n\r") {
		return failure(sendonce.FieldErrorf("file_name", "%q is not a file name (no folders)", b.FileName), nil)
	}
	if len(b.Content) == 0 {
		return failure(sendonce.FieldErrorf("content", "is required: the file's bytes, base64 (an empty file is not delivered)"), nil)
	}
	task, err := c.task(b.Task, false)
	if err != nil {
		return failure(err, nil)
	}
	wait := s.cfg.DeliveryWait
	if w, ok := preferWait(c.r.Header.Get("Prefer")); ok && w < wait {
		wait = w
	}
	f, cleanup, err := writeContent(s.cfg.ContentDir, b.FileName, b.Content)
	if err != nil {
		return failure(err, nil)
	}
	req := s.cfg.Defaults
	if b.App != "" {
		req.App, req.Profile = b.App, nil
	}
	req.Destination = sendonce.Destination{Title: b.To, ProviderID: b.DestID}
	req.Content, req.Task, req.Request = sendonce.Content{File: f}, task, c.ref()

	d := &delivery{id: newID(), agent: c.agent, done: make(chan struct{})}
	s.mu.Lock()
	s.deliveries[d.id] = d
	s.mu.Unlock()
	s.inFlight.Add(1)
	s.metrics.deliveryStarted()
	go func() {
		defer s.inFlight.Done()
		defer cleanup()
		start := s.cfg.Now()
		// Not the request's context: a client that goes away, or a shutdown, never
		// stops a delivery between a crossing and its act; the Deliverer records an
		// outcome on every way out.
		ctx := context.Background()
		s.one <- struct{}{}
		res, err := s.cfg.Deliver(ctx, req)
		<-s.one
		rep := ok(res)
		if err != nil {
			rep = failure(err, res)
			if rep.kind == "held" && res.Key != "" {
				rep.retryAfter = s.holderRetry(ctx, res.Key)
			}
		}
		s.metrics.deliveryEnded(res.Outcome, s.cfg.Now().Sub(start))
		s.mu.Lock()
		d.rep, d.at = rep, s.cfg.Now()
		close(d.done)
		s.mu.Unlock()
	}()
	select {
	case <-d.done:
		return d.rep
	case <-time.After(wait):
		loc := "/v1/deliveries/" + d.id
		return reply{status: http.StatusAccepted, body: DeliveryAccepted{ID: d.id, Status: "running", Location: loc}, location: loc, retryAfter: 2, delivery: d}
	}
}

// preferWait reads RFC 7240's Prefer: wait=N.
func preferWait(h string) (time.Duration, bool) {
	for _, p := range strings.Split(h, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(p), "wait="); ok {
			if n, err := strconv.Atoi(v); err == nil && n >= 0 {
				return time.Duration(n) * time.Second, true
			}
		}
	}
	return 0, false
}

func (s *Server) getDelivery(c *call) reply {
	id := c.r.PathValue("id")
	s.mu.Lock()
	d := s.deliveries[id]
	s.mu.Unlock()
	if d == nil || d.agent != c.agent {
		return problemReply(http.StatusNotFound, problemBody{Kind: "not_found", Detail: "no delivery " + id + " for this token (results are kept for the retention; ask /v1/status for the key)"})
	}
	select {
	case <-d.done:
		return d.rep
	default:
		loc := "/v1/deliveries/" + d.id
		return reply{status: http.StatusAccepted, body: DeliveryAccepted{ID: d.id, Status: "running", Location: loc}, location: loc, retryAfter: 2}
	}
}

package console

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/internal/clock"
)

// maxStreams bounds the live streams one session may hold open (its tabs).
const maxStreams = 4

// heartbeat is how often a stream with nothing new says it is alive (a comment line),
// so that a connection that died unseen is found and closed.
const heartbeat = 15 * time.Second

// live streams the "needs a person" list as server-sent events: the list's rows,
// drawn as the page draws them, whenever they change; a "failed" event, with why, when
// the store cannot be read or its guard refuses it (the page then says the list is
// stale). The stream ends when the session does (a revoked token, a logout, its end)
// or the console closes.
func (c *Console) live(q *request) {
	c.mu.Lock()
	if q.s.streams >= maxStreams {
		c.mu.Unlock()
		c.fail(q.w, q.r, q.s, http.StatusTooManyRequests, fmt.Sprintf("This session has %d live lists open already: close a tab.", maxStreams))
		return
	}
	q.s.streams++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		q.s.streams--
		c.mu.Unlock()
	}()
	rc := http.NewResponseController(q.w)
	send := func(text string) bool {
		rc.SetWriteDeadline(clock.System().Add(30 * time.Second))
		if _, err := fmt.Fprint(q.w, text); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	h := q.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	q.w.WriteHeader(http.StatusOK)
	tick := time.NewTicker(c.cfg.Live)
	defer tick.Stop()
	last, quiet := "", 0
	for {
		event, data := "needs", ""
		var err error
		if c.cfg.Guard != nil {
			err = c.cfg.Guard(q.r.Context())
		}
		var res sendonce.NeedsPersonResult
		if err == nil {
			res, err = c.cfg.Client.NeedsPerson(q.r.Context(), sendonce.NeedsPersonRequest{})
		}
		var b bytes.Buffer
		if err == nil {
			err = c.pages.ExecuteTemplate(&b, "needs-rows", pageData{Needs: &res, Now: c.cfg.Now(), Who: whoOf(q.s)})
		}
		if err != nil {
			event, data = "failed", "the store cannot be read: "+err.Error()
		} else {
			data = b.String()
		}
		quiet++
		switch key := event + "\x00" + stripAges(data); {
		case key != last:
			last, quiet = key, 0
			if !send("event: " + event + "\n" + dataLines(data) + "\n") {
				return
			}
		case time.Duration(quiet)*c.cfg.Live >= heartbeat:
			quiet = 0
			if !send(": alive\n\n") {
				return
			}
		}
		select {
		case <-q.r.Context().Done():
			return
		case <-c.closed:
			return
		case <-tick.C:
		}
		if _, s, err := c.session(q.r); err != nil || s == nil {
			send("event: ended\ndata: the session ended: log in again\n\n")
			return
		}
	}
}

// stripAges drops the ages from the rows, so that only a change in the list sends it
// again (the ages are drawn fresh with it).
func stripAges(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if !strings.Contains(line, `class="age"`) {
			b.WriteString(line)
		}
	}
	return b.String()
}

// dataLines is an event's data: one "data:" line for each of its lines. An event
// stream also ends a line at a carriage return, which HTML escaping leaves alone (a
// file name may hold one): it is written as a character reference, so that no name can
// end the event or start another.
func dataLines(s string) string {
	s = strings.ReplaceAll(s, "\r", "&#13;")
	var b strings.Builder
	for line := range strings.Lines(strings.TrimRight(s, "\n")) {
		b.WriteString("data: " + strings.TrimRight(line, "\n") + "\n")
	}
	if b.Len() == 0 {
		b.WriteString("data: \n")
	}
	return b.String()
}

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

// live streams the "needs a person" list as server-sent events: the list's rows,
// drawn as the page draws them, whenever they change; a "failed" event, with why, when
// the store cannot be read (the page then says the list is stale). The stream ends
// when the session does (a revoked token, a logout, its end) or the console closes.
func (c *Console) live(q *request) {
	rc := http.NewResponseController(q.w)
	h := q.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	q.w.WriteHeader(http.StatusOK)
	tick := time.NewTicker(c.cfg.Live)
	defer tick.Stop()
	last := ""
	for {
		var b bytes.Buffer
		event, data := "needs", ""
		res, err := c.cfg.Client.NeedsPerson(q.r.Context(), sendonce.NeedsPersonRequest{})
		if err == nil {
			err = c.pages.ExecuteTemplate(&b, "needs-rows", pageData{Needs: &res, Now: c.cfg.Now(), Who: whoOf(q.s)})
		}
		if err != nil {
			event, data = "failed", "the store cannot be read: "+err.Error()
		} else {
			data = b.String()
		}
		if key := event + "\x00" + stripAges(data); key != last {
			last = key
			rc.SetWriteDeadline(clock.System().Add(30 * time.Second))
			if _, err := fmt.Fprintf(q.w, "event: %s\n%s\n", event, dataLines(data)); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
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
			fmt.Fprintf(q.w, "event: ended\ndata: the session ended: log in again\n\n")
			rc.Flush()
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

// dataLines is an event's data: one "data:" line for each of its lines.
func dataLines(s string) string {
	var b strings.Builder
	for line := range strings.Lines(strings.TrimRight(s, "\n")) {
		b.WriteString("data: " + strings.TrimRight(line, "\r\n") + "\n")
	}
	if b.Len() == 0 {
		b.WriteString("data: \n")
	}
	return b.String()
}

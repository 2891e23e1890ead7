package console

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

// pageData is what every page's template is given.
type pageData struct {
	Title string
	Who   *who
	Flash *flash
	Error string
	Next  string // the login page's destination

	Needs      *sendonce.NeedsPersonResult
	Deliveries *sendonce.DeliveriesResult
	Filter     filter
	States     []store.AttemptState
	NextPage   string // the next page's URL
	Live       bool   // the needs page's first page: the script keeps it live
	Key        *keyView
	Now        time.Time
}

// who is the person a page is shown to.
type who struct {
	Name string
	Role Role
	CSRF string
}

func (w *who) CanAct() bool { return w != nil && w.Role == Operator }

func whoOf(s *session) *who { return &who{Name: s.name, Role: s.role, CSRF: s.csrf} }

// filter is the deliveries page's filter, as the form gave it.
type filter struct {
	To, DestID, State, Workstation, Day string
}

var funcs = template.FuncMap{
	"since": func(now time.Time, t sendonce.Time) string {
		if t.IsZero() {
			return ""
		}
		return age(now.Sub(t.Time))
	},
	"stamp": func(t sendonce.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"size": func(n int64) string {
		switch {
		case n >= 10<<20:
			return fmt.Sprintf("%d MB", n>>20)
		case n >= 10<<10:
			return fmt.Sprintf("%d KB", n>>10)
		}
		return fmt.Sprintf("%d bytes", n)
	},
	"short": func(s string) string {
		if len(s) > 12 {
			return s[:12] + "…"
		}
		return s
	},
	"keyURL": func(k string) string { return "/key?k=" + url.QueryEscape(k) },
	"weak":   func(s gate.Strength) bool { return s != gate.Strong },
}

// age is a duration as a person reads an age.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Hours()))
	}
	return fmt.Sprintf("%d days", int(d.Hours()/24))
}

// render writes a page; a template error is the console's own bug, shown plainly.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, d pageData) {
	var b bytes.Buffer
	if err := c.pages.ExecuteTemplate(&b, name, d); err != nil {
		http.Error(w, "the console could not draw this page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

func (c *Console) page(q *request, name string, d pageData) {
	d.Who, d.Flash, d.Now = whoOf(q.s), c.takeFlash(q.s), c.cfg.Now()
	c.render(q.w, q.r, http.StatusOK, name, d)
}

// problem shows an error as the page, with the status its kind maps to.
func (c *Console) problem(q *request, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, sendonce.ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(err, sendonce.ErrUnavailable):
		status = http.StatusServiceUnavailable
	}
	c.fail(q.w, q.r, q.s, status, err.Error())
}

func (c *Console) needsPage(q *request) {
	after, _ := strconv.ParseUint(q.r.URL.Query().Get("after"), 10, 64)
	res, err := c.cfg.Client.NeedsPerson(c.ctx(q.r), sendonce.NeedsPersonRequest{After: after})
	if err != nil {
		c.problem(q, err)
		return
	}
	d := pageData{Title: "Needs a person", Needs: &res, Live: after == 0}
	if res.Next != 0 {
		d.NextPage = "/?after=" + strconv.FormatUint(res.Next, 10)
	}
	c.page(q, "needs", d)
}

func (c *Console) deliveriesPage(q *request) {
	v := q.r.URL.Query()
	f := filter{To: v.Get("to"), DestID: v.Get("dest_id"), State: v.Get("state"), Workstation: v.Get("workstation"), Day: v.Get("day")}
	before, _ := strconv.ParseUint(v.Get("before"), 10, 64)
	res, err := c.cfg.Client.Deliveries(c.ctx(q.r), sendonce.DeliveriesRequest{Destination: sendonce.Destination{Title: f.To, ProviderID: f.DestID},
		State: f.State, Workstation: f.Workstation, Day: f.Day, Before: before})
	d := pageData{Title: "Deliveries", Filter: f, States: store.AttemptStates}
	if err != nil {
		if !errors.Is(err, sendonce.ErrInvalid) {
			c.problem(q, err)
			return
		}
		d.Error = err.Error() // the filter was wrong: show it beside the form
	} else {
		d.Deliveries = &res
	}
	if res.Next != 0 {
		v.Set("before", strconv.FormatUint(res.Next, 10))
		d.NextPage = "/deliveries?" + v.Encode()
	}
	c.page(q, "deliveries", d)
}

// keyView is a key's page: its history, and each attempt's evidence.
type keyView struct {
	Status   sendonce.StatusResult
	Attempts []attemptView
	Events   []eventView
	Consumed bool // a signed authorization may reopen it
}

type attemptView struct {
	sendonce.Attempt
	Intent   int64
	State    store.AttemptState
	Unknown  bool   // unknown, of the intent's current revision: a person may confirm it
	Bundle   string // why the bundle is not shown, when it is not
	Verified *sendonce.VerifyResult
	Problem  string // the verification's failure
}

type eventView struct {
	store.Event
	Details []detailView
}

type detailView struct{ Name, Value string }

func (c *Console) keyPage(q *request) {
	key := q.r.URL.Query().Get("k")
	if key == "" {
		c.fail(q.w, q.r, q.s, http.StatusBadRequest, "Which key? The page needs ?k=KEY.")
		return
	}
	st, err := c.cfg.Client.Show(c.ctx(q.r), sendonce.StatusRequest{Key: key})
	if err != nil {
		c.problem(q, err)
		return
	}
	now := c.cfg.Now()
	v := &keyView{Status: st}
	v.Consumed = st.Status == gate.StatusSendStatusUnknown || st.Status == gate.StatusSentVerified || st.Status == gate.StatusSentRejected
	for _, in := range st.Intents {
		for _, a := range in.Attempts {
			av := attemptView{Attempt: a, Intent: in.Intent, State: stateOf(a, now)}
			av.Unknown = av.State == store.StateUnknown && a.Revision == in.Revision
			if dir, why := c.bundleDir(a); why != "" {
				av.Bundle = why
			} else {
				res, err := c.cfg.Client.VerifyEvidence(c.ctx(q.r), sendonce.VerifyRequest{Path: dir, AllowUnauthenticated: true})
				switch {
				case err != nil:
					av.Problem = err.Error()
				case res.DispatchID != a.DispatchID: // the store's attempt, not the one the bundle names
					av.Problem = "the bundle in this attempt's place is attempt " + res.DispatchID + "'s"
				default:
					av.Verified = &res
				}
			}
			v.Attempts = append(v.Attempts, av)
		}
		for _, e := range in.Events {
			ev := eventView{Event: e}
			for _, name := range sortedKeys(e.Detail) {
				ev.Details = append(ev.Details, detailView{name, e.Detail[name]})
			}
			v.Events = append(v.Events, ev)
		}
	}
	c.page(q, "key", pageData{Title: "Key", Key: v})
}

// stateOf is an attempt's state as the store lists it.
func stateOf(a sendonce.Attempt, now time.Time) store.AttemptState {
	return store.StateFrom(a.Outcome, a.LeaseExpiresAt.Time, len(a.Crossings) > 0, now)
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}

// bundleDir is an attempt's bundle folder on this machine, or why there is none here.
// The store's path is not followed (any workstation of the fleet writes it): a bundle
// is the folder this machine's deliveries make, EVIDENCE-ROOT/DISPATCH-ID, for an
// attempt this workstation made, no link on the way; and what it holds is then checked
// to be that attempt's (the callers compare the manifest's dispatch id).
func (c *Console) bundleDir(a sendonce.Attempt) (string, string) {
	switch {
	case a.Evidence == "":
		return "", "the attempt named no evidence bundle"
	case a.Workstation != c.cfg.Workstation:
		return "", "the bundle stays on workstation " + a.Workstation + ", which made the attempt"
	case a.DispatchID == "" || a.DispatchID != filepath.Base(a.DispatchID) || strings.HasPrefix(a.DispatchID, "."):
		return "", "the attempt's dispatch id names no folder"
	}
	root, err := filepath.EvalSymlinks(c.cfg.Client.EvidenceRoot())
	if err != nil {
		return "", "this machine has no evidence folder"
	}
	dir := filepath.Join(root, a.DispatchID)
	fi, err := os.Lstat(dir)
	switch {
	case err != nil:
		return "", "the bundle is not on this machine"
	case !fi.IsDir():
		return "", "the bundle's place holds no folder (a link is never followed)"
	}
	return dir, ""
}

// openBundle opens the attempt's bundle, verified, and checks it is that attempt's.
func (c *Console) openBundle(q *request, a sendonce.Attempt) (*sendonce.Bundle, bool) {
	dir, why := c.bundleDir(a)
	if why != "" {
		c.fail(q.w, q.r, q.s, http.StatusNotFound, why)
		return nil, false
	}
	b, err := sendonce.OpenBundle(dir, nil)
	if err != nil {
		c.problem(q, err)
		return nil, false
	}
	if b.Manifest.DispatchID != a.DispatchID {
		b.Close()
		c.fail(q.w, q.r, q.s, http.StatusConflict, "The bundle in this attempt's place is attempt "+b.Manifest.DispatchID+"'s.")
		return nil, false
	}
	return b, true
}

// attemptOf finds the attempt ?k=KEY&d=DISPATCH names.
func (c *Console) attemptOf(q *request) (sendonce.Attempt, bool) {
	v := q.r.URL.Query()
	st, err := c.cfg.Client.Status(c.ctx(q.r), sendonce.StatusRequest{Key: v.Get("k")})
	if err != nil {
		c.problem(q, err)
		return sendonce.Attempt{}, false
	}
	for _, in := range st.Intents {
		for _, a := range in.Attempts {
			if a.DispatchID == v.Get("d") {
				return a, true
			}
		}
	}
	c.fail(q.w, q.r, q.s, http.StatusNotFound, "That key has no such attempt.")
	return sendonce.Attempt{}, false
}

// attemptBundle is the attempt ?k=KEY&d=DISPATCH names and its bundle, opened; a
// failure is written.
func (c *Console) attemptBundle(q *request) (sendonce.Attempt, *sendonce.Bundle, bool) {
	a, ok := c.attemptOf(q)
	if !ok {
		return a, nil, false
	}
	b, ok := c.openBundle(q, a)
	return a, b, ok
}

// report is an attempt's evidence as 'evidence report' writes it, framed by the key's
// page: a page of its own, sandboxed (no script, no form, no navigation), whose images
// are the bundle's frames inline.
func (c *Console) report(q *request) {
	_, b, ok := c.attemptBundle(q)
	if !ok {
		return
	}
	defer b.Close()
	h := q.w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; img-src data:; style-src 'unsafe-inline'; frame-ancestors 'self'; sandbox")
	h.Set("X-Frame-Options", "SAMEORIGIN")
	h.Set("Content-Type", "text/html; charset=utf-8")
	b.WriteReport(q.w) // streamed: a failure halfway shows as a cut page
}

// bundle downloads an attempt's bundle as 'evidence export' writes it, streamed.
func (c *Console) bundle(q *request) {
	a, b, ok := c.attemptBundle(q)
	if !ok {
		return
	}
	defer b.Close()
	q.w.Header().Set("Content-Type", "application/gzip")
	q.w.Header().Set("Content-Disposition", `attachment; filename="`+safeFileName(a.DispatchID)+`.tar.gz"`)
	b.Export(q.w)
}

func safeFileName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, s)
}

// by is who an action is recorded as: the person's token name, through the console.
func (q *request) by() string { return q.s.name + " (console operator)" }

// back returns to the key's page after an action.
func (c *Console) back(q *request, key string) {
	http.Redirect(q.w, q.r, "/key?k="+url.QueryEscape(key), http.StatusSeeOther)
}

func (c *Console) reconcile(q *request) {
	key := q.r.PostFormValue("key")
	if key == "" {
		c.fail(q.w, q.r, q.s, http.StatusBadRequest, "Which key? The form names none.")
		return
	}
	res, err := c.cfg.Client.Reconcile(c.ctx(q.r), sendonce.ReconcileRequest{Key: key, ProviderConfig: c.cfg.ProviderConfig, Staging: c.cfg.Staging, By: q.by()})
	switch {
	case err != nil:
		c.setFlash(q.s, false, "The provider was not asked: "+err.Error())
	case len(res.Reconciled) == 0:
		c.setFlash(q.s, true, "Nothing of this key is unknown now: there was nothing to ask.")
	default:
		var lines []string
		for _, r := range res.Reconciled {
			line := r.DispatchID + ": " + r.Result
			if r.Outcome != "" {
				line += " " + r.Outcome
			}
			lines = append(lines, line+" ("+r.Detail+")")
		}
		c.setFlash(q.s, true, "The provider was asked: "+strings.Join(lines, "; "))
	}
	c.back(q, key)
}

func (c *Console) confirm(q *request) {
	key, dispatch, note := q.r.PostFormValue("key"), q.r.PostFormValue("dispatch"), q.r.PostFormValue("note")
	if q.r.PostFormValue("sure") != "yes" {
		c.setFlash(q.s, false, "Nothing was recorded: tick the box that says the recipient has exactly this file.")
		c.back(q, key)
		return
	}
	res, err := c.cfg.Client.ConfirmDelivery(c.ctx(q.r), sendonce.ConfirmRequest{DispatchID: dispatch, By: q.by(), Note: note})
	if err != nil {
		c.setFlash(q.s, false, "Nothing was recorded: "+err.Error())
	} else {
		c.setFlash(q.s, true, "Recorded: attempt "+res.DispatchID+" is "+string(res.Outcome)+", confirmed by "+q.s.name+".")
	}
	c.back(q, key)
}

func (c *Console) authorize(q *request) {
	key, reason := q.r.FormValue("key"), q.r.FormValue("reason")
	f, _, err := q.r.FormFile("signed")
	if err != nil {
		c.setFlash(q.s, false, "Nothing was changed: choose the signed authorization file ('sendonce authorizer sign' wrote it).")
		c.back(q, key)
		return
	}
	signed, err := io.ReadAll(io.LimitReader(f, maxUpload))
	f.Close()
	if err != nil {
		c.problem(q, err)
		return
	}
	res, err := c.cfg.Client.Authorize(c.ctx(q.r), sendonce.AuthorizeRequest{Key: key, Reason: reason, Signed: signed, By: q.by()})
	if err != nil {
		c.setFlash(q.s, false, "Nothing was changed: "+err.Error())
	} else {
		c.setFlash(q.s, true, fmt.Sprintf("Authorized: revision %d of this key is open for one redelivery, signed by %s, accepted by %s.", res.Revision, res.Authorizer, q.s.name))
	}
	c.back(q, key)
}

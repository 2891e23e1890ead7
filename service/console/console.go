// Package console is the people's side of 'sendonce serve': server-rendered pages that
// answer "what needs me?" across every workstation sharing the store, show an
// attempt's history and evidence as the screen showed it, and let an operator take the
// actions only a person may take (ask the provider again, record a delivery confirmed
// by other means, accept a signed redelivery authorization), each recorded with who.
//
// Pages are Go's html/template, with no script needed; one small script only keeps
// the "needs a person" list live (server-sent events). Every string a chat app, a peer,
// a file name or a bundle supplies is attacker-controlled and is escaped; the pages
// carry a strict Content Security Policy. A person logs in once with an operator or
// auditor token; a session is a cookie (HttpOnly, SameSite=Strict, Secure under TLS)
// and every action carries the session's CSRF token. Nothing here grants a key: each
// action goes through the same store rules as the CLI's.
//
// The package never logs.
package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/internal/clock"
)

// Role is what a person's token lets them do here.
type Role string

const (
	Operator Role = "operator" // sees everything, takes a person's actions
	Auditor  Role = "auditor"  // sees everything, acts on nothing
)

// People says who holds a token, by the token's SHA-256 in hex (TokenHash): the console
// keeps only that. An agent's token, or none, is the zero name.
type People interface {
	Person(tokenHash string) (name string, role Role, err error)
}

// TokenHash is what People is asked with: a token's SHA-256, in hex.
func TokenHash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// Config is what a Console serves.
type Config struct {
	Client *sendonce.Client
	People People
	// Secure marks the session cookie Secure: the service listens with TLS.
	Secure bool
	// ProviderConfig and Staging are what reconcile uses (as the service's own).
	ProviderConfig, Staging string
	// Workstation is this machine's id: bundles of attempts made elsewhere stay there.
	Workstation string
	// Guard, when set, is asked before the live list is read each time (as the service
	// asks it before each request): an error fails the stream closed, and it says so.
	Guard func(context.Context) error
	// Live is how often the live list asks the store again (2s when 0).
	Live time.Duration
	// SessionTTL is how long a session lasts from its login (8h when 0).
	SessionTTL time.Duration
	Now        func() time.Time
}

// Console is the console's http.Handler. Close ends its live streams.
type Console struct {
	cfg   Config
	mux   *http.ServeMux
	pages *template.Template

	mu       sync.Mutex
	sessions map[string]*session // by the cookie's value
	closed   chan struct{}
	once     sync.Once
}

// session is one person's login.
type session struct {
	name    string
	hash    string // the token's SHA-256: a revoked token ends the session
	role    Role
	csrf    string
	expires time.Time
	flash   *flash // an action's result, shown once
	streams int    // live streams open
}

type flash struct {
	OK   bool
	Text string
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New makes the console.
func New(cfg Config) (*Console, error) {
	if cfg.Client == nil || cfg.People == nil {
		return nil, errors.New("console: a Client and People are required")
	}
	if cfg.Live <= 0 {
		cfg.Live = 2 * time.Second
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 8 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = clock.System
	}
	pages, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, mux: http.NewServeMux(), pages: pages, sessions: map[string]*session{}, closed: make(chan struct{})}
	static, _ := fs.Sub(staticFS, "static")
	c.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET /login", c.loginPage)
	c.mux.HandleFunc("POST /login", c.login)
	c.mux.HandleFunc("POST /logout", c.person(false, c.logout))
	c.mux.HandleFunc("GET /{$}", c.person(false, c.needsPage))
	c.mux.HandleFunc("GET /deliveries", c.person(false, c.deliveriesPage))
	c.mux.HandleFunc("GET /key", c.person(false, c.keyPage))
	c.mux.HandleFunc("GET /evidence/report", c.person(false, c.report))
	c.mux.HandleFunc("GET /evidence/bundle", c.person(false, c.bundle))
	c.mux.HandleFunc("GET /live", c.person(false, c.live))
	c.mux.HandleFunc("POST /reconcile", c.person(true, c.reconcile))
	c.mux.HandleFunc("POST /confirm", c.person(true, c.confirm))
	c.mux.HandleFunc("POST /authorize", c.person(true, c.authorize))
	c.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, nil, http.StatusNotFound, "There is no such page.")
	})
	return c, nil
}

// Close ends the live streams (a server's Shutdown waits for them otherwise).
func (c *Console) Close() { c.once.Do(func() { close(c.closed) }) }

// ServeHTTP serves the console, with its security headers on every answer.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	c.mux.ServeHTTP(w, r)
}

// cookieName is the session cookie's name: __Host- under TLS, which a browser keeps
// only for the exact origin, Secure, with Path=/.
func (c *Console) cookieName() string {
	if c.cfg.Secure {
		return "__Host-sendonce"
	}
	return "sendonce_session"
}

// request is one page's or action's caller.
type request struct {
	w   http.ResponseWriter
	r   *http.Request
	s   *session
	sid string
}

// person serves h to a request with a live session (and, for an action, an operator's
// session and its CSRF token); others are sent to the login page, or refused.
func (c *Console) person(act bool, h func(*request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sid, s, err := c.session(r)
		if err != nil {
			c.fail(w, r, nil, http.StatusServiceUnavailable, "The service cannot read its token file now: ask its operator.")
			return
		}
		if s == nil {
			if r.Method == http.MethodGet && r.URL.Path != "/live" {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			c.fail(w, r, nil, http.StatusUnauthorized, "Log in first: the session ended or was never made.")
			return
		}
		req := &request{w: w, r: r, s: s, sid: sid}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxUpload)
			if !sameOrigin(r) || !c.csrfOK(r, s) {
				c.fail(w, r, s, http.StatusForbidden, "The form was not this console's own (its CSRF token did not match): reload the page and try again.")
				return
			}
			if act && s.role != Operator {
				c.fail(w, r, s, http.StatusForbidden, "An auditor sees everything and acts on nothing: this action needs an operator's token.")
				return
			}
		}
		h(req)
	}
}

// session is the request's live session: its cookie names one that has not ended, and
// its token is still live (a revoked token ends its sessions at their next request).
func (c *Console) session(r *http.Request) (string, *session, error) {
	ck, err := r.Cookie(c.cookieName())
	if err != nil || ck.Value == "" {
		return "", nil, nil
	}
	c.mu.Lock()
	s := c.sessions[ck.Value]
	if s != nil && !c.cfg.Now().Before(s.expires) {
		delete(c.sessions, ck.Value)
		s = nil
	}
	c.mu.Unlock()
	if s == nil {
		return "", nil, nil
	}
	name, role, err := c.cfg.People.Person(s.hash)
	if err != nil {
		return "", nil, err
	}
	if name != s.name || role != s.role {
		c.mu.Lock()
		delete(c.sessions, ck.Value)
		c.mu.Unlock()
		return "", nil, nil
	}
	return ck.Value, s, nil
}

// sameOrigin refuses a form another site posted. A browser says where a request comes
// from in Sec-Fetch-Site, which no page can set; an older one, in Origin (a page whose
// referrer policy is no-referrer sends "null" there). A request that says neither
// (curl) relies on the CSRF token and the SameSite=Strict cookie alone.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin" || site == "none"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

// csrfOK parses the form (its body bounded by maxUpload, a multipart one kept in
// memory) and checks its CSRF token.
func (c *Console) csrfOK(r *http.Request, s *session) bool {
	var err error
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		err = r.ParseMultipartForm(maxUpload)
	} else {
		err = r.ParseForm()
	}
	got := r.PostFormValue("csrf")
	return err == nil && got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) == 1
}

// maxUpload bounds a form's body: a signed authorization is a few hundred bytes.
const maxUpload = 64 << 10

func randomString() string {
	var b [32]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "login", pageData{Title: "Log in", Next: safeNext(r.URL.Query().Get("next"))})
}

// login makes a session for an operator's or an auditor's token; an agent's token
// opens nothing here.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if !sameOrigin(r) {
		c.fail(w, r, nil, http.StatusForbidden, "The login form was not this console's own.")
		return
	}
	secret := strings.TrimSpace(r.PostFormValue("token"))
	next := safeNext(r.PostFormValue("next"))
	name, role, err := c.cfg.People.Person(TokenHash(secret))
	if err != nil {
		c.fail(w, r, nil, http.StatusServiceUnavailable, "The service cannot read its token file now: ask its operator.")
		return
	}
	if secret == "" || name == "" || (role != Operator && role != Auditor) {
		c.render(w, r, http.StatusUnauthorized, "login", pageData{Title: "Log in", Next: next,
			Flash: &flash{Text: "That token opens nothing here: the console takes an operator's or an auditor's token ('sendonce token create --role operator NAME'); an agent's token opens only the API."}})
		return
	}
	sid := randomString()
	c.mu.Lock()
	now := c.cfg.Now()
	for id, s := range c.sessions { // ended sessions go at each login
		if !now.Before(s.expires) {
			delete(c.sessions, id)
		}
	}
	c.sessions[sid] = &session{name: name, hash: TokenHash(secret), role: role, csrf: randomString(), expires: now.Add(c.cfg.SessionTTL)}
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: c.cookieName(), Value: sid, Path: "/", HttpOnly: true, Secure: c.cfg.Secure, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// safeNext is where to go after login: a path of this console, never another site. A
// browser drops tabs and newlines from a URL and reads a backslash as a slash, so any
// control byte or backslash, or anything that is not one absolute path, sends the
// person to the first page instead.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsFunc(next, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
		return "/"
	}
	return u.RequestURI()
}

func (c *Console) logout(q *request) {
	c.mu.Lock()
	delete(c.sessions, q.sid)
	c.mu.Unlock()
	http.SetCookie(q.w, &http.Cookie{Name: c.cookieName(), Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: c.cfg.Secure, SameSite: http.SameSiteStrictMode})
	http.Redirect(q.w, q.r, "/login", http.StatusSeeOther)
}

// setFlash keeps an action's result for the next page the session shows.
func (c *Console) setFlash(s *session, ok bool, text string) {
	c.mu.Lock()
	s.flash = &flash{OK: ok, Text: text}
	c.mu.Unlock()
}

func (c *Console) takeFlash(s *session) *flash {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := s.flash
	s.flash = nil
	return f
}

// fail shows an error page.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *session, status int, text string) {
	d := pageData{Title: http.StatusText(status), Error: text}
	if s != nil {
		d.Who = whoOf(s)
	}
	c.render(w, r, status, "error", d)
}

func (c *Console) ctx(r *http.Request) context.Context { return r.Context() }

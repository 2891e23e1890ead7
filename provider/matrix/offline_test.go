package matrix

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/sendonce/sendonce/gate"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/provider"
)

// These tests run the provider against a fake homeserver (net/http/httptest) that
// answers the client-server API's few calls the lookup makes, so that every branch of
// the answer is reached: a live Dendrite runs it in testbed/matrix (issue 34).

type fakeHomeserver struct {
	mu        sync.Mutex
	password  string
	rooms     []string
	direct    map[string][]string
	encrypted map[string]bool
	events    map[string][]map[string]any // per room, newest first
	media     map[string][]byte           // media id -> bytes
	failRoom  string                      // its history answers 500
	authed    bool                        // authenticated media download exists
	noMedia   bool                        // the media repository answers nothing
	senders   bool                        // /messages honours its filter's senders (a page may then be empty)
	pages     int                         // /messages calls answered
	loggedOut bool
}

func (f *fakeHomeserver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	write := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(v)
	}
	notFound := func() { write(404, map[string]string{"errcode": "M_NOT_FOUND", "error": "not found"}) }
	p := r.URL.Path
	switch {
	case p == "/_matrix/client/v3/login":
		var body struct {
			Password string `json:"password"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		if body.Password != f.password {
			write(403, map[string]string{"errcode": "M_FORBIDDEN", "error": "wrong password " + body.Password})
			return
		}
		write(200, map[string]string{"access_token": "tok-1", "device_id": "D1", "user_id": "@alice:localhost"})
		return
	case r.Header.Get("Authorization") != "Bearer tok-1":
		write(401, map[string]string{"errcode": "M_UNKNOWN_TOKEN", "error": "unknown token"})
		return
	case p == "/_matrix/client/v3/logout":
		f.loggedOut = true
		write(200, map[string]any{})
	case p == "/_matrix/client/v3/joined_rooms":
		write(200, map[string]any{"joined_rooms": f.rooms})
	case strings.HasSuffix(p, "/account_data/m.direct"):
		if f.direct == nil {
			notFound()
			return
		}
		write(200, f.direct)
	case strings.HasSuffix(p, "/state/m.room.encryption/"):
		room := strings.TrimSuffix(strings.TrimPrefix(p, "/_matrix/client/v3/rooms/"), "/state/m.room.encryption/")
		if f.encrypted[room] {
			write(200, map[string]string{"algorithm": "m.megolm.v1.aes-sha2"})
			return
		}
		notFound()
	case strings.HasSuffix(p, "/messages"):
		room := strings.TrimSuffix(strings.TrimPrefix(p, "/_matrix/client/v3/rooms/"), "/messages")
		if room == f.failRoom {
			write(500, map[string]string{"errcode": "M_UNKNOWN", "error": "database is locked"})
			return
		}
		// Two events a page, newest first; "from" is the index to go on at.
		evs, start := f.events[room], 0
		if from := r.URL.Query().Get("from"); from != "" {
			json.Unmarshal([]byte(from), &start)
		}
		end := min(start+2, len(evs))
		chunk := evs[start:end]
		if f.senders {
			// As Synapse does: the page is cut first, then filtered, so a page may be
			// empty and still have a further token.
			var filter struct {
				Senders []string `json:"senders"`
			}
			json.Unmarshal([]byte(r.URL.Query().Get("filter")), &filter)
			chunk = nil
			for _, e := range evs[start:end] {
				for _, s := range filter.Senders {
					if e["sender"] == s {
						chunk = append(chunk, e)
					}
				}
			}
		}
		f.pages++
		out := map[string]any{"chunk": chunk}
		if end < len(evs) {
			out["end"] = mustJSON(end)
		}
		write(200, out)
	case (p == "/_matrix/client/v1/media/config" || p == "/_matrix/media/v3/config") && f.noMedia:
		write(502, map[string]string{"errcode": "M_UNKNOWN", "error": "bad gateway"})
	case p == "/_matrix/client/v1/media/config" && !f.authed:
		write(404, map[string]string{"errcode": "M_UNRECOGNIZED", "error": "unrecognized"})
	case p == "/_matrix/client/v1/media/config" || p == "/_matrix/media/v3/config":
		write(200, map[string]any{"m.upload.size": 1 << 20})
	case strings.HasPrefix(p, "/_matrix/client/v1/media/download/") && !f.authed:
		write(404, map[string]string{"errcode": "M_UNRECOGNIZED", "error": "unrecognized"})
	case strings.HasPrefix(p, "/_matrix/client/v1/media/download/"), strings.HasPrefix(p, "/_matrix/media/v3/download/"):
		id := p[strings.LastIndex(p, "/")+1:]
		b, ok := f.media[id]
		if !ok {
			notFound()
			return
		}
		w.Write(b)
	default:
		notFound()
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func fileEvent(id, sender, name, media string, at time.Time) map[string]any {
	return map[string]any{"event_id": id, "type": "m.room.message", "sender": sender, "origin_server_ts": at.UnixMilli(),
		"content": map[string]any{"msgtype": "m.file", "body": name, "url": "mxc://localhost/" + media}}
}

func sum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

// world is a fake homeserver where alice sent report.txt to bob (their direct room) and
// the same bytes to another room, with older and other events around them.
func world(t *testing.T, mutate func(*fakeHomeserver)) (*Provider, provider.Dispatch, *fakeHomeserver) {
	t.Helper()
	now := time.Now()
	ours, theirs := []byte("quarterly report\n"), []byte("another file!!!!\n")
	f := &fakeHomeserver{password: "s3cret-pw", rooms: []string{"!dm:localhost", "!other:localhost"},
		direct:    map[string][]string{"@Bob:localhost": {"!dm:localhost"}},
		encrypted: map[string]bool{},
		media:     map[string][]byte{"A": ours, "B": ours, "C": theirs},
		events: map[string][]map[string]any{
			"!dm:localhost": {
				fileEvent("$late", "@bob:localhost", "report.txt", "C", now.Add(-time.Second)), // bob's, not ours
				fileEvent("$ours", "@alice:localhost", "report.txt", "A", now.Add(-10*time.Second)),
				{"event_id": "$text", "type": "m.room.message", "sender": "@alice:localhost", "origin_server_ts": now.Add(-20 * time.Second).UnixMilli(), "content": map[string]any{"msgtype": "m.text", "body": "report.txt"}},
				fileEvent("$old", "@alice:localhost", "report.txt", "C", now.Add(-2*time.Hour)), // before the window
			},
			"!other:localhost": {fileEvent("$elsewhere", "@alice:localhost", "report.txt", "B", now.Add(-5*time.Second))},
		}}
	if mutate != nil {
		mutate(f)
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	p := New(Config{Homeserver: srv.URL, User: "@alice:localhost", Password: f.password, AllowHTTP: true, Timeout: 10 * time.Second})
	d := provider.Dispatch{DispatchID: "d1", Destination: idOf("matrix:@bob:localhost"), FileName: "report.txt", Size: int64(len(ours)),
		SHA256: sum(ours), From: now.Add(-time.Minute), Until: now}
	return p, d, f
}

func TestLookupFindsTheEventInTheDirectRoom(t *testing.T) {
	p, d, f := world(t, nil)
	a, err := p.Lookup(context.Background(), d)
	if err != nil || a.Result != provider.Found || !a.Authoritative {
		t.Fatalf("%+v %v; want found, authoritative", a, err)
	}
	confirm, wrongBytes, wrongRecipient := provider.Match(a, d, nil)
	if confirm == nil || confirm.ID != "$ours" || confirm.Recipient != "matrix:@bob:localhost" || wrongBytes != nil || wrongRecipient != nil {
		t.Fatalf("match: %+v %+v %+v in %+v", confirm, wrongBytes, wrongRecipient, a.Objects)
	}
	if len(a.Objects) != 2 || a.Objects[1].Recipient != "matrix:!other:localhost" {
		t.Errorf("objects %+v: want ours, and the same file in the other room as another recipient", a.Objects)
	}
	// Bound to another dispatch already: the other room's event shows another recipient.
	confirm, _, wrongRecipient = provider.Match(a, d, map[string]bool{"$ours": true})
	if confirm != nil || wrongRecipient == nil || wrongRecipient.ID != "$elsewhere" {
		t.Errorf("with $ours taken: confirm %+v, another recipient %+v", confirm, wrongRecipient)
	}
	if !f.loggedOut {
		t.Error("the password login's device was not logged out")
	}
	if strings.Contains(a.Detail, f.password) || strings.Contains(a.Detail, "tok-1") {
		t.Errorf("a secret in the detail: %s", a.Detail)
	}
}

// TestLookupByRoomID: a destination naming the direct room itself finds the same event,
// in that room.
func TestLookupByRoomID(t *testing.T) {
	p, d, _ := world(t, nil)
	d.Destination = idOf("matrix:!dm:localhost")
	a, err := p.Lookup(context.Background(), d)
	confirm, _, _ := provider.Match(a, d, nil)
	if err != nil || confirm == nil || confirm.ID != "$ours" || confirm.Recipient != "matrix:!dm:localhost" {
		t.Fatalf("%+v %v; want $ours in the room", a, err)
	}
}

func TestLookupAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*fakeHomeserver)
		result provider.Result
		detail string
	}{
		{"the destination's room is encrypted", func(f *fakeHomeserver) { f.encrypted["!dm:localhost"] = true }, provider.CantTell, "encrypted"},
		{"its history answers an error", func(f *fakeHomeserver) { f.failRoom = "!dm:localhost" }, provider.CantTell, "HTTP 500"},
		{"another room's error is only a note", func(f *fakeHomeserver) { f.failRoom = "!other:localhost" }, provider.Found, "could not be read"},
		{"a wrong password", func(f *fakeHomeserver) { f.password = "other" }, provider.CantTell, "logging in"},
		{"no direct room with the destination", func(f *fakeHomeserver) { f.direct = nil }, provider.CantTell, "no room that is matrix:@bob:localhost"},
		{"nothing sent in the window", func(f *fakeHomeserver) {
			f.events["!dm:localhost"], f.events["!other:localhost"] = f.events["!dm:localhost"][3:], nil
		}, provider.Absent, "no file named"},
		{"authenticated media", func(f *fakeHomeserver) { f.authed = true }, provider.Found, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, d, f := world(t, tc.mutate)
			if tc.name == "a wrong password" {
				p.cfg.Password = "s3cret-pw"
			}
			a, err := p.Lookup(context.Background(), d)
			if err != nil || a.Result != tc.result || !strings.Contains(a.Detail, tc.detail) {
				t.Fatalf("%+v %v; want %s with %q", a, err, tc.result, tc.detail)
			}
			if strings.Contains(a.Detail, "s3cret-pw") || strings.Contains(a.Detail, f.password) && f.password != "other" {
				t.Errorf("the password in the detail: %s", a.Detail)
			}
			if a.Result == provider.Absent && !a.Authoritative {
				t.Errorf("absent, the whole window read: want authoritative")
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "m.json")
		os.WriteFile(p, []byte(body), 0o600)
		return p
	}
	env := func(string) string { return "" }
	if _, err := LoadConfig(write(`{"homeserver":"https://matrix.example.org","user":"@alice:example.org","password":"pw"}`), env); err != nil {
		t.Errorf("a good file: %v", err)
	}
	for name, body := range map[string]string{
		"plain http elsewhere":   `{"homeserver":"http://matrix.example.org","user":"@alice:example.org","password":"pw","allow_http":true}`,
		"plain http not allowed": `{"homeserver":"http://127.0.0.1:8008","user":"@alice:example.org","password":"pw"}`,
		"not a user":             `{"homeserver":"https://m.example.org","user":"alice","password":"pw"}`,
		"no secret":              `{"homeserver":"https://m.example.org","user":"@alice:example.org"}`,
		"a misspelt field":       `{"homeserver":"https://m.example.org","user":"@alice:example.org","pasword":"hunter2"}`,
	} {
		if _, err := LoadConfig(write(body), env); err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v; want refused, no secret in the error", name, err)
		}
	}
	cfg, err := LoadConfig("", func(k string) string {
		return map[string]string{EnvHomeserver: "http://127.0.0.1:8008", EnvUser: "@alice:localhost", EnvToken: "t"}[k]
	})
	if err == nil {
		t.Errorf("environment with plain http and no allow_http: %+v; want refused", cfg)
	}
}

// TestCheck: doctor's check logs in, finds the destination's room and reads its
// newest event; it fails, naming why, where a lookup could not read the room.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, dest string
		mutate     func(*fakeHomeserver)
		want       string // in what it saw, or in its error
		ok         bool
	}{
		{"a person's direct room", "matrix:@bob:localhost", nil, "is room !dm:localhost, its history readable; its media repository answers", true},
		{"authenticated media", "matrix:@bob:localhost", func(f *fakeHomeserver) { f.authed = true }, "its media repository answers", true},
		{"no media repository", "matrix:@bob:localhost", func(f *fakeHomeserver) { f.noMedia = true }, "media repository, where a lookup downloads a file's bytes, did not answer: GET /_matrix/client/v1/media/config: HTTP 502", false},
		{"a room by its id", "matrix:!other:localhost", nil, "is room !other:localhost", true},
		{"no destination", "", nil, "2 joined room(s) (no destination given", true},
		{"no room with that person", "matrix:@carol:localhost", nil, "none of them matrix:@carol:localhost", false},
		{"an encrypted room", "matrix:@bob:localhost", func(f *fakeHomeserver) { f.encrypted["!dm:localhost"] = true }, "is encrypted", false},
		{"history that errors", "matrix:@bob:localhost", func(f *fakeHomeserver) { f.failRoom = "!dm:localhost" }, "history could not be read", false},
		{"a wrong password", "matrix:@bob:localhost", func(f *fakeHomeserver) { f.password = "other" }, "logging in as @alice:localhost failed", false},
		{"not a matrix id", "xmpp:bob@localhost", nil, "is not a matrix: identity", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _, f := world(t, tc.mutate)
			if tc.name == "a wrong password" {
				p.cfg.Password = "s3cret-pw"
			}
			saw, err := p.Check(context.Background(), idOf(tc.dest), time.Now())
			got := saw
			if err != nil {
				got = err.Error()
			}
			if (err == nil) != tc.ok || !strings.Contains(got, tc.want) {
				t.Fatalf("Check(%q) = %q, %v; want ok=%v and %q", tc.dest, saw, err, tc.ok, tc.want)
			}
			if strings.Contains(got, "s3cret-pw") || strings.Contains(got, "tok-1") {
				t.Errorf("a secret in %q", got)
			}
			if err == nil && !f.loggedOut {
				t.Error("the password login's device was not logged out")
			}
		})
	}
}

// TestLookupPeerCannotEndTheWalk: another sender's events, whatever their timestamps,
// never end the walk through a room's history: only the account's own events older than
// the window, or the room's first event, do. Before, a peer's event stamped two hours
// ago (its clock, or its server's) hid our file event behind it: the answer was "absent"
// (authoritative), or "delivered to another recipient" where the same bytes went to
// another room.
func TestLookupPeerCannotEndTheWalk(t *testing.T) {
	now := time.Now()
	backDated := func(id string, age time.Duration) map[string]any {
		return map[string]any{"event_id": id, "type": "m.room.message", "sender": "@bob:localhost", "origin_server_ts": now.Add(-age).UnixMilli(),
			"content": map[string]any{"msgtype": "m.text", "body": "hello"}}
	}
	peerFirst := func(f *fakeHomeserver) { // bob's back-dated events come first in the room's order, newest first
		f.events["!dm:localhost"] = append([]map[string]any{backDated("$skew1", 2*time.Hour), backDated("$skew2", 48*time.Hour)}, f.events["!dm:localhost"]...)
	}
	for _, tc := range []struct {
		name          string
		mutate        func(*fakeHomeserver)
		confirm       string // the event that confirms, "" for none
		result        provider.Result
		authoritative bool
	}{
		{"a peer's back-dated events before ours", peerFirst, "$ours", provider.Found, true},
		{"the same, the server filtering by sender (empty pages with a token)", func(f *fakeHomeserver) { peerFirst(f); f.senders = true }, "$ours", provider.Found, true},
		{"a peer's back-dated event between our two", func(f *fakeHomeserver) {
			dm := f.events["!dm:localhost"]
			f.events["!dm:localhost"] = append([]map[string]any{dm[0], backDated("$skew", 3*time.Hour)}, dm[1:]...)
		}, "$ours", provider.Found, true},
		{"a peer's back-dated events, nothing of ours in the window", func(f *fakeHomeserver) {
			peerFirst(f)
			f.events["!dm:localhost"] = append(f.events["!dm:localhost"][:2], f.events["!dm:localhost"][5:]...) // bob's, then our old one
			f.events["!other:localhost"] = nil
		}, "", provider.Absent, true},
		{"only a peer's back-dated events: read to the room's start", func(f *fakeHomeserver) {
			f.events["!dm:localhost"] = []map[string]any{backDated("$a", time.Hour), backDated("$b", 2*time.Hour), backDated("$c", 3*time.Hour)}
			f.events["!other:localhost"] = nil
		}, "", provider.Absent, true},
		{"more of a peer's events than a lookup pages: not authoritative", func(f *fakeHomeserver) {
			var evs []map[string]any
			for i := 0; i < 2*maxPages+1; i++ {
				evs = append(evs, backDated(fmt.Sprintf("$p%d", i), time.Duration(i+1)*time.Hour))
			}
			f.events["!dm:localhost"] = append(evs, f.events["!dm:localhost"]...)
			f.events["!other:localhost"] = nil
		}, "", provider.Absent, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, d, f := world(t, tc.mutate)
			a, err := p.Lookup(context.Background(), d)
			if err != nil || a.Result != tc.result || a.Authoritative != tc.authoritative {
				t.Fatalf("%+v %v; want %s, authoritative %v", a, err, tc.result, tc.authoritative)
			}
			confirm, _, wrongRecipient := provider.Match(a, d, nil)
			switch {
			case tc.confirm != "" && (confirm == nil || confirm.ID != tc.confirm):
				t.Fatalf("confirmed %+v (another recipient %+v) in %+v; want %s", confirm, wrongRecipient, a.Objects, tc.confirm)
			case tc.confirm == "" && confirm != nil:
				t.Fatalf("confirmed %+v; want nothing", confirm)
			}
			for _, o := range a.Objects {
				if strings.HasPrefix(o.ID, "$skew") || o.ID == "$late" {
					t.Errorf("another sender's event %s was kept", o.ID)
				}
			}
			if f.pages > 2*maxPages+2 { // two rooms
				t.Errorf("%d pages read: more than maxPages a room", f.pages)
			}
		})
	}
}

// TestLookupTokenThatDoesNotMove: a server that gives back the token it was given has
// not shown the rest of the room: the answer is not authoritative.
func TestLookupTokenThatDoesNotMove(t *testing.T) {
	p, d, _ := world(t, nil)
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"chunk": []any{}, "end": "same"}) // every page, the same token
	}))
	defer stuck.Close()
	s := &session{p: p, token: "tok-1"}
	p.cfg.Homeserver = stuck.URL
	found, whole, err := s.sentFiles(context.Background(), "!dm:localhost", d)
	if err != nil || whole || len(found) != 0 {
		t.Fatalf("found %v, whole %v, %v; want not whole", found, whole, err)
	}
}

// idOf is a provider id as a dispatch names it: the zero Identity for "".
func idOf(s string) gate.Identity {
	if s == "" {
		return gate.Identity{}
	}
	id, err := gate.ProviderID(s)
	if err != nil {
		panic(err)
	}
	return id
}

// Package matrix is the provider for Matrix destinations (matrix:@user:server, their
// direct room; matrix:!room:server, a room): it asks the sending account's homeserver,
// over the client-server API, which file events the account sent in the attempt's
// window, downloads each one's content and hashes it.
//
// A Lookup logs in (an access token, or a password: then a device of its own, logged
// out at the end), lists the account's joined rooms, and pages each room's history
// backwards in the server's own order, keeping the m.room.message events the account
// sent in the window whose file (m.file, m.image, m.video, m.audio) is named as the
// dispatch's file. Only the account's own events bound that walk: no event of another
// sender, whatever its timestamp, ends it. An event in
// the destination's room is the candidate confirmation; one in another room is evidence
// of another recipient, never a confirmation. A room whose events are encrypted cannot
// be read: the answer is then "can't tell", never "absent". Every failure of the server
// or the network is "can't tell" with a Detail; the answer is authoritative "absent"
// only when the destination's whole window was read.
package matrix

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/text/unicode/norm"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/provider"
)

// maxRooms and maxPages bound a Lookup's reading of the account's history.
const (
	maxRooms = 200
	maxPages = 50
)

// Provider looks dispatches up on a Matrix homeserver.
type Provider struct {
	cfg    Config
	client *http.Client
}

// New returns a Provider for cfg (see LoadConfig).
func New(cfg Config) *Provider {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableCompression = true // hash the bytes as stored
	return &Provider{cfg: cfg, client: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return errors.New("the homeserver answered with a redirect")
	}}}
}

// Lookup answers which file events named d.FileName the account sent in d's window,
// where, and with what bytes.
func (p *Provider) Lookup(ctx context.Context, d provider.Dispatch) (provider.Answer, error) {
	dest, err := checkDispatch(d)
	if err != nil {
		return provider.Answer{}, fmt.Errorf("matrix provider: %w", err)
	}
	if err := p.cfg.check(); err != nil {
		return provider.Answer{}, err
	}
	ctx, s, end, err := p.start(ctx)
	if err != nil {
		return p.cantTell("%v", err), nil
	}
	defer end()
	rooms, err := s.joinedRooms(ctx)
	if err != nil {
		return p.cantTell("listing %s's rooms failed: %v", p.cfg.User, err), nil
	}
	direct, err := s.directRooms(ctx)
	if err != nil {
		return p.cantTell("reading %s's direct rooms failed: %v", p.cfg.User, err), nil
	}
	var objects []provider.Object
	var notes []string
	complete := true // every room of the destination read over the whole window
	destRooms := 0
	for _, room := range rooms {
		// A room is its own identity when the destination names it; else a direct room
		// with one user is that user's.
		recipient := recipientOf(room, direct, dest)
		isDest := recipient == dest
		if isDest {
			destRooms++
		}
		encrypted, err := s.encrypted(ctx, room)
		if err != nil {
			if isDest {
				return p.cantTell("reading room %s failed: %v", room, err), nil
			}
			notes = append(notes, fmt.Sprintf("room %s could not be read: %v", room, err))
			continue
		}
		if encrypted {
			if isDest {
				return p.cantTell("room %s is encrypted: this lookup holds no keys to read its events", room), nil
			}
			notes = append(notes, fmt.Sprintf("room %s is encrypted and was not read", room))
			continue
		}
		found, whole, err := s.sentFiles(ctx, room, d)
		if err != nil {
			if isDest {
				return p.cantTell("reading room %s's history failed: %v", room, err), nil
			}
			notes = append(notes, fmt.Sprintf("room %s's history could not be read: %v", room, err))
			continue
		}
		if isDest && !whole {
			complete = false
		}
		for _, o := range found {
			o.Recipient = recipient
			objects = append(objects, o)
		}
	}
	if destRooms == 0 {
		return p.cantTell("%s has no room that is %s: the destination cannot be read", p.cfg.User, dest), nil
	}
	for i := range objects {
		sum, err := s.download(ctx, objects[i].Link, d.Size)
		if err != nil {
			notes = append(notes, fmt.Sprintf("the bytes of %s could not be fetched: %v", objects[i].ID, err))
			continue
		}
		objects[i].SHA256 = sum
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Matrix history of %s, %s to %s, %d room(s)", p.cfg.User, d.From.UTC().Format(time.RFC3339), d.Until.UTC().Format(time.RFC3339), len(rooms))
	if len(objects) > 0 {
		for i, o := range objects {
			sum := o.SHA256
			if sum == "" {
				sum = "bytes unknown"
			}
			fmt.Fprintf(&b, map[bool]string{true: ": ", false: ", "}[i == 0]+"%s in %s at %s (%s)", o.ID, o.Recipient, o.At.UTC().Format(time.RFC3339), sum)
		}
		for _, n := range notes {
			b.WriteString("; " + n)
		}
		b.WriteString(".")
		return provider.Answer{Result: provider.Found, Objects: objects, Authoritative: complete, Detail: p.redact(b.String())}, nil
	}
	fmt.Fprintf(&b, "; no file named %q sent", d.FileName)
	for _, n := range notes {
		b.WriteString("; " + n)
	}
	if !complete {
		b.WriteString("; the destination's history was not read back to the window's start")
	}
	b.WriteString(".")
	return provider.Answer{Result: provider.Absent, Authoritative: complete, Detail: p.redact(b.String())}, nil
}

// start bounds ctx by the configured timeout and opens a session: the configured access
// token, or a password login of its own. end logs that login out and releases ctx.
func (p *Provider) start(ctx context.Context) (_ context.Context, _ *session, end func(), _ error) {
	timeout := p.cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	s := &session{p: p, token: p.cfg.AccessToken}
	if s.token != "" {
		return ctx, s, cancel, nil
	}
	if err := s.login(ctx); err != nil {
		cancel()
		return nil, nil, nil, fmt.Errorf("logging in as %s failed: %v", p.cfg.User, err)
	}
	return ctx, s, func() { s.logout(context.WithoutCancel(ctx)); cancel() }, nil
}

// recipientOf is who a room's events reach, as gate spells it: the room itself when the
// destination names it, else the one user of a direct room, else the room.
func recipientOf(room string, direct map[string][]string, dest string) string {
	recipient := "matrix:" + room
	if users := direct[room]; len(users) == 1 && recipient != dest {
		recipient = "matrix:" + users[0]
	}
	return recipient
}

// Check tries what a Lookup does, sending nothing: what `sendonce doctor` asks of a
// configured account. It logs in and lists the account's rooms; the destination ("" for
// none) must be a room the account has joined, or a user it has a direct room with, and
// not encrypted; its history is walked over the last hour as a lookup walks it; and the
// homeserver's media repository, where a lookup downloads a file's bytes, must answer
// (its configuration, read with the account's token). It says what it saw.
func (p *Provider) Check(ctx context.Context, destination gate.Identity, now time.Time) (string, error) {
	if err := p.cfg.check(); err != nil {
		return "", err
	}
	var dest string
	if !destination.IsZero() {
		if destination.Namespace() != "matrix" {
			return "", fmt.Errorf("destination %q is not a matrix: identity (matrix:@user:server or matrix:!room:server)", destination)
		}
		dest = destination.String()
	}
	ctx, s, end, err := p.start(ctx)
	if err != nil {
		return "", errors.New(p.redact(err.Error()))
	}
	defer end()
	rooms, err := s.joinedRooms(ctx)
	if err != nil {
		return "", errors.New(p.redact(fmt.Sprintf("%s logged in, but its rooms could not be listed: %v", p.cfg.User, err)))
	}
	saw := fmt.Sprintf("%s logged in; %d joined room(s)", p.cfg.User, len(rooms))
	if dest == "" {
		return saw + " (no destination given: none read)", nil
	}
	direct, err := s.directRooms(ctx)
	if err != nil {
		return "", errors.New(p.redact(fmt.Sprintf("%s: its direct rooms could not be read: %v", saw, err)))
	}
	var read []string
	for _, room := range rooms {
		if recipientOf(room, direct, dest) != dest {
			continue
		}
		encrypted, err := s.encrypted(ctx, room)
		switch {
		case err != nil:
			return "", errors.New(p.redact(fmt.Sprintf("%s: room %s could not be read: %v", saw, room, err)))
		case encrypted:
			return "", fmt.Errorf("%s: room %s is encrypted: the lookup cannot read it, and would answer \"can't tell\" for every delivery there", saw, room)
		}
		hour := provider.Dispatch{FileName: "sendonce-doctor", From: now.Add(-time.Hour), Until: now}
		if _, _, err := s.sentFiles(ctx, room, hour); err != nil {
			return "", errors.New(p.redact(fmt.Sprintf("%s: room %s's history could not be read: %v", saw, room, err)))
		}
		read = append(read, room)
	}
	if len(read) == 0 {
		return "", fmt.Errorf("%s, none of them %s: join its room (or, for a person, have a direct room with them) with this account", saw, dest)
	}
	saw = fmt.Sprintf("%s; %s is room %s, its history readable", saw, dest, strings.Join(read, ", "))
	if err := s.mediaAnswers(ctx); err != nil {
		return "", errors.New(p.redact(fmt.Sprintf("%s; but its media repository, where a lookup downloads a file's bytes, did not answer: %v", saw, err)))
	}
	return saw + "; its media repository answers", nil
}

// mediaAnswers reads the media repository's configuration, as a download goes:
// authenticated media first, the older path when the server has none.
func (s *session) mediaAnswers(ctx context.Context) error {
	err := s.call(ctx, "GET", "/_matrix/client/v1/media/config", nil, nil, nil)
	if err != nil && (strings.Contains(err.Error(), "HTTP 404") || strings.Contains(err.Error(), "HTTP 400") || strings.Contains(err.Error(), "HTTP 405")) {
		err = s.call(ctx, "GET", "/_matrix/media/v3/config", nil, nil, nil)
	}
	return err
}

func (p *Provider) cantTell(format string, args ...any) provider.Answer {
	return provider.Answer{Result: provider.CantTell, Detail: p.redact("Matrix lookup: " + fmt.Sprintf(format, args...) + ".")}
}

// redact keeps the account's secrets out of a Detail.
func (p *Provider) redact(s string) string {
	for _, secret := range []string{p.cfg.Password, p.cfg.AccessToken} {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "[secret]")
		}
	}
	return s
}

// checkDispatch validates what a lookup needs and returns the destination as gate
// spells it (matrix:@bob:localhost or matrix:!room:server).
func checkDispatch(d provider.Dispatch) (string, error) {
	if d.FileName == "" || strings.ContainsAny(d.FileName, "/\x00") {
		return "", fmt.Errorf("dispatch %s: file name %q is empty or not a base name", d.DispatchID, d.FileName)
	}
	if d.From.IsZero() || d.Until.IsZero() || d.Until.Before(d.From) {
		return "", fmt.Errorf("dispatch %s: window %s to %s is empty or reversed", d.DispatchID, d.From, d.Until)
	}
	if d.Size < 0 {
		return "", fmt.Errorf("dispatch %s: negative size %d", d.DispatchID, d.Size)
	}
	if d.SHA256 != "" {
		if b, err := hex.DecodeString(d.SHA256); err != nil || len(b) != 32 {
			return "", fmt.Errorf("dispatch %s: SHA256 %q is not 64 hex digits", d.DispatchID, d.SHA256)
		}
	}
	if d.Destination.Namespace() != "matrix" {
		return "", fmt.Errorf("dispatch %s: destination %q is not a matrix: identity", d.DispatchID, d.Destination)
	}
	return d.Destination.String(), nil
}

// session is one Lookup's conversation with the homeserver.
type session struct {
	p     *Provider
	token string
	own   bool // the token is this session's own login: logged out at the end
}

// call sends one request to the client-server API and decodes its JSON answer into out
// (nil: ignored). A non-2xx answer is an error naming the Matrix error code.
func (s *session) call(ctx context.Context, method, path string, query url.Values, body, out any) error {
	u := strings.TrimRight(s.p.cfg.Homeserver, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.p.client.Do(req)
	if err != nil {
		return errors.New(s.p.redact(err.Error()))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var me struct {
			Code  string `json:"errcode"`
			Error string `json:"error"`
		}
		json.Unmarshal(data, &me)
		return fmt.Errorf("%s %s: HTTP %d %s %s", method, path, resp.StatusCode, me.Code, s.p.redact(me.Error))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the expected JSON: %v", method, path, err)
	}
	return nil
}

func (s *session) login(ctx context.Context) error {
	var out struct {
		Token string `json:"access_token"`
	}
	err := s.call(ctx, "POST", "/_matrix/client/v3/login", nil, map[string]any{
		"type": "m.login.password", "identifier": map[string]string{"type": "m.id.user", "user": s.p.cfg.User},
		"password": s.p.cfg.Password, "initial_device_display_name": "sendonce lookup",
	}, &out)
	if err == nil && out.Token == "" {
		err = errors.New("the login answered no access token")
	}
	s.token, s.own = out.Token, err == nil
	return err
}

func (s *session) logout(ctx context.Context) {
	if s.own {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		s.call(ctx, "POST", "/_matrix/client/v3/logout", nil, map[string]any{}, nil)
	}
}

func (s *session) joinedRooms(ctx context.Context) ([]string, error) {
	var out struct {
		Rooms []string `json:"joined_rooms"`
	}
	if err := s.call(ctx, "GET", "/_matrix/client/v3/joined_rooms", nil, nil, &out); err != nil {
		return nil, err
	}
	if len(out.Rooms) > maxRooms {
		return nil, fmt.Errorf("%d joined rooms, more than the %d a lookup reads", len(out.Rooms), maxRooms)
	}
	return out.Rooms, nil
}

// directRooms maps each direct room to its user ids (canonical), from the account's
// m.direct data (none: no direct rooms).
func (s *session) directRooms(ctx context.Context) (map[string][]string, error) {
	var byUser map[string][]string
	err := s.call(ctx, "GET", "/_matrix/client/v3/user/"+url.PathEscape(s.p.cfg.User)+"/account_data/m.direct", nil, nil, &byUser)
	if err != nil && strings.Contains(err.Error(), "M_NOT_FOUND") {
		return map[string][]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	rooms := map[string][]string{}
	for user, ids := range byUser {
		id, err := gate.ProviderID("matrix:" + user)
		if err != nil {
			continue
		}
		for _, room := range ids {
			rooms[room] = append(rooms[room], id.Value())
		}
	}
	return rooms, nil
}

// encrypted says whether the room's events are encrypted (it has m.room.encryption).
func (s *session) encrypted(ctx context.Context, room string) (bool, error) {
	err := s.call(ctx, "GET", "/_matrix/client/v3/rooms/"+url.PathEscape(room)+"/state/m.room.encryption/", nil, nil, nil)
	switch {
	case err == nil:
		return true, nil
	case strings.Contains(err.Error(), "M_NOT_FOUND"):
		return false, nil
	}
	return false, err
}

// event is a room event as /messages gives it.
type event struct {
	ID      string `json:"event_id"`
	Type    string `json:"type"`
	Sender  string `json:"sender"`
	TS      int64  `json:"origin_server_ts"`
	Content struct {
		MsgType  string `json:"msgtype"`
		Body     string `json:"body"`
		FileName string `json:"filename"`
		URL      string `json:"url"`
	} `json:"content"`
}

// sentFiles pages the room's history backwards in the server's own order (its pagination
// tokens), keeping the file events the account sent named d.FileName in d's window.
//
// Only the account's own events bound the walk: their origin_server_ts is stamped by
// the account's own homeserver, and each event the account sent in the window comes
// after, in the room's order, every event it sent before. The walk ends at the first
// event of the account's own user older than the window's start, or at the room's
// first event (the server gives no further token); whole says one of the two was
// reached. Another sender's event, whatever its timestamp (a peer's, or its server's
// skewed clock), neither ends the walk nor is kept. An empty page with a further token
// is paged through; a token that does not move, or maxPages pages, end it not whole.
func (s *session) sentFiles(ctx context.Context, room string, d provider.Dispatch) (found []provider.Object, whole bool, err error) {
	want := norm.NFC.String(d.FileName)
	// The server may narrow the pages to the account's own messages; the check below
	// holds whether it does or not.
	filter, _ := json.Marshal(map[string]any{"types": []string{"m.room.message", "m.room.encrypted"}, "senders": []string{s.p.cfg.User}})
	from := ""
	for page := 0; page < maxPages; page++ {
		q := url.Values{"dir": {"b"}, "limit": {"100"}, "filter": {string(filter)}}
		if from != "" {
			q.Set("from", from)
		}
		var out struct {
			Chunk []event `json:"chunk"`
			End   string  `json:"end"`
		}
		if err := s.call(ctx, "GET", "/_matrix/client/v3/rooms/"+url.PathEscape(room)+"/messages", q, nil, &out); err != nil {
			return nil, false, err
		}
		for _, e := range out.Chunk {
			if e.Sender != s.p.cfg.User {
				continue // another sender's: no bound, no object
			}
			at := time.UnixMilli(e.TS)
			if at.Before(d.From.Add(-time.Minute)) { // the server's clock may lag the store's a little
				return found, true, nil // ours, from before the window: everything of ours since was read
			}
			if e.Type != "m.room.message" || at.After(d.Until.Add(time.Minute)) {
				continue
			}
			switch e.Content.MsgType {
			case "m.file", "m.image", "m.video", "m.audio":
			default:
				continue
			}
			name := e.Content.FileName
			if name == "" {
				name = e.Content.Body
			}
			if norm.NFC.String(name) != want || !strings.HasPrefix(e.Content.URL, "mxc://") {
				continue
			}
			found = append(found, provider.Object{ID: e.ID, Link: e.Content.URL, At: at, FileName: d.FileName})
		}
		switch {
		case out.End == "":
			return found, true, nil // the room's first event
		case out.End == from:
			return found, false, nil // the token does not move: not read to the end
		}
		from = out.End
	}
	return found, false, nil
}

// download fetches an mxc:// content's bytes and hashes them: authenticated media first,
// the older unauthenticated path when the server has none. More than size bytes are
// other bytes: reading stops there.
func (s *session) download(ctx context.Context, mxc string, size int64) (string, error) {
	server, media, ok := strings.Cut(strings.TrimPrefix(mxc, "mxc://"), "/")
	if !ok || server == "" || media == "" || strings.ContainsAny(media, "/?#") {
		return "", fmt.Errorf("%q is not an mxc://server/id URI", mxc)
	}
	path := "/" + url.PathEscape(server) + "/" + url.PathEscape(media)
	sum, status, err := s.fetch(ctx, "/_matrix/client/v1/media/download"+path, size)
	if status == http.StatusNotFound || status == http.StatusBadRequest || status == http.StatusMethodNotAllowed {
		sum, _, err = s.fetch(ctx, "/_matrix/media/v3/download"+path, size)
	}
	return sum, err
}

func (s *session) fetch(ctx context.Context, path string, size int64) (string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second+time.Duration(size>>20)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimRight(s.p.cfg.Homeserver, "/")+path, nil)
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.p.client.Do(req)
	if err != nil {
		return "", 0, errors.New(s.p.redact(err.Error()))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", resp.StatusCode, fmt.Errorf("GET %s: HTTP %d", path, resp.StatusCode)
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(resp.Body, size+1))
	if err != nil {
		return "", resp.StatusCode, err
	}
	if n > size {
		return "", resp.StatusCode, fmt.Errorf("GET %s: more than the file's %d bytes: other bytes", path, size)
	}
	return hex.EncodeToString(h.Sum(nil)), resp.StatusCode, nil
}

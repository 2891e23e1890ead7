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
// sender, whatever its timestamp, ends it, and another sender's content is never read.
// An event in the destination's room is the candidate confirmation; one in another room
// is evidence of another recipient, never a confirmation. A room whose events are
// encrypted cannot be read: the answer is then "can't tell", never "absent". Every
// failure of the server or the network is "can't tell" with a Detail; the answer is
// authoritative "absent" only when the destination's whole window was read.
//
// The files: matrix.go the rules (Lookup, doctor's Check, which events count, the
// window, the walk's bounds, what is authoritative); client.go the conversation with the
// homeserver; config.go the account's settings.
//
// The client-server API is spoken by mautrix-go (maunium.net/go/mautrix, its
// *mautrix.Client): Login and Logout, JoinedRooms, GetAccountData (m.direct),
// StateEvent (m.room.encryption), Messages (its pagination tokens, direction b),
// Download (authenticated media; the older /_matrix/media/v3 path through its
// MakeFullRequestWithResp where a server has none) and GetMediaConfig. What stays ours:
// the rules above, and how the client is held. It runs on the Provider's own
// *http.Client (no redirect followed; no transparent decompression, so the bytes hashed
// are the bytes stored), with one attempt a call (no retry, no waiting on a rate
// limit), answers of 8 MiB at most, a download read to the file's size and no further,
// and no logger: mautrix logs through zerolog, to the context's logger before its
// client's, so its client's is zerolog.Nop() and each call's context holds a disabled
// one (zerolog is reached only through mautrix and for this). Its errors are rewritten
// as one sentence (request, HTTP status, Matrix error code) with the account's secrets
// removed.
//
// The cost, measured when mautrix v0.33.0 came in (issue 45): `go list -deps` of this
// package 206 packages before, 274 after (mautrix, go.mau.fi/util, zerolog with
// go-colorable and go-isatty, tidwall's gjson and sjson, filippo.io/edwards25519:
// mautrix's client and event packages import its attachment, key-backup and signature
// code); cmd/sendonce's binary 35.58 MB before, 37.08 MB after (+1.5 MB, +4.2%;
// CGO_ENABLED=0: 34.70 MB to 36.23 MB). No cgo enters: every package it adds is pure
// Go, and CGO_ENABLED=0 builds the whole module as before.
package matrix

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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

// fileContent is what a file event's content says of its file.
type fileContent struct {
	MsgType  string `json:"msgtype"`
	Body     string `json:"body"`
	FileName string `json:"filename"`
	URL      string `json:"url"`
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
	from := ""
	for page := 0; page < maxPages; page++ {
		chunk, end, err := s.messages(ctx, room, from)
		if err != nil {
			return nil, false, err
		}
		for _, e := range chunk {
			if e == nil || string(e.Sender) != s.p.cfg.User {
				continue // another sender's: no bound, no object, its content not even read
			}
			at := time.UnixMilli(e.Timestamp)
			if at.Before(d.From.Add(-time.Minute)) { // the server's clock may lag the store's a little
				return found, true, nil // ours, from before the window: everything of ours since was read
			}
			if e.Type.Type != "m.room.message" || at.After(d.Until.Add(time.Minute)) {
				continue
			}
			var c fileContent
			if len(e.Content.VeryRaw) == 0 {
				continue // no content: no file
			}
			if err := json.Unmarshal(e.Content.VeryRaw, &c); err != nil {
				// Ours, in the window, and unreadable: it may be the file.
				return nil, false, fmt.Errorf("the content of %s's event %s is not the expected JSON: %v", s.p.cfg.User, e.ID, err)
			}
			switch c.MsgType {
			case "m.file", "m.image", "m.video", "m.audio":
			default:
				continue
			}
			name := c.FileName
			if name == "" {
				name = c.Body
			}
			if norm.NFC.String(name) != want || !strings.HasPrefix(c.URL, "mxc://") {
				continue
			}
			found = append(found, provider.Object{ID: string(e.ID), Link: c.URL, At: at, FileName: d.FileName})
		}
		switch {
		case end == "":
			return found, true, nil // the room's first event
		case end == from:
			return found, false, nil // the token does not move: not read to the end
		}
		from = end
	}
	return found, false, nil
}

package matrix

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/sendonce/sendonce/gate"
)

// maxResponse bounds one client-server API answer's JSON (a page of history is far
// smaller); a larger answer is an error.
const maxResponse = 8 << 20

// session is one Lookup's conversation with the homeserver, through mautrix's client.
// p and token are all a session needs: its client is made on first use from p's
// configuration.
type session struct {
	p     *Provider
	token string
	own   bool // the token is this session's own login: logged out at the end
	cli   *mautrix.Client
}

// client is the session's mautrix client: the Provider's own *http.Client (no redirect
// followed, no transparent decompression), its token, no logger, no retry, no waiting
// on a rate limit.
func (s *session) client() (*mautrix.Client, error) {
	if s.cli != nil {
		return s.cli, nil
	}
	cli, err := mautrix.NewClient(s.p.cfg.Homeserver, id.UserID(s.p.cfg.User), s.token)
	if err != nil {
		return nil, fmt.Errorf("homeserver %q: %v", s.p.cfg.Homeserver, err)
	}
	cli.Client = s.p.client
	cli.Log = zerolog.Nop() // the library never logs
	cli.UserAgent = "sendonce"
	cli.DefaultHTTPRetries = 0
	cli.IgnoreRateLimit = true
	cli.ResponseSizeLimit = maxResponse
	s.cli = cli
	return cli, nil
}

// quiet is ctx for one of cli's calls: one attempt, and no logger. mautrix logs to the
// context's zerolog logger, else to zerolog.DefaultContextLogger (a global a program may
// set), and to its client's only when the context's is disabled: ctx gets a disabled
// logger of its own, in place of any the caller put there. (zerolog stores a disabled
// logger only over another: hence the discarding one first.)
func quiet(ctx context.Context, cli *mautrix.Client) context.Context {
	ctx = zerolog.New(io.Discard).WithContext(ctx)
	return mautrix.WithMaxRetries(cli.Log.WithContext(ctx), 0)
}

// describe turns a mautrix error into one sentence: the request, the HTTP status and
// the Matrix error code, or what failed on the way. No secret stays in it.
func (s *session) describe(err error) error {
	if err == nil {
		return nil
	}
	var he mautrix.HTTPError
	if !errors.As(err, &he) || he.Request == nil {
		return errors.New(s.p.redact(err.Error()))
	}
	what := he.Request.Method + " " + he.Request.URL.Path
	var transport *url.Error
	switch {
	case errors.As(he.WrappedError, &transport): // no answer, or a redirect refused
		return errors.New(s.p.redact(transport.Error()))
	case he.Response == nil:
		return errors.New(s.p.redact(fmt.Sprintf("%s: %s", what, he.Message)))
	case he.Response.StatusCode/100 != 2:
		code, msg := "", ""
		if he.RespError != nil {
			code, msg = he.RespError.ErrCode, he.RespError.Err
		}
		return errors.New(s.p.redact(fmt.Sprintf("%s: HTTP %d %s %s", what, he.Response.StatusCode, code, msg)))
	case he.WrappedError != nil && he.ResponseBody != "": // answered 2xx, but not what was asked for
		return errors.New(s.p.redact(fmt.Sprintf("%s: the answer is not the expected JSON: %v", what, he.WrappedError)))
	case he.WrappedError != nil: // answered 2xx, but its body could not be read (or is too long)
		return errors.New(s.p.redact(fmt.Sprintf("%s: %s: %v", what, he.Message, he.WrappedError)))
	}
	return errors.New(s.p.redact(what + ": " + he.Message))
}

// status is the HTTP status of the answer err carries, 0 for none.
func status(err error) int {
	var he mautrix.HTTPError
	if errors.As(err, &he) && he.Response != nil {
		return he.Response.StatusCode
	}
	return 0
}

// notFound says the server answered M_NOT_FOUND.
func notFound(err error) bool { return errors.Is(err, mautrix.MNotFound) }

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

// login makes a device of the session's own with the account's password.
func (s *session) login(ctx context.Context) error {
	cli, err := s.client()
	if err != nil {
		return err
	}
	resp, err := cli.Login(quiet(ctx, cli), &mautrix.ReqLogin{
		Type:                     mautrix.AuthTypePassword,
		Identifier:               mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: s.p.cfg.User},
		Password:                 s.p.cfg.Password,
		InitialDeviceDisplayName: "sendonce lookup",
	})
	if err != nil {
		return s.describe(err)
	}
	if resp == nil || resp.AccessToken == "" {
		return errors.New("the login answered no access token")
	}
	// The token only: the user stays the configured one, whatever the answer says.
	s.token, s.own, cli.AccessToken = resp.AccessToken, true, resp.AccessToken
	return nil
}

// logout logs the session's own login out (an access token given is left alone).
func (s *session) logout(ctx context.Context) {
	if !s.own {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if cli, err := s.client(); err == nil {
		cli.Logout(quiet(ctx, cli))
	}
}

func (s *session) joinedRooms(ctx context.Context) ([]string, error) {
	cli, err := s.client()
	if err != nil {
		return nil, err
	}
	resp, err := cli.JoinedRooms(quiet(ctx, cli))
	if err != nil {
		return nil, s.describe(err)
	}
	if resp == nil {
		return nil, errors.New("GET /_matrix/client/v3/joined_rooms: the answer is empty")
	}
	if len(resp.JoinedRooms) > maxRooms {
		return nil, fmt.Errorf("%d joined rooms, more than the %d a lookup reads", len(resp.JoinedRooms), maxRooms)
	}
	rooms := make([]string, len(resp.JoinedRooms))
	for i, r := range resp.JoinedRooms {
		rooms[i] = string(r)
	}
	return rooms, nil
}

// directRooms maps each direct room to its user ids (canonical), from the account's
// m.direct data (none: no direct rooms).
func (s *session) directRooms(ctx context.Context) (map[string][]string, error) {
	cli, err := s.client()
	if err != nil {
		return nil, err
	}
	var byUser map[string][]string
	err = cli.GetAccountData(quiet(ctx, cli), event.AccountDataDirectChats.Type, &byUser)
	if notFound(err) {
		return map[string][]string{}, nil
	}
	if err != nil {
		return nil, s.describe(err)
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
	cli, err := s.client()
	if err != nil {
		return false, err
	}
	// Any answer but M_NOT_FOUND is the event: its content is not read.
	err = cli.StateEvent(quiet(ctx, cli), id.RoomID(room), event.StateEncryption, "", nil)
	switch {
	case err == nil:
		return true, nil
	case notFound(err):
		return false, nil
	}
	return false, s.describe(err)
}

// messages reads one page of the room's history backwards from the token from ("": its
// newest event), up to 100 events, asking the server for the account's own messages
// only (it may not narrow them: sentFiles checks each event). end is the token for the
// next page, "" at the room's first event.
func (s *session) messages(ctx context.Context, room, from string) (chunk []*event.Event, end string, _ error) {
	cli, err := s.client()
	if err != nil {
		return nil, "", err
	}
	filter := &mautrix.FilterPart{Types: []event.Type{event.EventMessage, event.EventEncrypted}, Senders: []id.UserID{id.UserID(s.p.cfg.User)}}
	resp, err := cli.Messages(quiet(ctx, cli), id.RoomID(room), from, "", mautrix.DirectionBackward, filter, 100)
	if err != nil {
		return nil, "", s.describe(err)
	}
	if resp == nil {
		return nil, "", fmt.Errorf("GET /_matrix/client/v3/rooms/%s/messages: the answer is empty", room)
	}
	return resp.Chunk, resp.End, nil
}

// download fetches an mxc:// content's bytes and hashes them: authenticated media first,
// the older unauthenticated path when the server has none. More than size bytes are
// other bytes: reading stops there.
func (s *session) download(ctx context.Context, mxc string, size int64) (string, error) {
	server, media, ok := strings.Cut(strings.TrimPrefix(mxc, "mxc://"), "/")
	if !ok || server == "" || media == "" || strings.ContainsAny(media, "/?#") {
		return "", fmt.Errorf("%q is not an mxc://server/id URI", mxc)
	}
	cli, err := s.client()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second+time.Duration(size>>20)*time.Second)
	defer cancel()
	resp, err := cli.Download(quiet(ctx, cli), id.ContentURI{Homeserver: server, FileID: media})
	if st := status(err); st == http.StatusNotFound || st == http.StatusBadRequest || st == http.StatusMethodNotAllowed {
		_, resp, err = cli.MakeFullRequestWithResp(quiet(ctx, cli), mautrix.FullRequest{
			Method: http.MethodGet, URL: cli.BuildURL(mautrix.MediaURLPath{"v3", "download", server, media}), DontReadResponse: true,
		})
	}
	if err != nil {
		return "", s.describe(err)
	}
	defer resp.Body.Close()
	what := "GET " + resp.Request.URL.Path
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: HTTP %d", what, resp.StatusCode)
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(resp.Body, size+1))
	if err != nil {
		return "", errors.New(s.p.redact(fmt.Sprintf("%s: %v", what, err)))
	}
	if n > size {
		return "", fmt.Errorf("%s: more than the file's %d bytes: other bytes", what, size)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// mediaAnswers reads the media repository's configuration, as a download goes:
// authenticated media first, the older path when the server has none.
func (s *session) mediaAnswers(ctx context.Context) error {
	cli, err := s.client()
	if err != nil {
		return err
	}
	_, err = cli.GetMediaConfig(quiet(ctx, cli))
	if st := status(err); st == http.StatusNotFound || st == http.StatusBadRequest || st == http.StatusMethodNotAllowed {
		_, err = cli.MakeRequest(quiet(ctx, cli), http.MethodGet, cli.BuildURL(mautrix.MediaURLPath{"v3", "config"}), nil, nil)
	}
	return s.describe(err)
}

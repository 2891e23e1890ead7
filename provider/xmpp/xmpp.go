// Package xmpp asks an XMPP server whether a dispatch arrived: it logs in as the
// sending account, searches the account's own message archive (XEP-0313 MAM,
// urn:xmpp:mam:2, paged with XEP-0059 RSM) for the attempt's window, keeps the
// messages the account sent whose link (body or jabber:x:oob URL) names the
// dispatch's file, downloads each link over HTTPS and hashes the bytes.
//
// A file sent through Gajim with HTTP upload (XEP-0363) is a message from the
// sender to the recipient whose body is the https link
// https://host/…/<id>/<file name> and which carries the same URL in a
// jabber:x:oob element; the archive keeps it with a stable id (the MAM result
// id, which is the archive's stanza-id).
//
// It never logs, and never puts the password in an error or an Answer.
package xmpp

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/text/unicode/norm"
	"mellium.im/sasl"
	"mellium.im/xmpp"
	"mellium.im/xmpp/dial"
	"mellium.im/xmpp/disco"
	"mellium.im/xmpp/disco/items"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/upload"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/provider"
)

// Provider is the XMPP provider. It is safe for concurrent use: every Lookup
// opens its own connection.
type Provider struct {
	cfg  Config
	http *fetcher // downloads and hashes links; its client is replaced in tests only

}

var _ provider.Provider = (*Provider)(nil)

// New returns a provider for cfg. Lookup reports an invalid cfg as an error.
func New(cfg Config) *Provider {
	return &Provider{cfg: cfg, http: newFetcher(cfg)}
}

// Lookup searches the sending account's archive for d. See the package comment.
//
// It returns an error only for an invalid Config or Dispatch (a programming
// error); a network, TLS, login or archive failure is an Answer with Result
// CantTell. Found lists every message the account sent in [d.From-1min,
// d.Until+1min] whose link names d.FileName, whatever the recipient, each with
// the SHA-256 of the bytes at its link (empty when they could not be
// downloaded; Detail says why), in archive order; its Authoritative says the
// list is complete. Absent is Authoritative only when the archive said its last
// page was complete and stable, and the account's archiving preferences keep
// messages to d.Destination (to anyone, when d has no Destination). The window
// is read on the server's clock.
func (p *Provider) Lookup(ctx context.Context, d provider.Dispatch) (provider.Answer, error) {
	dest, err := checkDispatch(d)
	if err != nil {
		return provider.Answer{}, fmt.Errorf("xmpp provider: %w", err)
	}
	ctx, cancel, account, err := p.begin(ctx)
	if err != nil {
		return provider.Answer{}, err
	}
	defer cancel()
	cantTell := func(format string, args ...any) (provider.Answer, error) {
		return provider.Answer{
			Result: provider.CantTell,
			Detail: p.redact(fmt.Sprintf(format, args...)),
		}, nil
	}

	sess, err := p.connect(ctx, account)
	if err != nil {
		return cantTell("The XMPP server could not be asked: %s.", p.describe(ctx, err))
	}
	defer sess.close()

	prefs, prefsErr := sess.archivePrefs(ctx)
	window := window{From: d.From.Add(-time.Minute), Until: d.Until.Add(time.Minute)}
	res, err := sess.searchArchive(ctx, window)
	sess.close() // the downloads need no XMPP session
	if err != nil {
		return cantTell("The archive of %s could not be searched for %s: %s.", account, window, p.describe(ctx, err))
	}

	objects, notes, refused := p.collect(ctx, res.messages, account, d)
	complete := res.complete && res.stable
	var b strings.Builder
	fmt.Fprintf(&b, "Searched the MAM archive of %s for %s: %d messages in %d pages", account, window, len(res.messages), res.pages)
	switch {
	case complete:
		b.WriteString(", complete")
	case res.complete:
		b.WriteString(", complete but unstable (the server may still change the results)")
	default:
		fmt.Fprintf(&b, ", NOT complete (%s)", res.incomplete)
	}

	if len(objects) > 0 {
		fmt.Fprintf(&b, "; %d sent with a link named %q: ", len(objects), d.FileName)
		for i, o := range objects {
			if i > 0 {
				b.WriteString(", ")
			}
			sum := o.SHA256
			if sum == "" {
				sum = "bytes unknown"
			} else {
				sum = "sha256 " + sum[:12] + "…"
			}
			fmt.Fprintf(&b, "%s to %s at %s (%s)", o.ID, o.Recipient, o.At.UTC().Format(time.RFC3339), sum)
		}
		for _, n := range notes {
			b.WriteString("; " + strings.TrimRight(n, "."))
		}
		b.WriteString(".")
		return provider.Answer{
			Result:        provider.Found,
			Objects:       objects,
			Authoritative: complete,
			Detail:        p.redact(b.String()),
			Final:         refused,
		}, nil
	}

	fmt.Fprintf(&b, "; none sent with a link named %q", d.FileName)
	authoritative := complete
	if complete {
		ok, why := prefsCover(prefs, prefsErr, dest)
		authoritative = ok
		b.WriteString("; " + why)
	}
	b.WriteString(".")
	return provider.Answer{
		Result:        provider.Absent,
		Authoritative: authoritative,
		Detail:        p.redact(b.String()),
	}, nil
}

// checkDispatch validates what a lookup needs and returns the destination as a
// JID (zero when d has no destination: a lookup by name only).
func checkDispatch(d provider.Dispatch) (jid.JID, error) {
	if d.FileName == "" || strings.ContainsAny(d.FileName, "/\x00") {
		return jid.JID{}, fmt.Errorf("dispatch %s: file name %q is empty or not a base name", d.DispatchID, d.FileName)
	}
	if d.From.IsZero() || d.Until.IsZero() || d.Until.Before(d.From) {
		return jid.JID{}, fmt.Errorf("dispatch %s: window %s to %s is empty or reversed", d.DispatchID, d.From, d.Until)
	}
	if d.Size < 0 {
		return jid.JID{}, fmt.Errorf("dispatch %s: negative size %d", d.DispatchID, d.Size)
	}
	if d.SHA256 != "" {
		if b, err := hex.DecodeString(d.SHA256); err != nil || len(b) != 32 {
			return jid.JID{}, fmt.Errorf("dispatch %s: SHA256 %q is not 64 hex digits", d.DispatchID, d.SHA256)
		}
	}
	if d.Destination.IsZero() {
		return jid.JID{}, nil
	}
	if d.Destination.Namespace() != "xmpp" {
		return jid.JID{}, fmt.Errorf("dispatch %s: destination %q is not an xmpp: identity", d.DispatchID, d.Destination)
	}
	j, err := jid.Parse(d.Destination.Value())
	if err != nil {
		return jid.JID{}, fmt.Errorf("dispatch %s: destination %q: %v", d.DispatchID, d.Destination, err)
	}
	return j.Bare(), nil
}

// recipient is the canonical identity of a message's "to", as gate spells it.
func recipient(to jid.JID) string {
	bare := to.Bare().String()
	if id, err := gate.ProviderID("xmpp:" + bare); err == nil {
		return id.String()
	}
	return "xmpp:" + bare
}

// collect keeps the messages the account sent whose link names d.FileName and
// hashes the bytes at each link (each distinct link once). refused says there were
// objects and the settings refused the download of every one (errRefused): asking
// again cannot read their bytes.
func (p *Provider) collect(ctx context.Context, msgs []archived, account jid.JID, d provider.Dispatch) (_ []provider.Object, _ []string, refused bool) {
	want := norm.NFC.String(d.FileName)
	var objects []provider.Object
	for _, m := range msgs {
		if m.Foreign || m.Type == "error" || m.To.Equal(jid.JID{}) {
			continue
		}
		// Only what the account itself sent: an incoming file with the same
		// name is not this dispatch. (An empty from is the account itself.)
		if !m.From.Equal(jid.JID{}) && !m.From.Bare().Equal(account) {
			continue
		}
		link := ""
		for _, u := range m.links() {
			if name, ok := fileName(u); ok && norm.NFC.String(name) == want {
				link = u
				break
			}
		}
		if link == "" {
			continue
		}
		objects = append(objects, provider.Object{
			ID:        m.ID,
			Link:      link,
			At:        m.At,
			Recipient: recipient(m.To),
			FileName:  d.FileName,
		})
	}

	var notes []string
	sums := map[string]fetchResult{}
	refused = len(objects) > 0
	for i := range objects {
		r, done := sums[objects[i].Link]
		if !done {
			r = p.http.fetch(ctx, objects[i].Link, d.Size)
			sums[objects[i].Link] = r
			if r.err != nil {
				notes = append(notes, fmt.Sprintf("the bytes of %s could not be fetched: %v", objects[i].ID, r.err))
			}
		}
		objects[i].SHA256 = r.sha256
		refused = refused && errors.Is(r.err, errRefused)
	}
	return objects, notes, refused
}

// session is one logged-in connection, with its archive collector.
type session struct {
	s       *xmpp.Session
	conn    net.Conn
	results *collector
	served  chan error
	stop    func() bool
	once    sync.Once
}

// close ends the stream and the connection and waits for the reader; it may be
// called more than once.
func (s *session) close() {
	s.once.Do(func() {
		s.stop()
		_ = s.s.Close()
		_ = s.conn.Close()
		<-s.served
	})
}

// connect dials, secures (STARTTLS, or direct TLS), logs in with SCRAM or PLAIN
// (only once TLS is up: mellium refuses SASL before), binds a resource of the
// server's choosing and starts reading the stream.
func (p *Provider) connect(ctx context.Context, account jid.JID) (*session, error) {
	serverName := p.cfg.ServerName
	if serverName == "" {
		serverName = account.Domainpart()
	}
	tlsCfg := &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12} // system roots

	var conn net.Conn
	var err error
	switch {
	case p.cfg.Addr != "" && p.cfg.StartTLS:
		var d net.Dialer
		conn, err = d.DialContext(ctx, "tcp", p.cfg.Addr)
	case p.cfg.Addr != "":
		direct := tlsCfg.Clone()
		direct.NextProtos = []string{"xmpp-client"}
		d := tls.Dialer{Config: direct}
		conn, err = d.DialContext(ctx, "tcp", p.cfg.Addr)
	default:
		direct := tlsCfg.Clone()
		direct.NextProtos = []string{"xmpp-client"}
		d := dial.Dialer{NoTLS: p.cfg.StartTLS, TLSConfig: direct}
		conn, err = d.Dial(ctx, "tcp", account)
	}
	if err != nil {
		return nil, &stepError{step: "connecting", err: err}
	}
	if !p.cfg.StartTLS {
		if _, ok := conn.(*tls.Conn); !ok {
			conn.Close()
			return nil, &stepError{step: "connecting", err: errors.New("no direct TLS offered (the server has no xmpps-client record)")}
		}
	}
	// After negotiation mellium ignores ctx: closing the connection is what
	// bounds the rest of the lookup.
	stop := context.AfterFunc(ctx, func() { conn.Close() })

	xs, err := xmpp.NewClientSession(ctx, account, conn,
		xmpp.StartTLS(tlsCfg),
		xmpp.SASL("", p.cfg.Password, p.mechanisms()...),
		xmpp.BindResource(),
	)
	if err != nil {
		stop()
		conn.Close()
		return nil, &stepError{step: "logging in as " + account.String(), err: err}
	}
	if !xs.ConnectionState().HandshakeComplete {
		stop()
		xs.Close()
		conn.Close()
		return nil, &stepError{step: "logging in as " + account.String(), err: errors.New("the stream is not encrypted")}
	}
	s := &session{s: xs, conn: conn, results: newCollector(account), served: make(chan error, 1), stop: stop}
	go func() { s.served <- xs.Serve(s.results) }()
	return s, nil
}

// stepError says what was being done when err happened.
type stepError struct {
	step string
	err  error
}

func (e *stepError) Error() string { return e.step + ": " + e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// describe turns an error into a phrase for Detail: the timeout is named, and
// the password is removed by redact afterwards.
func (p *Provider) describe(ctx context.Context, err error) string {
	msg := strings.TrimRight(strings.TrimSpace(err.Error()), ".")
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		msg += " (the lookup ran out of time)"
	case ctx.Err() != nil:
		msg += " (the lookup was cancelled)"
	}
	return msg
}

// redact removes the password from s, wherever it might have come from.
func (p *Provider) redact(s string) string {
	if p.cfg.Password == "" {
		return s
	}
	return strings.ReplaceAll(s, p.cfg.Password, "[password]")
}

// mechanisms are the SASL mechanisms the login may use, best first: SCRAM only, unless
// the configuration allows PLAIN.
func (p *Provider) mechanisms() []sasl.Mechanism {
	ms := []sasl.Mechanism{sasl.ScramSha256, sasl.ScramSha1}
	if p.cfg.AllowPlain {
		ms = append(ms, sasl.Plain)
	}
	return ms
}

// begin checks the configuration and bounds one conversation with the server by the
// configured timeout: the context, and the account as a bare JID.
func (p *Provider) begin(ctx context.Context) (context.Context, context.CancelFunc, jid.JID, error) {
	if err := p.cfg.validate(); err != nil {
		return nil, nil, jid.JID{}, fmt.Errorf("xmpp provider: %w", err)
	}
	timeout := p.cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	account, _ := jid.Parse(p.cfg.JID) // validated above
	return ctx, cancel, account.Bare(), nil
}

// Check tries what a Lookup does, sending nothing: what `sendonce doctor` asks of a
// configured account. It logs in, reads the account's archiving preferences, searches
// its archive over the last hour, asks the account's HTTP upload service (XEP-0363)
// for a slot and downloads from the slot's link as a lookup downloads a sent file (the
// same checks: https, the account's domain or download_hosts, a public address unless
// allow_private_addresses). Nothing is uploaded: any HTTP answer there is a download
// that reached the service. It says what it saw; an error names the setting to change.
// The destination (an xmpp: id, or the zero Identity) is not read: the archive is the account's own.
func (p *Provider) Check(ctx context.Context, destination gate.Identity, now time.Time) (string, error) {
	ctx, cancel, account, err := p.begin(ctx)
	if err != nil {
		return "", err
	}
	defer cancel()
	sess, err := p.connect(ctx, account)
	if err != nil {
		return "", errors.New(p.redact(fmt.Sprintf("%s could not log in: %s", account, p.describe(ctx, err))))
	}
	defer sess.close()
	prefs, err := sess.archivePrefs(ctx)
	if err != nil {
		return "", errors.New(p.redact(fmt.Sprintf("%s logged in, but its archiving preferences could not be read: %s", account, p.describe(ctx, err))))
	}
	covers, why := prefsCover(prefs, nil, jid.JID{})
	saw := fmt.Sprintf("%s logged in; its archive keeps %q by default", account, prefs.Default)
	if !covers {
		saw += " (" + why + ")"
	}
	w := window{From: now.Add(-time.Hour), Until: now}
	res, err := sess.searchArchive(ctx, w)
	if err != nil {
		return "", errors.New(p.redact(fmt.Sprintf("%s; but its archive could not be searched: %s", saw, p.describe(ctx, err))))
	}
	saw += fmt.Sprintf("; its archive searched for the last hour (%d messages)", len(res.messages))
	link, err := sess.uploadLink(ctx, account)
	if err != nil {
		return "", errors.New(p.redact(fmt.Sprintf("%s; but no download could be tried: %s", saw, p.describe(ctx, err))))
	}
	sess.close() // the download needs no XMPP session
	if err := p.http.probe(ctx, link); err != nil {
		return "", errors.New(p.redact(fmt.Sprintf("%s; but a download from its upload service (%s) failed: a lookup could not read the bytes of a file sent: %v", saw, hostOf(link), err)))
	}
	return fmt.Sprintf("%s; a download from its upload service (%s) reached it", saw, hostOf(link)), nil
}

func hostOf(link string) string {
	if u, err := url.Parse(link); err == nil {
		return u.Host
	}
	return link
}

// uploadLink finds the account's HTTP upload service (XEP-0363) among its server's
// services and asks it for a slot for a one-byte file: the slot's download link, on the
// host a file sent through it would be downloaded from. Nothing is uploaded.
func (s *session) uploadLink(ctx context.Context, account jid.JID) (string, error) {
	domain := account.Domain()
	services := []jid.JID{domain}
	iter := disco.FetchItems(ctx, items.Item{JID: domain}, s.s)
	for iter.Next() {
		services = append(services, iter.Item().JID)
	}
	err := iter.Err()
	iter.Close()
	if err != nil {
		return "", fmt.Errorf("listing %s's services failed: %v", domain, err)
	}
	for _, svc := range services {
		inf, err := disco.GetInfo(ctx, "", svc, s.s)
		if err != nil {
			continue
		}
		for _, f := range inf.Features {
			if f.Var != upload.NS {
				continue
			}
			slot, err := upload.GetSlot(ctx, upload.File{Name: "sendonce-doctor.txt", Size: 1, Type: "text/plain"}, svc, s.s)
			if err != nil {
				return "", fmt.Errorf("the upload service %s gave no slot: %v", svc, err)
			}
			if slot.GetURL == nil {
				return "", fmt.Errorf("the upload service %s gave a slot without a download link", svc)
			}
			return slot.GetURL.String(), nil
		}
	}
	return "", fmt.Errorf("%s has no HTTP upload service (%s): a file sent there has no link a lookup can download", domain, upload.NS)
}

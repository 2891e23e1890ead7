package xmpp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	"mellium.im/xmlstream"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stanza"
)

// Namespaces of the archive query (XEP-0313), result set management (XEP-0059),
// data forms (XEP-0004), forwarding (XEP-0297), delay (XEP-0203) and
// out-of-band data (XEP-0066).
const (
	nsMAM     = "urn:xmpp:mam:2"
	nsRSM     = "http://jabber.org/protocol/rsm"
	nsData    = "jabber:x:data"
	nsForward = "urn:xmpp:forward:0"
	nsDelay   = "urn:xmpp:delay"
	nsOOB     = "jabber:x:oob"
	nsClient  = "jabber:client"
)

// pageSize is the RSM max per page (the server may send fewer); a variable so
// that a test can force paging.
var pageSize = 100

// maxPages is a runaway guard: 100,000 messages in one window is not a chat account.
const maxPages = 1000

// window is the archive interval searched.
type window struct{ From, Until time.Time }

func (w window) String() string {
	return w.From.UTC().Format(time.RFC3339) + " to " + w.Until.UTC().Format(time.RFC3339)
}

// archived is one message found in the archive.
type archived struct {
	ID       string // the MAM result id: the archive's stanza-id
	At       time.Time
	From, To jid.JID
	Type     string
	Body     string
	OOB      []string
	// Foreign: another sender's message (its from is not the account). It counts as a
	// result of its page and is never an object; nothing else of it is read, so that
	// nothing in it (a stamp, an id, an address) can fail or end the search.
	Foreign bool
}

// links are the URLs the message carries: its out-of-band URLs first, then the
// http(s) words of its body.
func (m archived) links() []string {
	var out []string
	seen := map[string]bool{}
	add := func(u string) {
		u = strings.TrimSpace(u)
		if u != "" && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	for _, u := range m.OOB {
		add(u)
	}
	for _, w := range strings.Fields(m.Body) {
		if strings.HasPrefix(w, "https://") || strings.HasPrefix(w, "http://") {
			add(w)
		}
	}
	return out
}

// fileName is the base name a link names: its last path segment, URL-decoded.
func fileName(link string) (string, bool) {
	u, err := url.Parse(link)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", false
	}
	p := u.EscapedPath()
	seg := p[strings.LastIndexByte(p, '/')+1:]
	name, err := url.PathUnescape(seg)
	if err != nil || name == "" {
		return "", false
	}
	return name, true
}

// resultXML is <result xmlns='urn:xmpp:mam:2'> inside an archive message.
type resultXML struct {
	XMLName   xml.Name `xml:"urn:xmpp:mam:2 result"`
	QueryID   string   `xml:"queryid,attr"`
	ID        string   `xml:"id,attr"`
	Forwarded struct {
		Delay struct {
			Stamp string `xml:"stamp,attr"`
		} `xml:"urn:xmpp:delay delay"`
		Message struct {
			From string `xml:"from,attr"`
			To   string `xml:"to,attr"`
			Type string `xml:"type,attr"`
			Body []struct {
				Lang string `xml:"http://www.w3.org/XML/1998/namespace lang,attr"`
				Text string `xml:",chardata"`
			} `xml:"body"`
			OOB []struct {
				URL string `xml:"url"`
			} `xml:"jabber:x:oob x"`
		} `xml:"jabber:client message"`
	} `xml:"urn:xmpp:forward:0 forwarded"`
}

// archiveMessageXML is a message stanza that may carry an archive result.
type archiveMessageXML struct {
	XMLName xml.Name    `xml:"message"`
	Results []resultXML `xml:"urn:xmpp:mam:2 result"`
}

// collector receives the archive's result messages while a query runs. It is
// the session's handler: Serve calls it for every incoming stanza, in order,
// and hands the query's IQ response to the waiting caller only after every
// message before it was handled.
type collector struct {
	mu      sync.Mutex
	account jid.JID // bare: the archive's owner, whose own messages are read whole
	queries map[string]*queryState
}

type queryState struct {
	msgs []archived
	errs []string
}

func newCollector(account jid.JID) *collector {
	return &collector{account: account.Bare(), queries: map[string]*queryState{}}
}

func (c *collector) track(queryID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queries[queryID] = &queryState{}
}

func (c *collector) take(queryID string) *queryState {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queries[queryID]
	delete(c.queries, queryID)
	return q
}

// HandleXMPP implements xmpp.Handler.
func (c *collector) HandleXMPP(t xmlstream.TokenReadEncoder, start *xml.StartElement) error {
	if start.Name.Local != "message" {
		return nil // IQs get the default service-unavailable answer; the rest is ignored
	}
	var from string
	for _, a := range start.Attr {
		if a.Name.Local == "from" && a.Name.Space == "" {
			from = a.Value
		}
	}
	// Archive results of the account's own archive come from the account's bare
	// JID, which the session reports as an empty from. Anything else is another
	// entity's message, even if it looks like a result: ignored.
	if from != "" {
		return nil
	}
	var msg archiveMessageXML
	err := xml.NewTokenDecoder(xmlstream.MultiReader(xmlstream.Token(*start), t)).Decode(&msg)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		// It may have been one of our results: fail every running query rather
		// than answer without it.
		for _, q := range c.queries {
			q.errs = append(q.errs, "a message from the archive could not be read: "+err.Error())
		}
		return nil
	}
	for _, r := range msg.Results {
		q := c.queries[r.QueryID]
		if q == nil {
			continue
		}
		a, err := r.archived(c.account)
		if err != nil {
			q.errs = append(q.errs, err.Error())
			continue
		}
		q.msgs = append(q.msgs, a)
	}
	return nil
}

// archived reads one result. A message of another sender than account is Foreign and
// read no further: what a peer put in it is not ours to fail on. The account's own
// message with something unreadable is an error: the search cannot say it saw it.
func (r resultXML) archived(account jid.JID) (archived, error) {
	m := r.Forwarded.Message
	if m.From != "" {
		from, err := jid.Parse(m.From)
		if err != nil || !from.Bare().Equal(account) {
			return archived{ID: r.ID, Foreign: true}, nil
		}
	}
	a := archived{ID: r.ID, Type: m.Type}
	if r.ID == "" {
		return a, errors.New("an archive result without an id")
	}
	if r.Forwarded.Delay.Stamp != "" {
		at, err := time.Parse(time.RFC3339Nano, r.Forwarded.Delay.Stamp)
		if err != nil {
			return a, fmt.Errorf("archive result %s: bad delay stamp %q", r.ID, r.Forwarded.Delay.Stamp)
		}
		a.At = at
	}
	var err error
	if m.From != "" {
		if a.From, err = jid.Parse(m.From); err != nil {
			return a, fmt.Errorf("archive result %s: bad from %q", r.ID, m.From)
		}
	}
	if m.To != "" {
		if a.To, err = jid.Parse(m.To); err != nil {
			return a, fmt.Errorf("archive result %s: bad to %q", r.ID, m.To)
		}
	}
	for _, b := range m.Body {
		if a.Body != "" {
			a.Body += "\n"
		}
		a.Body += b.Text
	}
	for _, o := range m.OOB {
		a.OOB = append(a.OOB, o.URL)
	}
	return a, nil
}

// mamQueryXML is the archive query (XEP-0313 §4), filtered by time, paged by RSM.
type mamQueryXML struct {
	XMLName xml.Name `xml:"urn:xmpp:mam:2 query"`
	QueryID string   `xml:"queryid,attr"`
	Form    struct {
		XMLName xml.Name       `xml:"jabber:x:data x"`
		Type    string         `xml:"type,attr"`
		Fields  []formFieldXML `xml:"field"`
	}
	Set struct {
		XMLName xml.Name `xml:"http://jabber.org/protocol/rsm set"`
		Max     int      `xml:"max"`
		After   string   `xml:"after,omitempty"`
	}
}

type formFieldXML struct {
	Var   string `xml:"var,attr"`
	Type  string `xml:"type,attr,omitempty"`
	Value string `xml:"value"`
}

// finXML is the archive's answer to one page: <fin complete=… stable=…><set>…</set></fin>.
type finXML struct {
	XMLName  xml.Name `xml:"urn:xmpp:mam:2 fin"`
	Complete string   `xml:"complete,attr"`
	Stable   string   `xml:"stable,attr"`
	Set      struct {
		First string `xml:"first"`
		Last  string `xml:"last"`
		Count string `xml:"count"`
	} `xml:"http://jabber.org/protocol/rsm set"`
}

// searchResult is what paging through the archive gave.
type searchResult struct {
	messages   []archived
	pages      int
	complete   bool   // the last page said complete="true"
	stable     bool   // no page said stable="false"
	incomplete string // why not complete, for Detail
}

// searchArchive pages through the account's archive for w, every correspondent,
// until the server says the result set is complete.
//
// The walk is the server's own: the window is filtered on the archive's times (the
// server's clock when it archived each message, never a <delay/> a sender put in one),
// the pages follow the ids the server's RSM answer gives, and the end is its <fin/>.
// Nothing a message holds ends it: another sender's message counts as a result of its
// page and is never read further (see archived).
func (s *session) searchArchive(ctx context.Context, w window) (searchResult, error) {
	res := searchResult{stable: true}
	after := ""
	for {
		if res.pages >= maxPages {
			res.incomplete = fmt.Sprintf("stopped after %d pages", maxPages)
			return res, nil
		}
		q := mamQueryXML{QueryID: randomID()}
		q.Form.Type = "submit"
		q.Form.Fields = []formFieldXML{
			{Var: "FORM_TYPE", Type: "hidden", Value: nsMAM},
			{Var: "start", Value: w.From.UTC().Format(time.RFC3339)},
			{Var: "end", Value: w.Until.UTC().Format(time.RFC3339)},
		}
		q.Set.Max = pageSize
		q.Set.After = after

		s.results.track(q.QueryID)
		var fin finXML
		err := s.iq(ctx, stanza.SetIQ, q, &fin)
		got := s.results.take(q.QueryID)
		if err != nil {
			return res, err
		}
		if fin.XMLName.Local != "fin" {
			return res, errors.New("the archive answered without a <fin/>")
		}
		if len(got.errs) > 0 {
			return res, fmt.Errorf("the archive sent results that could not be read: %s", strings.Join(got.errs, "; "))
		}
		res.pages++
		res.messages = append(res.messages, got.msgs...)
		if fin.Stable == "false" {
			res.stable = false
		}
		if fin.Complete == "true" || fin.Complete == "1" {
			res.complete = true
			return res, nil
		}
		if fin.Set.Last == "" || fin.Set.Last == after || len(got.msgs) == 0 {
			res.incomplete = "the archive said not complete but gave no next page"
			return res, nil
		}
		after = fin.Set.Last
	}
}

// prefsXML is the account's archiving preferences (XEP-0313 §6).
type prefsXML struct {
	XMLName xml.Name `xml:"urn:xmpp:mam:2 prefs"`
	Default string   `xml:"default,attr"`
	Always  []string `xml:"always>jid"`
	Never   []string `xml:"never>jid"`
}

// archivePrefs asks the server which messages the account's archive keeps.
func (s *session) archivePrefs(ctx context.Context) (prefsXML, error) {
	var p prefsXML
	err := s.iq(ctx, stanza.GetIQ, struct {
		XMLName xml.Name `xml:"urn:xmpp:mam:2 prefs"`
	}{}, &p)
	return p, err
}

// prefsCover says whether the preferences archive every message to dest (a zero
// dest: to anyone), so that "nothing in the archive" means "nothing sent".
func prefsCover(p prefsXML, err error, dest jid.JID) (bool, string) {
	if err != nil {
		return false, fmt.Sprintf("not authoritative: the archiving preferences could not be read (%v)", err)
	}
	in := func(list []string) bool {
		for _, s := range list {
			j, err := jid.Parse(strings.TrimSpace(s))
			if err != nil {
				continue
			}
			if dest.Equal(jid.JID{}) || j.Bare().Equal(dest) {
				return true
			}
		}
		return false
	}
	who := dest.String()
	if who == "" {
		who = "anyone"
	}
	switch {
	case in(p.Never):
		return false, fmt.Sprintf("not authoritative: the account's archive never keeps messages to %s", who)
	case p.Default == "always":
		return true, "the account archives every message (default \"always\")"
	case !dest.Equal(jid.JID{}) && in(p.Always):
		return true, fmt.Sprintf("the account always archives messages to %s", who)
	default:
		return false, fmt.Sprintf("not authoritative: the account's archiving default is %q, which may not keep messages to %s", p.Default, who)
	}
}

// iq sends payload in an IQ of type typ to the account itself (its archive) and
// decodes the response payload into v. An IQ error is returned as an error.
func (s *session) iq(ctx context.Context, typ stanza.IQType, payload, v any) (err error) {
	resp, err := s.s.EncodeIQElement(ctx, payload, stanza.IQ{Type: typ})
	if err != nil {
		return err
	}
	defer func() {
		if e := resp.Close(); err == nil {
			err = e
		}
	}()
	tok, err := resp.Token()
	if err != nil {
		return err
	}
	start, ok := tok.(xml.StartElement)
	if !ok {
		return fmt.Errorf("expected an IQ response, got %T", tok)
	}
	if _, err := stanza.UnmarshalIQError(resp, start); err != nil {
		var se stanza.Error
		if errors.As(err, &se) {
			return fmt.Errorf("the server answered %s", describeStanzaError(se))
		}
		return err
	}
	if v == nil {
		return nil
	}
	d := xml.NewTokenDecoder(xmlstream.Inner(resp))
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return nil // an empty result
		}
		if err != nil {
			return err
		}
		if st, ok := tok.(xml.StartElement); ok {
			return d.DecodeElement(v, &st)
		}
	}
}

func describeStanzaError(se stanza.Error) string {
	s := string(se.Condition)
	if s == "" {
		s = "an error"
	}
	if se.Type != "" {
		s += " (" + string(se.Type) + ")"
	}
	for _, t := range se.Text {
		if t != "" {
			s += ": " + t
			break
		}
	}
	return s
}

func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

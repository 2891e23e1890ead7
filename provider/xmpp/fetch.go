package xmpp

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"mellium.im/xmpp/jid"
)

// fetchTimeout bounds one download, plus a second per MiB of the file; the Lookup's
// own deadline bounds them all.
const fetchTimeout = 20 * time.Second

// fetcher downloads links and hashes them, and only where the account's own upload
// service is:
//
//   - https only, checked against the system trust store;
//   - the link's host must be the account's domain or a subdomain of it (its HTTP upload
//     service: upload.example.org), or one of the configured download hosts;
//   - the address actually connected to must not be loopback, private, link-local or
//     otherwise not globally routable, unless the configuration allows it: checked in
//     the dialer, after name resolution, so DNS rebinding cannot get around it;
//   - no redirect to another host, nor to anything but https;
//   - a body longer than the dispatch's size is other bytes (it cannot be ours).
type fetcher struct {
	client  *http.Client
	allowed func(host string) bool
}

type fetchResult struct {
	sha256 string // lowercase hex; empty on error
	err    error
}

func newFetcher(cfg Config) *fetcher {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12} // system roots
	tr.DisableKeepAlives = true                                    // one lookup, a few links: no idle connections left behind
	tr.DisableCompression = true                                   // hash the bytes as stored, not a re-encoding
	tr.Proxy = nil                                                 // the connected address is the one checked
	dialer := &net.Dialer{Timeout: 10 * time.Second, Control: func(network, address string, _ syscall.RawConn) error {
		if cfg.AllowPrivateAddresses {
			return nil
		}
		return checkPublicAddress(address)
	}}
	tr.DialContext = dialer.DialContext
	return &fetcher{
		client: &http.Client{
			Transport: tr,
			CheckRedirect: func(req *http.Request, via []*http.Request) error {
				switch {
				case req.URL.Scheme != "https":
					return fmt.Errorf("redirected to a non-https address")
				case !strings.EqualFold(req.URL.Host, via[0].URL.Host):
					return fmt.Errorf("redirected to another host (%s)", req.URL.Hostname())
				case len(via) >= 5:
					return errors.New("too many redirects")
				}
				return nil
			},
		},
		allowed: downloadHosts(cfg),
	}
}

// downloadHosts says which link hosts may be fetched: the account's domain, its
// subdomains, and the configured hosts.
func downloadHosts(cfg Config) func(host string) bool {
	domain := ""
	if j, err := jid.Parse(cfg.JID); err == nil {
		domain = strings.ToLower(j.Domainpart())
	}
	return func(hostport string) bool {
		host := strings.ToLower(strings.TrimSuffix(hostname(hostport), "."))
		for _, h := range cfg.DownloadHosts {
			if strings.EqualFold(h, hostport) || strings.EqualFold(h, host) {
				return true
			}
		}
		return domain != "" && (host == domain || strings.HasSuffix(host, "."+domain))
	}
}

func hostname(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// notPublic are ranges that netip does not call private or local but that are not
// the public internet either, or that carry an IPv4 address inside an IPv6 one.
var notPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT (and Tailscale)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: an IPv4 address inside
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("2001::/32"),       // Teredo: an IPv4 address inside
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4: an IPv4 address inside
}

// checkPublicAddress refuses an address that is not on the public internet.
func checkPublicAddress(address string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("cannot check the address %q", address)
	}
	a := ap.Addr().Unmap()
	bad := a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsUnspecified() || a.IsMulticast() || !a.IsGlobalUnicast()
	for _, p := range notPublic {
		bad = bad || p.Contains(a)
	}
	if bad {
		return fmt.Errorf("%w: the link leads to %s, a loopback, private, link-local or otherwise non-public address; if the upload service is on your own network (a test bed on one machine), set \"allow_private_addresses\": true in the account file", errRefused, a)
	}
	return nil
}

// errRefused marks a download this configuration refuses before any byte is read: asking
// again cannot change it.
var errRefused = errors.New("refused by the account's settings")

// probe downloads from link as fetch does (the same host, scheme and address checks)
// and reads nothing: any HTTP answer means the service was reached.
func (f *fetcher) probe(ctx context.Context, link string) error {
	r := f.fetch(ctx, link, 0)
	var status *httpStatus
	if r.err == nil || errors.As(r.err, &status) {
		return nil
	}
	return r.err
}

// httpStatus is a download answered with another status than 200 OK.
type httpStatus struct{ status string }

func (e *httpStatus) Error() string { return "HTTP " + e.status }

// fetch downloads link, reading at most size+1 bytes, and returns the SHA-256 of what
// it read: more than size bytes are other bytes than the dispatch's. Errors never quote
// the response body.
func (f *fetcher) fetch(ctx context.Context, link string, size int64) fetchResult {
	u, err := url.Parse(link)
	if err != nil {
		return fetchResult{err: errors.New("not a valid URL")}
	}
	if u.Scheme != "https" {
		return fetchResult{err: fmt.Errorf("%w: the link is %s, not https", errRefused, u.Scheme)}
	}
	if !f.allowed(u.Host) {
		return fetchResult{err: fmt.Errorf("%w: the link's host %s is not the account's upload service (its domain or a subdomain); if it is, add it to \"download_hosts\" in the account file", errRefused, u.Hostname())}
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout+time.Duration(size>>20)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		return fetchResult{err: errors.New("not a valid request URL")}
	}
	resp, err := f.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is named elsewhere in the Detail
		}
		return fetchResult{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fetchResult{err: &httpStatus{resp.Status}}
	}
	h := sha256.New()
	if resp.ContentLength > size {
		// Announced longer than the file sent: other bytes, whatever they are.
		fmt.Fprintf(h, "longer than %d bytes: %d", size, resp.ContentLength)
		return fetchResult{sha256: hex.EncodeToString(h.Sum(nil))}
	}
	if _, err := io.Copy(h, io.LimitReader(resp.Body, size+1)); err != nil {
		return fetchResult{err: fmt.Errorf("reading the bytes: %v", err)}
	}
	return fetchResult{sha256: hex.EncodeToString(h.Sum(nil))}
}

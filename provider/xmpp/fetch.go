package xmpp

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

const (
	// slack is how many bytes beyond the dispatch's size a download may read
	// before it is abandoned.
	slack = 1 << 20
	// fetchTimeout bounds one download, plus a second per MiB of the bound;
	// the Lookup's own deadline bounds them all.
	fetchTimeout = 20 * time.Second
)

// fetcher downloads links over HTTPS (system trust store) and hashes them.
type fetcher struct {
	client *http.Client
}

type fetchResult struct {
	sha256 string // lowercase hex; empty on error
	err    error
}

func newFetcher() *fetcher {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12} // system roots
	tr.DisableKeepAlives = true                                    // one lookup, a few links: no idle connections left behind
	tr.DisableCompression = true                                   // hash the bytes as stored, not a re-encoding
	return &fetcher{client: &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Scheme != "https" {
				return fmt.Errorf("redirected to a non-https address")
			}
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			return nil
		},
	}}
}

// fetch downloads link (https only), reading at most size+1MiB bytes, and returns
// the SHA-256 of what it read. Errors never quote the response body.
func (f *fetcher) fetch(ctx context.Context, link string, size int64) fetchResult {
	u, err := url.Parse(link)
	if err != nil {
		return fetchResult{err: errors.New("not a valid URL")}
	}
	if u.Scheme != "https" {
		return fetchResult{err: fmt.Errorf("the link is %s, not https", u.Scheme)}
	}
	limit := size + slack
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout+time.Duration(limit>>20)*time.Second)
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
		return fetchResult{err: fmt.Errorf("HTTP %s", resp.Status)}
	}
	if resp.ContentLength > limit {
		return fetchResult{err: fmt.Errorf("%d bytes, more than the %d expected (+1 MiB)", resp.ContentLength, size)}
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return fetchResult{err: fmt.Errorf("reading the bytes: %v", err)}
	}
	if n > limit {
		return fetchResult{err: fmt.Errorf("more than %d bytes, the %d expected +1 MiB", limit, size)}
	}
	return fetchResult{sha256: hex.EncodeToString(h.Sum(nil))}
}

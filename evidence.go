package sendonce

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/gate"
)

// Bundle is an opened, verified evidence bundle (a folder or an exported .tar.gz).
type Bundle struct {
	*evidence.Bundle
	cleanup func()
}

// Close removes what opening an archive unpacked.
func (b *Bundle) Close() {
	if b != nil && b.cleanup != nil {
		b.cleanup()
	}
}

// OpenBundle verifies a bundle folder, its steps.jsonl, or an exported archive: every
// hash, the chain, the seal and, when pub is given, the seal's signature by that key.
// A bundle that cannot be trusted is ErrEvidence; a path that cannot be read, ErrInvalid.
func OpenBundle(path string, pub ed25519.PublicKey) (*Bundle, error) {
	if filepath.Base(path) == "steps.jsonl" {
		path = filepath.Dir(path)
	}
	if _, err := os.Stat(path); err != nil {
		return nil, gate.Invalidf("cannot read %s: %v", path, errors.Unwrap(err))
	}
	b, cleanup, err := evidence.Open(path, evidence.VerifyOptions{PublicKey: pub})
	if err != nil {
		cleanup()
		return nil, err
	}
	return &Bundle{Bundle: b, cleanup: cleanup}, nil
}

// VerifyRequest names a bundle to verify.
type VerifyRequest struct {
	Path      string
	PublicKey ed25519.PublicKey // also require the seal to be signed by this key
	// AllowUnauthenticated accepts a bundle that is consistent but that nothing outside
	// it vouches for: the result then says authenticated false, and no error.
	AllowUnauthenticated bool
}

// VerifyEvidence verifies a bundle on its own, with no store: its hashes, chain and
// seal, and the signature by req.PublicKey when given. Nothing outside the bundle
// vouches for it, so it is ErrUnauthenticated unless req.AllowUnauthenticated.
func VerifyEvidence(req VerifyRequest) (VerifyResult, error) {
	b, err := OpenBundle(req.Path, req.PublicKey)
	if err != nil {
		return VerifyResult{}, err
	}
	defer b.Close()
	out := verifyResult(req.Path, b, "no store: nothing outside the bundle was checked (give --store or set SENDONCE_STORE)")
	if req.PublicKey != nil {
		out.Checked = append(out.Checked, "signature")
	}
	return out, unauthenticated(out, req)
}

func unauthenticated(out VerifyResult, req VerifyRequest) error {
	if out.Authenticated || req.AllowUnauthenticated {
		return nil
	}
	return fmt.Errorf("%w: %s is consistent, but %s (give --allow-unauthenticated to accept it as it is)", ErrUnauthenticated, req.Path, out.StoreCheck)
}

// VerifyEvidence verifies a bundle and authenticates it with the store. The attempt
// must be the store's (dispatch id, task and token), and every chain head the store
// recorded with a crossing or the outcome must be one of the bundle's (steps dropped
// from an unsealed bundle are found this way). A sealed bundle is authenticated by the
// signature of the workstation the store registered under the bundle's workstation id,
// over the chain head the store recorded with the outcome; an unsealed one (a crashed
// attempt) by the store's chain heads alone. A bundle that is consistent but cannot be
// authenticated is ErrUnauthenticated, unless req.AllowUnauthenticated.
func (c *Client) VerifyEvidence(ctx context.Context, req VerifyRequest) (VerifyResult, error) {
	b, err := OpenBundle(req.Path, req.PublicKey)
	if err != nil {
		return VerifyResult{}, err
	}
	defer b.Close()
	m := b.Manifest
	a, err := c.store.AttemptByDispatch(ctx, m.DispatchID)
	if err != nil {
		return VerifyResult{}, err
	}
	bad := func(format string, args ...any) (VerifyResult, error) {
		return VerifyResult{}, fmt.Errorf("%w: %s", evidence.ErrInvalid, fmt.Sprintf(format, args...))
	}
	switch {
	case a == nil:
		return bad("the store has no attempt with dispatch id %s", m.DispatchID)
	case a.Task != m.Task || (a.Token != m.Token && (a.CopiedFrom == "" || a.SourceToken != m.Token)):
		// (an attempt copied from another store has a new token; its bundle names the old)
		return bad("the store's attempt %s is task %s with token %d; the bundle says task %s, token %d", m.DispatchID, a.Task, a.Token, m.Task, m.Token)
	}
	for _, cr := range a.Crossings {
		if cr.ChainHead != "" && !b.HasHead(cr.ChainHead) {
			return bad("the store recorded chain head %.12s… when %s was crossed, and the bundle never reached it: records were dropped", cr.ChainHead, cr.Boundary)
		}
	}
	if a.ChainHead != "" && !b.HasHead(a.ChainHead) {
		return bad("the store recorded chain head %.12s… with the outcome, and the bundle never reached it: records were dropped", a.ChainHead)
	}
	if b.Sealed() && a.ChainHead != "" && b.Seal.ChainHead != a.ChainHead {
		return bad("the bundle was sealed at chain head %.12s…, the store recorded %.12s… with the outcome: records were added after it", b.Seal.ChainHead, a.ChainHead)
	}
	out := verifyResult(req.Path, b, "every chain head the store recorded for this dispatch is in the bundle")
	out.Checked = append(out.Checked, "store")
	if !b.Sealed() {
		// A crashed attempt: the store's chain heads are all there is to vouch for it.
		out.Authenticated = true
		return out, nil
	}
	signed := b.Seal.Signature != ""
	switch {
	case !signed:
		out.StoreCheck += "; the seal is not signed, so nothing shows which workstation sealed it"
	case m.Workstation == "":
		out.StoreCheck += "; the bundle names no workstation (format " + m.Format + "), so no registered key can vouch for its seal"
	default:
		pub, err := c.store.WorkstationKey(ctx, m.Workstation)
		if err != nil {
			return VerifyResult{}, err
		}
		sealKey, _ := base64.StdEncoding.DecodeString(b.Seal.PublicKey)
		switch {
		case pub == nil:
			out.StoreCheck += "; workstation " + m.Workstation + " has no key registered in this store"
		case !bytes.Equal(pub, sealKey):
			return bad("the seal is signed by a key other than the one registered for workstation %s: it was not sealed there", m.Workstation)
		default:
			out.Checked = append(out.Checked, "signature")
			out.StoreCheck += "; sealed by workstation " + m.Workstation + ", whose key the store registered"
			out.Authenticated = true
		}
	}
	return out, unauthenticated(out, req)
}

func verifyResult(path string, b *Bundle, storeCheck string) VerifyResult {
	out := VerifyResult{Bundle: path, Verified: true, Checked: []string{"internal"}, Format: b.Manifest.Format, Workstation: b.Manifest.Workstation,
		Sealed: b.Sealed(), Records: len(b.Records), ChainHead: b.Head(), DispatchID: b.Manifest.DispatchID,
		IdentityStrength: b.Manifest.IdentityStrength, StoreCheck: storeCheck, Title: b.Manifest.Title, Unrecorded: b.Unrecorded}
	if b.Sealed() {
		signed := b.Seal.Signature != ""
		out.SealOutcome, out.Signed = b.Seal.Outcome, &signed
	}
	return out
}

// Classify decides an attempt's outcome from its transcript (a bundle folder, its
// steps.jsonl or an exported archive). A transcript that cannot be trusted classifies
// as send_status_unknown with FailClosed set; only an unreadable path is an error.
func Classify(path string) (ClassifyResult, error) {
	b, err := OpenBundle(path, nil)
	switch {
	case errors.Is(err, gate.ErrInvalid):
		return ClassifyResult{}, err
	case err != nil:
		return ClassifyResult{evidence.FailClosed(err)}, nil
	}
	defer b.Close()
	return ClassifyResult{evidence.ClassifyBundle(b.Bundle)}, nil
}

// WriteReport writes the bundle as one self-contained HTML page, with its outcome as
// the classifier reads it.
func (b *Bundle) WriteReport(w io.Writer) (gate.Outcome, error) {
	c := evidence.ClassifyBundle(b.Bundle)
	return c.Outcome, evidence.WriteReport(w, b.Bundle, c)
}

// Export writes the bundle as a .tar.gz archive.
func (b *Bundle) Export(w io.Writer) error { return evidence.Export(b.Dir, w) }

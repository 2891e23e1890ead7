package sendonce

import (
	"context"
	"crypto/ed25519"
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
	PublicKey ed25519.PublicKey // require the seal to be signed by this key
}

// VerifyEvidence verifies a bundle on its own (no store).
func VerifyEvidence(req VerifyRequest) (VerifyResult, error) {
	b, err := OpenBundle(req.Path, req.PublicKey)
	if err != nil {
		return VerifyResult{}, err
	}
	defer b.Close()
	return verifyResult(req.Path, b, "not checked against a store (give --store or set SENDONCE_STORE)"), nil
}

// VerifyEvidence verifies a bundle and checks it against the store: every chain head
// the store recorded with a crossing or the outcome of its dispatch must be one of the
// bundle's (steps dropped from an unsealed bundle are found this way).
func (c *Client) VerifyEvidence(ctx context.Context, req VerifyRequest) (VerifyResult, error) {
	b, err := OpenBundle(req.Path, req.PublicKey)
	if err != nil {
		return VerifyResult{}, err
	}
	defer b.Close()
	a, err := c.store.AttemptByDispatch(ctx, b.Manifest.DispatchID)
	if err != nil {
		return VerifyResult{}, err
	}
	if a == nil {
		return VerifyResult{}, fmt.Errorf("%w: the store has no attempt with dispatch id %s", evidence.ErrInvalid, b.Manifest.DispatchID)
	}
	for _, cr := range a.Crossings {
		if cr.ChainHead != "" && !b.HasHead(cr.ChainHead) {
			return VerifyResult{}, fmt.Errorf("%w: the store recorded chain head %.12s… when %s was crossed, and the bundle never reached it: records were dropped", evidence.ErrInvalid, cr.ChainHead, cr.Boundary)
		}
	}
	if a.ChainHead != "" && !b.HasHead(a.ChainHead) {
		return VerifyResult{}, fmt.Errorf("%w: the store recorded chain head %.12s… with the outcome, and the bundle never reached it: records were dropped", evidence.ErrInvalid, a.ChainHead)
	}
	return verifyResult(req.Path, b, "every chain head the store recorded for this dispatch is in the bundle"), nil
}

func verifyResult(path string, b *Bundle, storeCheck string) VerifyResult {
	out := VerifyResult{Bundle: path, Verified: true, Sealed: b.Sealed(), Records: len(b.Records), ChainHead: b.Head(), DispatchID: b.Manifest.DispatchID,
		IdentityStrength: b.Manifest.IdentityStrength, StoreCheck: storeCheck, Title: b.Manifest.Title}
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

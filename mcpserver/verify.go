package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/internal/files"
)

// verify_evidence looks only beneath the allowed folders, the client's roots and this
// server's own evidence folder, as a file is: the bundle is judged by its name first
// (so a refusal never tells whether anything outside exists), then copied, one name at
// a time from the open folder with no link followed, into a private folder of the
// server's, and that copy is what is verified. Nothing swapped in under the name after
// it was judged is read.

// Bounds of a bundle copied for verification (as an archive's unpacking is bounded).
const (
	maxBundleBytes   = 1 << 30
	maxBundleEntries = 20000
	maxBundleDepth   = 3 // bundle/frames/file; deeper folders are copied empty (the verifier refuses them)
)

func (s *Server) verifyEvidence(ctx context.Context, req *mcp.CallToolRequest, in VerifyInput) (*mcp.CallToolResult, sendonce.VerifyResult, error) {
	d, rel, ask, err := s.beneath(req, "bundle", in.Bundle, []string{s.Client.EvidenceRoot()})
	if d == nil {
		if ask != nil {
			return ask, sendonce.VerifyResult{}, nil
		}
		return toolError(err), sendonce.VerifyResult{}, nil
	}
	defer d.Close()
	tmp, err := os.MkdirTemp("", "sendonce-verify-") // 0700, ours
	if err != nil {
		return toolError(fmt.Errorf("%w: a private folder to verify in: %v", sendonce.ErrUnavailable, err)), sendonce.VerifyResult{}, nil
	}
	defer os.RemoveAll(tmp)
	copied, err := copyBundle(d, rel, tmp)
	if err != nil {
		return toolError(openError("bundle", in.Bundle, err)), sendonce.VerifyResult{}, nil
	}
	res, err := s.Client.VerifyEvidence(ctx, sendonce.VerifyRequest{Path: copied, AllowUnauthenticated: true})
	if err != nil {
		return toolError(&renamed{err: err, msg: strings.ReplaceAll(err.Error(), copied, filepath.Clean(in.Bundle))}), sendonce.VerifyResult{}, nil
	}
	res.Bundle = in.Bundle
	return nil, res, nil
}

// renamed is an error whose text names the bundle as the agent did, not the private
// copy that was verified; it matches what it wraps.
type renamed struct {
	err error
	msg string
}

func (e *renamed) Error() string { return e.msg }
func (e *renamed) Unwrap() error { return e.err }

// copyBundle copies what rel names beneath d (a bundle folder, its steps.jsonl, or an
// exported archive) into tmp, and returns the copy's path, which keeps the name's last
// element.
func copyBundle(d *files.Dir, rel, tmp string) (string, error) {
	if filepath.Base(rel) == "steps.jsonl" {
		rel = filepath.Dir(rel)
		if rel == "." {
			rel = ""
		}
	}
	budget := &bundleBudget{bytes: maxBundleBytes, entries: maxBundleEntries}
	if rel == "" {
		dst := filepath.Join(tmp, filepath.Base(d.Path()))
		return dst, copyTree(d, dst, 0, budget)
	}
	dst := filepath.Join(tmp, filepath.Base(rel))
	f, err := d.Open(rel)
	if errors.Is(err, files.ErrFolder) {
		sub, err := d.Sub(rel)
		if err != nil {
			return "", err
		}
		defer sub.Close()
		return dst, copyTree(sub, dst, 0, budget)
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	return dst, copyFile(f, dst, budget)
}

type bundleBudget struct{ bytes, entries int64 }

// copyTree copies the folder src into the new folder dst: its files through src's open
// descriptor, its folders by the same rule. An entry that is neither (a link, a FIFO)
// is copied as a dangling link, which the verifier refuses as it would the original.
func copyTree(src *files.Dir, dst string, depth int, budget *bundleBudget) error {
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	if depth >= maxBundleDepth {
		return nil
	}
	entries, err := src.ReadDir()
	if err != nil {
		return err
	}
	for _, e := range entries {
		if budget.entries--; budget.entries < 0 {
			return fmt.Errorf("%w: more than %d files: not a bundle", files.ErrUnsafe, maxBundleEntries)
		}
		to := filepath.Join(dst, e.Name())
		switch {
		case e.IsDir():
			sub, err := src.Sub(e.Name())
			if err != nil {
				return err
			}
			err = copyTree(sub, to, depth+1, budget)
			sub.Close()
			if err != nil {
				return err
			}
		case e.Type().IsRegular():
			f, err := src.Open(e.Name())
			if err != nil {
				return err
			}
			err = copyFile(f, to, budget)
			f.Close()
			if err != nil {
				return err
			}
		default:
			if err := os.Symlink("not-a-regular-file", to); err != nil && os.Mkdir(to, 0o700) != nil {
				return err // (Windows may refuse links: an empty folder is refused as well)
			}
		}
	}
	return nil
}

func copyFile(f *os.File, dst string, budget *bundleBudget) error {
	out, err := files.CreateExclusive(dst, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(f, budget.bytes+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if budget.bytes -= n; err == nil && budget.bytes < 0 {
		err = fmt.Errorf("%w: more than %d bytes: not a bundle", files.ErrUnsafe, maxBundleBytes)
	}
	return err
}

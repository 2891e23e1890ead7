package main

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/gate"
)

// exitVerifyFailed: 'evidence verify', 'report' and 'export' found a problem in the bundle.
const exitVerifyFailed = 1

// openBundle verifies a bundle folder or exported archive; a steps.jsonl path means its
// folder.
func openBundle(path, pubKey string) (*evidence.Bundle, func(), error) {
	opt := evidence.VerifyOptions{}
	if pubKey != "" {
		pub, err := base64.StdEncoding.DecodeString(pubKey)
		if err != nil || len(pub) != ed25519.PublicKeySize {
			return nil, func() {}, usagef("--public-key must be a base64 ed25519 public key")
		}
		opt.PublicKey = pub
	}
	if filepath.Base(path) == "steps.jsonl" {
		path = filepath.Dir(path)
	}
	if _, err := os.Stat(path); err != nil {
		return nil, func() {}, usagef("cannot read %s: %v", path, errors.Unwrap(err))
	}
	b, cleanup, err := evidence.Open(path, opt)
	if err != nil {
		return nil, cleanup, exitError{exitVerifyFailed, err}
	}
	return b, cleanup, nil
}

func cmdEvidenceVerify(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("evidence verify", "BUNDLE [--public-key BASE64] [--store PATH]")
	pubKey := fs.String("public-key", "", "require the seal to be signed by this ed25519 key (base64)")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	b, cleanup, err := openBundle(pos[0], *pubKey)
	defer cleanup()
	if err != nil {
		return err
	}
	checked := "not checked against a store (give --store or set SENDONCE_STORE)"
	if env.storePath != "" {
		if err := env.checkAgainstStore(ctx, b); err != nil {
			return err
		}
		checked = "every chain head the store recorded for this dispatch is in the bundle"
	}
	state := "sealed"
	if !b.Sealed() {
		state = "NOT SEALED (the attempt may still run, or its process died)"
	}
	out := map[string]any{"verified": true, "sealed": b.Sealed(), "records": len(b.Records), "chain_head": b.Head(),
		"dispatch_id": b.Manifest.DispatchID, "identity_strength": b.Manifest.IdentityStrength, "store_check": checked}
	if b.Sealed() {
		out["seal_outcome"], out["signed"] = b.Seal.Outcome, b.Seal.Signature != ""
	}
	env.print(out, func(w io.Writer) {
		fmt.Fprintf(w, "verified: %s, %s, %d records, chain head %s\nstore: %s\n", pos[0], state, len(b.Records), b.Head(), checked)
		if b.Manifest.IdentityStrength != "strong" {
			fmt.Fprintf(w, "WEAK identity: the destination was named by its visible title %q only\n", b.Manifest.Title)
		}
	})
	return nil
}

// checkAgainstStore detects steps dropped from a bundle: every chain head the store
// recorded with a crossing or the outcome of this dispatch must be one of the bundle's.
func (env *environment) checkAgainstStore(ctx context.Context, b *evidence.Bundle) error {
	s, err := env.openStore(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	a, err := s.AttemptByDispatch(ctx, b.Manifest.DispatchID)
	if err != nil {
		return err
	}
	if a == nil {
		return exitError{exitVerifyFailed, fmt.Errorf("%w: the store has no attempt with dispatch id %s", evidence.ErrInvalid, b.Manifest.DispatchID)}
	}
	for _, c := range a.Crossings {
		if c.ChainHead != "" && !b.HasHead(c.ChainHead) {
			return exitError{exitVerifyFailed, fmt.Errorf("%w: the store recorded chain head %.12s… when %s was crossed, and the bundle never reached it: records were dropped", evidence.ErrInvalid, c.ChainHead, c.Boundary)}
		}
	}
	if a.ChainHead != "" && !b.HasHead(a.ChainHead) {
		return exitError{exitVerifyFailed, fmt.Errorf("%w: the store recorded chain head %.12s… with the outcome, and the bundle never reached it: records were dropped", evidence.ErrInvalid, a.ChainHead)}
	}
	return nil
}

func cmdEvidenceReport(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("evidence report", "BUNDLE -o report.html")
	out := fs.String("o", "", "the HTML `FILE` to write")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	if *out == "" {
		return usagef("evidence report: -o FILE is required")
	}
	b, cleanup, err := openBundle(pos[0], "")
	defer cleanup()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return usagef("cannot write %s: %v", *out, errors.Unwrap(err))
	}
	c := evidence.ClassifyBundle(b)
	if err := evidence.WriteReport(f, b, c); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	env.print(map[string]any{"report": *out, "outcome": c.Outcome}, func(w io.Writer) {
		fmt.Fprintf(w, "report written to %s (outcome %s)\n", *out, c.Outcome)
	})
	return nil
}

func cmdEvidenceExport(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("evidence export", "BUNDLE -o FILE.tar.gz")
	out := fs.String("o", "", "the archive `FILE` to write")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	if *out == "" || !strings.HasSuffix(*out, ".tar.gz") {
		return usagef("evidence export: -o FILE.tar.gz is required")
	}
	b, cleanup, err := openBundle(pos[0], "")
	defer cleanup()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return usagef("cannot write %s: %v", *out, errors.Unwrap(err))
	}
	if err := evidence.Export(b.Dir, f); err != nil {
		f.Close()
		os.Remove(*out)
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	env.print(map[string]any{"archive": *out}, func(w io.Writer) { fmt.Fprintf(w, "exported to %s\n", *out) })
	return nil
}

// outcomeExit is the exit code an outcome maps to, as deliver uses them.
func outcomeExit(o gate.Outcome) int {
	switch o {
	case gate.SentVerified:
		return exitOK
	case gate.NotSent:
		return exitNotSent
	case gate.SentRejected:
		return exitRejected
	}
	return exitUnknown
}

func cmdClassify(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("classify", "TRANSCRIPT (a bundle folder, its steps.jsonl, or an exported .tar.gz)")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	b, cleanup, err := openBundle(pos[0], "")
	defer cleanup()
	var c evidence.Classification
	var u usageError
	switch {
	case errors.As(err, &u):
		return err
	case err != nil:
		c = evidence.FailClosed(err)
	default:
		c = evidence.ClassifyBundle(b)
	}
	env.print(c, func(w io.Writer) {
		fmt.Fprintf(w, "outcome: %s\n", c.Outcome)
		if c.FailClosed {
			fmt.Fprintln(w, "(fail closed: the transcript cannot be trusted or is incomplete; this grants nothing)")
		}
		for _, r := range c.Reasons {
			fmt.Fprintf(w, "  - %s\n", r)
		}
	})
	code := outcomeExit(c.Outcome)
	if c.FailClosed {
		code = exitFailClosed
	}
	if code != exitOK {
		return exitError{code, fmt.Errorf("outcome %s", c.Outcome)}
	}
	return nil
}

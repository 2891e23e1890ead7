package main

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/evidence"
)

func cmdEvidenceVerify(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("evidence verify", "BUNDLE [--public-key BASE64] [--store PATH]")
	pubKey := fs.String("public-key", "", "require the seal to be signed by this ed25519 key (base64)")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	req := sendonce.VerifyRequest{Path: pos[0]}
	if *pubKey != "" {
		pub, err := base64.StdEncoding.DecodeString(*pubKey)
		if err != nil || len(pub) != ed25519.PublicKeySize {
			return usagef("--public-key must be a base64 ed25519 public key")
		}
		req.PublicKey = pub
	}
	var res sendonce.VerifyResult
	if env.storePath == "" {
		res, err = sendonce.VerifyEvidence(req)
	} else {
		var c *sendonce.Client
		if c, err = env.open(ctx); err != nil {
			return err
		}
		defer c.Close()
		res, err = c.VerifyEvidence(ctx, req)
	}
	if err != nil {
		return err
	}
	state := "sealed"
	if !res.Sealed {
		state = "NOT SEALED (the attempt may still run, or its process died)"
	}
	env.print(res, func(w io.Writer) {
		fmt.Fprintf(w, "verified: %s, %s, %d records, chain head %s\nstore: %s\n", pos[0], state, res.Records, res.ChainHead, res.StoreCheck)
		if res.IdentityStrength != "strong" {
			fmt.Fprintf(w, "WEAK identity: the destination was named by its visible title %q only\n", res.Title)
		}
	})
	return nil
}

// writeBundle verifies the bundle at path and writes it to the file out with write;
// the file is removed again when that fails.
func writeBundle(path, out string, flag int, write func(*sendonce.Bundle, io.Writer) error) error {
	b, err := sendonce.OpenBundle(path, nil)
	if err != nil {
		return err
	}
	defer b.Close()
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|flag, 0o600)
	if err != nil {
		return usagef("cannot write %s: %v", out, errors.Unwrap(err))
	}
	if err = write(b, f); err == nil {
		err = f.Close()
	}
	if err != nil {
		f.Close()
		os.Remove(out)
	}
	return err
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
	res := sendonce.ReportResult{Report: *out}
	if err := writeBundle(pos[0], *out, os.O_TRUNC, func(b *sendonce.Bundle, w io.Writer) (err error) {
		res.Outcome, err = b.WriteReport(w)
		return err
	}); err != nil {
		return err
	}
	env.print(res, func(w io.Writer) { fmt.Fprintf(w, "report written to %s (outcome %s)\n", res.Report, res.Outcome) })
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
	if err := writeBundle(pos[0], *out, os.O_EXCL, (*sendonce.Bundle).Export); err != nil {
		return err
	}
	res := sendonce.ExportResult{Archive: *out}
	env.print(res, func(w io.Writer) { fmt.Fprintf(w, "exported to %s\n", res.Archive) })
	return nil
}

func cmdClassify(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("classify", "TRANSCRIPT (a bundle folder, its steps.jsonl, or an exported .tar.gz)")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	c, err := sendonce.Classify(pos[0])
	if err != nil {
		return err
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
	return classificationExit(c)
}

func classificationExit(c evidence.Classification) error {
	code := outcomeExit(c.Outcome)
	if c.FailClosed {
		code = exitFailClosed
	}
	if code != exitOK {
		return exitError{code, fmt.Errorf("outcome %s", c.Outcome)}
	}
	return nil
}

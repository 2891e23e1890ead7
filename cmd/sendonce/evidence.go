package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sendonce/sendonce"
)

func cmdEvidenceVerify(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("evidence verify", "BUNDLE [--store PATH] [--public-key BASE64] [--allow-unauthenticated]")
	pubKey := fs.String("public-key", "", "also require the seal to be signed by this ed25519 key (base64)")
	allow := fs.Bool("allow-unauthenticated", false, "accept a bundle that is consistent but that nothing outside it vouches for (exit 0, authenticated: false)")
	pos, err := env.parse(fs, args, 1)
	if err != nil {
		return err
	}
	req := sendonce.VerifyRequest{Path: pos[0], AllowUnauthenticated: *allow}
	if *pubKey != "" {
		if req.PublicKey, err = sendonce.ParsePublicKey(*pubKey); err != nil {
			return err
		}
	}
	// The store vouches for a bundle: the one named, else the default one when there is
	// one. Without a store the bundle can be checked only in itself (exit 10).
	explicit := env.storePath != ""
	c, err := env.open(ctx)
	var res sendonce.VerifyResult
	switch {
	case err == nil:
		defer c.Close()
		res, err = c.VerifyEvidence(ctx, req)
	case explicit:
		return err
	default:
		res, err = sendonce.VerifyEvidence(req)
	}
	if errors.Is(err, sendonce.ErrUnauthenticated) {
		env.print(res)            // what was checked, then exit 10
		env.printed = env.jsonOut // in text mode the sentence follows on stderr
		return err
	}
	if err != nil {
		return err
	}
	env.print(res)
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
	pos, err := env.parse(fs, args, 1)
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
	env.print(res)
	return nil
}

func cmdEvidenceExport(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("evidence export", "BUNDLE -o FILE.tar.gz")
	out := fs.String("o", "", "the archive `FILE` to write")
	pos, err := env.parse(fs, args, 1)
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
	env.print(res)
	return nil
}

func cmdClassify(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("classify", "TRANSCRIPT (a bundle folder, its steps.jsonl, or an exported .tar.gz)")
	pos, err := env.parse(fs, args, 1)
	if err != nil {
		return err
	}
	c, err := sendonce.Classify(pos[0])
	if err != nil {
		return err
	}
	env.print(c)
	if code := sendonce.ClassifyExit(c); code != exitOK {
		return exitError{code, fmt.Errorf("outcome %s", c.Outcome)}
	}
	return nil
}

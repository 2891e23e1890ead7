package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sendonce/sendonce/gate"
)

func cmdAuthorizerAdd(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("authorizer add", "--name NAME --public-key BASE64")
	name := fs.String("name", "", "the person's `NAME`, as they sign")
	pubFlag := fs.String("public-key", "", "their ed25519 public key, base64 ('authorizer keygen' prints it)")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	if *name == "" || *pubFlag == "" {
		return usagef("authorizer add: --name and --public-key are required")
	}
	pub, err := base64.StdEncoding.DecodeString(strings.TrimSpace(*pubFlag))
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return usagef("authorizer add: --public-key must be a base64 ed25519 public key (32 bytes)")
	}
	s, err := env.openStore(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.AddAuthorizer(ctx, *name, pub); err != nil {
		return err
	}
	env.print(map[string]any{"authorizer": *name, "public_key": *pubFlag}, func(w io.Writer) {
		fmt.Fprintf(w, "authorizer %s registered\n", *name)
	})
	return nil
}

const privateKeyHeader = "# sendonce authorizer private key (ed25519 seed, base64). Keep it where no automation can read it."

func cmdAuthorizerKeygen(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("authorizer keygen", "--out FILE")
	out := fs.String("out", "", "where to write the private key `FILE` (created, mode 0600)")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	if *out == "" {
		return usagef("authorizer keygen: --out FILE is required")
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	pubB64 := base64.StdEncoding.EncodeToString(pub)
	content := fmt.Sprintf("%s\n# public key: %s\n%s\n", privateKeyHeader, pubB64, base64.StdEncoding.EncodeToString(priv.Seed()))
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return usagef("authorizer keygen: %v (it never overwrites a key)", err)
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	env.print(map[string]any{"private_key_file": *out, "public_key": pubB64}, func(w io.Writer) {
		fmt.Fprintf(w, "private key written to %s\npublic key: %s\nregister it with: sendonce authorizer add --name NAME --public-key %s\n", *out, pubB64, pubB64)
	})
	return nil
}

func readPrivateKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("cannot read %s: %v", path, errors.Unwrap(err))
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		seed, err := base64.StdEncoding.DecodeString(line)
		if err != nil || len(seed) != ed25519.SeedSize {
			break
		}
		return ed25519.NewKeyFromSeed(seed), nil
	}
	return nil, usagef("%s is not a sendonce authorizer private key ('authorizer keygen' makes one)", path)
}

func cmdAuthorizerSign(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("authorizer sign", "--key KEY --revision N --name NAME --private-key FILE [--expires DUR] --out FILE")
	keyFlag := fs.String("key", "", "the consumed intent's `KEY`")
	revision := fs.Int("revision", 0, "the revision this opens: the intent's current revision + 1 ('sendonce status' shows it)")
	name := fs.String("name", "", "your authorizer `NAME`, as registered")
	privFile := fs.String("private-key", "", "your private key `FILE`")
	expires := fs.Duration("expires", time.Hour, "how long the authorization may be used")
	out := fs.String("out", "", "where to write the signed authorization `FILE`")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	if *keyFlag == "" || *name == "" || *privFile == "" || *out == "" || *revision < 1 {
		return usagef("authorizer sign: --key, --revision (1 or more), --name, --private-key and --out are required")
	}
	if *expires <= 0 {
		return usagef("authorizer sign: --expires must be positive")
	}
	k, err := gate.ParseKey(*keyFlag)
	if err != nil {
		return fmt.Errorf("--key: %w", err)
	}
	priv, err := readPrivateKey(*privFile)
	if err != nil {
		return err
	}
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return err
	}
	a := gate.Authorization{Key: k, Revision: *revision, Nonce: hex.EncodeToString(nonce[:]), ExpiresAt: time.Now().Add(*expires).Truncate(time.Second), Signer: *name}
	a.Sign(priv)
	b, err := gate.MarshalAuthorization(a)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, b, 0o600); err != nil {
		return usagef("cannot write %s: %v", *out, errors.Unwrap(err))
	}
	env.print(map[string]any{"signed": *out, "key": k.String(), "revision": a.Revision, "expires_at": formatTime(a.ExpiresAt), "nonce": a.Nonce}, func(w io.Writer) {
		fmt.Fprintf(w, "signed authorization for revision %d of %s written to %s (expires %s)\n", a.Revision, k, *out, formatTime(a.ExpiresAt))
	})
	return nil
}

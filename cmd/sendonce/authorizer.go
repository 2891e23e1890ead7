package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sendonce/sendonce"
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
	pub, err := sendonce.ParsePublicKey(*pubFlag)
	if err != nil {
		return usagef("authorizer add: %v", err)
	}
	c, err := env.open(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.AddAuthorizer(ctx, *name, pub)
	if err != nil {
		return err
	}
	env.print(res, func(w io.Writer) { fmt.Fprintf(w, "authorizer %s registered\n", res.Authorizer) })
	return nil
}

func cmdAuthorizerKeygen(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("authorizer keygen", "--out FILE")
	out := fs.String("out", "", "where to write the private key `FILE` (created, mode 0600)")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	if *out == "" {
		return usagef("authorizer keygen: --out FILE is required")
	}
	res, err := sendonce.GenerateAuthorizerKey(*out)
	if err != nil {
		return err
	}
	env.print(res, func(w io.Writer) {
		fmt.Fprintf(w, "private key written to %s\npublic key: %s\nregister it with: sendonce authorizer add --name NAME --public-key %s\n", res.PrivateKeyFile, res.PublicKey, res.PublicKey)
	})
	return nil
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
	priv, err := sendonce.ReadPrivateKey(*privFile)
	if err != nil {
		return err
	}
	res, err := sendonce.SignAuthorization(sendonce.SignRequest{Key: *keyFlag, Revision: *revision, Name: *name, PrivateKey: priv, ExpiresAt: time.Now().Add(*expires), Out: *out})
	if err != nil {
		return err
	}
	env.print(res, func(w io.Writer) {
		fmt.Fprintf(w, "signed authorization for revision %d of %s written to %s (expires %s)\n", res.Revision, res.Key, res.Signed, res.ExpiresAt)
	})
	return nil
}

package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"strings"
	"time"

	"github.com/sendonce/sendonce"
)

// Who may open a redelivery: the first authorizer is named at init by public key; every
// later change is a statement signed by an existing authorizer, made on that person's
// own machine ('authorizer keygen', 'authorizer statement', 'authorizer sign' never
// touch a store) and applied here.

func cmdAuthorizerAdd(ctx context.Context, env *environment, args []string) error {
	return env.applyStatement(ctx, "authorizer add", args)
}

func cmdAuthorizerRevoke(ctx context.Context, env *environment, args []string) error {
	return env.applyStatement(ctx, "authorizer revoke", args)
}

func (env *environment) applyStatement(ctx context.Context, name string, args []string) error {
	fs := env.flags(name, "--signed FILE")
	signed := fs.String("signed", "", "the statement `FILE` an existing authorizer signed ('authorizer statement' makes one)")
	bare := fs.String("public-key", "", "refused: a bare key is not enough (see --signed)")
	fs.String("name", "", "refused: a bare name is not enough (see --signed)")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	if *signed == "" || *bare != "" {
		return usagef("%s: only a statement signed by an existing authorizer adds or revokes one: give --signed FILE ('sendonce authorizer statement' on that person's machine makes it; the first authorizer is named by 'sendonce init --authorizer NAME=PUBLIC_KEY')", name)
	}
	b, err := os.ReadFile(*signed)
	if err != nil {
		return usagef("cannot read %s: %v", *signed, errors.Unwrap(err))
	}
	c, err := env.open(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.ApplyStatement(ctx, b, strings.TrimPrefix(name, "authorizer "))
	if err != nil {
		return err
	}
	env.print(res)
	return nil
}

func cmdAuthorizerKeygen(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("authorizer keygen", "--out FILE")
	out := fs.String("out", "", "where to write the private key `FILE` (created, mode 0600)")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	if *out == "" {
		return usagef("authorizer keygen: --out FILE is required")
	}
	res, err := sendonce.GenerateAuthorizerKey(*out)
	if err != nil {
		return err
	}
	env.print(res)
	return nil
}

// signerFlags are the flags of the commands a person signs with.
type signerFlags struct {
	storeID, name, privFile, out string
	expires                      time.Duration
}

func (f *signerFlags) register(fs interface {
	StringVar(*string, string, string, string)
	DurationVar(*time.Duration, string, time.Duration, string)
}) {
	fs.StringVar(&f.storeID, "store-id", "", "the store `ID` it is for ('sendonce init' prints it)")
	fs.StringVar(&f.name, "name", "", "your authorizer `NAME`, as registered")
	fs.StringVar(&f.privFile, "private-key", "", "your private key `FILE`")
	fs.DurationVar(&f.expires, "expires", time.Hour, "how long it may be used")
	fs.StringVar(&f.out, "out", "", "where to write the signed `FILE`")
}

// key checks the flags and reads the signer's private key.
func (f *signerFlags) key(cmd string) (ed25519.PrivateKey, error) {
	if f.storeID == "" || f.name == "" || f.privFile == "" || f.out == "" {
		return nil, usagef("%s: --store-id, --name, --private-key and --out are required", cmd)
	}
	if f.expires <= 0 {
		return nil, usagef("%s: --expires must be positive", cmd)
	}
	return sendonce.ReadPrivateKey(f.privFile)
}

func cmdAuthorizerSign(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("authorizer sign", "--store-id ID --key KEY --revision N --name NAME --private-key FILE [--expires DUR] --out FILE")
	var sf signerFlags
	sf.register(fs)
	keyFlag := fs.String("key", "", "the consumed intent's `KEY`")
	revision := fs.Int("revision", 0, "the revision this opens: the intent's current revision + 1 ('sendonce status' shows it)")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	if *keyFlag == "" || *revision < 1 {
		return usagef("authorizer sign: --key and --revision (1 or more) are required")
	}
	priv, err := sf.key("authorizer sign")
	if err != nil {
		return err
	}
	res, err := sendonce.SignAuthorization(sendonce.SignRequest{StoreID: sf.storeID, Key: *keyFlag, Revision: *revision, Name: sf.name, PrivateKey: priv, ExpiresAt: time.Now().Add(sf.expires), Out: sf.out})
	if err != nil {
		return err
	}
	env.print(res)
	return nil
}

func cmdAuthorizerStatement(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("authorizer statement", "--store-id ID --action add|revoke --for NAME [--public-key BASE64] --name NAME --private-key FILE [--expires DUR] --out FILE")
	var sf signerFlags
	sf.register(fs)
	action := fs.String("action", "", "add or revoke")
	target := fs.String("for", "", "the authorizer `NAME` to add or revoke")
	pubFlag := fs.String("public-key", "", "with add: the new authorizer's ed25519 public key, base64")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	req := sendonce.StatementRequest{StoreID: sf.storeID, Action: *action, Name: *target, Signer: sf.name, ExpiresAt: time.Now().Add(sf.expires), Out: sf.out}
	switch {
	case *target == "":
		return usagef("authorizer statement: --for NAME is required")
	case *action == "add" && *pubFlag == "":
		return usagef("authorizer statement: --action add needs --public-key")
	case *action == "add":
		pub, err := sendonce.ParsePublicKey(*pubFlag)
		if err != nil {
			return usagef("authorizer statement: %v", err)
		}
		req.PublicKey = pub
	case *action != "revoke":
		return usagef("authorizer statement: --action must be add or revoke")
	}
	priv, err := sf.key("authorizer statement")
	if err != nil {
		return err
	}
	req.PrivateKey = priv
	res, err := sendonce.SignStatement(req)
	if err != nil {
		return err
	}
	env.print(res)
	return nil
}

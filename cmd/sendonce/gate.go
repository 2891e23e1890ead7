package main

import (
	"context"
	"errors"
	"os"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/gate"
)

// destination is how a command names an intent: --to and/or --dest-id, plus the bytes.
type destination struct {
	to, destID, file, sha string
}

func (d *destination) register(fs interface {
	StringVar(*string, string, string, string)
}) {
	fs.StringVar(&d.to, "to", "", "the destination's exact visible `TITLE` (a weak identity)")
	fs.StringVar(&d.destID, "dest-id", "", "the destination's provider id, `NS:ID` (a strong identity), e.g. xmpp:bob@example.org")
	fs.StringVar(&d.file, "file", "", "the file to deliver; its SHA-256 is hashed from the bytes")
	fs.StringVar(&d.sha, "sha256", "", "the SHA-256 of the bytes, when the file is not at hand")
}

// request is the destination and content as the library takes them.
func (d *destination) request() (sendonce.Destination, sendonce.Content) {
	return sendonce.Destination{Title: d.to, ProviderID: d.destID}, sendonce.Content{Path: d.file, SHA256: d.sha}
}

func cmdClaim(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("gate claim", "[--to TITLE] [--dest-id NS:ID] (--file PATH | --sha256 HEX) --task ID [--lease DUR]")
	var dest destination
	dest.register(fs)
	task := fs.String("task", "", "the claiming task's `ID` (required)")
	lease := fs.Duration("lease", sendonce.DefaultLease, "how long the grant holds before another task may take over")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	if *task == "" {
		return usagef("gate claim: --task ID is required")
	}
	if *lease <= 0 {
		return usagef("gate claim: --lease must be positive")
	}
	to, content := dest.request()
	c, err := env.open(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.Claim(ctx, sendonce.ClaimRequest{Destination: to, Content: content, Task: *task, Lease: *lease})
	if res.Key == "" {
		return err
	}
	env.print(res)
	return err
}

// permitFlags are the flags that name an existing permit.
type permitFlags struct{ ref sendonce.PermitRef }

func (p *permitFlags) register(fs interface {
	StringVar(*string, string, string, string)
	Uint64Var(*uint64, string, uint64, string)
}) {
	fs.StringVar(&p.ref.Key, "key", "", "the `KEY` the claim printed")
	fs.StringVar(&p.ref.Task, "task", "", "the task `ID` the claim was granted to")
	fs.Uint64Var(&p.ref.Token, "token", 0, "the fencing `TOKEN` the claim printed")
}

func boundaryFlag(s string) (gate.Boundary, error) {
	if s == "" {
		return "", usagef("--boundary is required (open_picker, choose_file or send)")
	}
	b, err := gate.ParseBoundary(s)
	if err != nil {
		return "", err
	}
	return b, nil
}

// permitCommand runs one operation on a permit and prints its decision.
func (env *environment) permitCommand(ctx context.Context, pf permitFlags, op func(*sendonce.Client) (sendonce.Decision, error)) error {
	c, err := env.open(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	d, err := op(c)
	if d.Decision == "" {
		return err
	}
	env.print(d)
	return err
}

func cmdCheck(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("gate check", "--key KEY --task ID --token N --boundary open_picker|choose_file|send")
	var pf permitFlags
	pf.register(fs)
	boundary := fs.String("boundary", "", "the `BOUNDARY` about to be passed")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	b, err := boundaryFlag(*boundary)
	if err != nil {
		return err
	}
	return env.permitCommand(ctx, pf, func(c *sendonce.Client) (sendonce.Decision, error) { return c.Check(ctx, pf.ref, b) })
}

func cmdCross(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("gate cross", "--key KEY --task ID --token N --boundary choose_file|send [--chain-head HEX]")
	var pf permitFlags
	pf.register(fs)
	boundary := fs.String("boundary", "", "the `BOUNDARY` about to be crossed: choose_file or send")
	chainHead := fs.String("chain-head", "", "the evidence bundle's chain head at this moment")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	b, err := boundaryFlag(*boundary)
	if err != nil {
		return err
	}
	return env.permitCommand(ctx, pf, func(c *sendonce.Client) (sendonce.Decision, error) {
		d, err := c.Cross(ctx, pf.ref, b, *chainHead)
		if err == nil {
			env.killpoint("cross")
		}
		return d, err
	})
}

func cmdRenew(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("gate renew", "--key KEY --task ID --token N [--lease DUR]")
	var pf permitFlags
	pf.register(fs)
	lease := fs.Duration("lease", sendonce.DefaultLease, "the new lease, from now")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	if *lease <= 0 {
		return usagef("gate renew: --lease must be positive")
	}
	return env.permitCommand(ctx, pf, func(c *sendonce.Client) (sendonce.Decision, error) { return c.Renew(ctx, pf.ref, *lease) })
}

func cmdRecord(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("gate record", "--key KEY --task ID --token N --outcome OUTCOME [--evidence DIR] [--chain-head HEX]")
	var pf permitFlags
	pf.register(fs)
	outcome := fs.String("outcome", "", "not_sent, sent_verified, sent_rejected or send_status_unknown")
	evidence := fs.String("evidence", "", "the attempt's evidence bundle `DIR`")
	chainHead := fs.String("chain-head", "", "the bundle's chain head when the outcome was decided")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	o := gate.Outcome(*outcome) // checked by the library
	return env.permitCommand(ctx, pf, func(c *sendonce.Client) (sendonce.Decision, error) {
		return c.Record(ctx, pf.ref, sendonce.RecordRequest{Outcome: o, Evidence: *evidence, ChainHead: *chainHead})
	})
}

func cmdAuthorize(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("gate authorize", "--key KEY --reason TEXT --signed FILE")
	keyFlag := fs.String("key", "", "the consumed intent's `KEY`")
	reason := fs.String("reason", "", "why this redelivery is wanted (recorded)")
	signed := fs.String("signed", "", "the signed authorization `FILE` ('sendonce authorizer sign' makes one)")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	req := sendonce.AuthorizeRequest{Key: *keyFlag, Reason: *reason}
	if *signed != "" {
		b, err := os.ReadFile(*signed)
		if err != nil {
			return usagef("cannot read %s: %v", *signed, errors.Unwrap(err))
		}
		req.Signed = b
	}
	c, err := env.open(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.Authorize(ctx, req)
	if err != nil {
		return err
	}
	env.print(res)
	return nil
}

func cmdResolve(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("gate resolve", "--dispatch ID --provider NAME --object ID --sha256 HEX [--recipient NS:ID] [--link URL]")
	var req sendonce.ResolveRequest
	fs.StringVar(&req.DispatchID, "dispatch", "", "the unknown attempt's dispatch `ID`")
	fs.StringVar(&req.Provider, "provider", "", "the provider that holds the object, e.g. xmpp")
	fs.StringVar(&req.ObjectID, "object", "", "the provider's `ID` for the object (XMPP: the archive's stanza-id)")
	fs.StringVar(&req.SHA256, "sha256", "", "the SHA-256 of the bytes the provider holds")
	fs.StringVar(&req.Recipient, "recipient", "", "who the provider delivered it to, `NS:ID`")
	fs.StringVar(&req.Link, "link", "", "where the provider holds the bytes")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	c, err := env.open(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.Resolve(ctx, req)
	if err != nil {
		return err
	}
	env.print(res)
	return nil
}

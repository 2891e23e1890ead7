package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/gate"
)

func cmdInit(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("init", "[--store PATH] [--upgrade]")
	var req sendonce.InitRequest
	fs.BoolVar(&req.Upgrade, "upgrade", false, "migrate an existing store on an older schema (the only command that does)")
	first := fs.String("authorizer", "", "name the first authorizer, `NAME=PUBLIC_KEY` (base64; refused once the store has one)")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	if *first != "" {
		name, pubB64, ok := strings.Cut(*first, "=")
		pub, err := sendonce.ParsePublicKey(pubB64)
		if !ok || name == "" || err != nil {
			return usagef("init: --authorizer must be NAME=PUBLIC_KEY, the key as 'authorizer keygen' prints it")
		}
		req.FirstAuthorizer = &sendonce.AuthorizerKey{Name: name, PublicKey: pub}
	}
	loc, err := env.storeLocation()
	if err != nil {
		return err
	}
	res, err := sendonce.Init(ctx, loc, req, env.options())
	if err != nil {
		return err
	}
	env.print(res, func(w io.Writer) {
		switch {
		case res.UpgradeNeeded:
			fmt.Fprintf(w, "store %s has an older schema and was not changed: run 'sendonce init --upgrade' (until then every other command fails closed)\n", res.Store)
		case res.Upgraded:
			fmt.Fprintf(w, "store upgraded: %s (schema %d)\n", res.Store, res.SchemaVersion)
		default:
			fmt.Fprintf(w, "store ready: %s (schema %d, store id %s)\n", res.Store, res.SchemaVersion, res.StoreID)
		}
		if res.Authorizer != "" {
			fmt.Fprintf(w, "first authorizer: %s\n", res.Authorizer)
		}
	})
	return nil
}

func cmdStatus(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("status", "(--key KEY | [--to TITLE] [--dest-id NS:ID] (--file PATH | --sha256 HEX))")
	keyFlag := fs.String("key", "", "a `KEY` printed by a claim")
	var dest destination
	dest.register(fs)
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	req := sendonce.StatusRequest{Key: *keyFlag}
	req.Destination, req.Content = dest.request()
	return env.report(ctx, req, (*sendonce.Client).Status)
}

func cmdShow(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("show", "KEY")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	return env.report(ctx, sendonce.StatusRequest{Key: pos[0]}, (*sendonce.Client).Show)
}

func (env *environment) report(ctx context.Context, req sendonce.StatusRequest, query func(*sendonce.Client, context.Context, sendonce.StatusRequest) (sendonce.StatusResult, error)) error {
	c, err := env.open(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := query(c, ctx, req)
	if err != nil {
		return err
	}
	env.print(res, func(w io.Writer) {
		for _, in := range res.Intents {
			writeIntent(w, in)
		}
	})
	return nil
}

func writeIntent(w io.Writer, r sendonce.Intent) {
	fmt.Fprintf(w, "status: %s\n%s\n", r.Status, r.Explanation)
	if r.Intent == 0 {
		fmt.Fprintln(w, "(no intent in the store)")
	}
	for _, k := range r.Keys {
		note := ""
		if k.Strength == gate.Weak {
			note = "  WEAK: a visible title; two conversations can show the same title"
		}
		fmt.Fprintf(w, "key: %s%s\n", k.Key, note)
	}
	if r.Revision > 0 {
		fmt.Fprintf(w, "revision: %d\n", r.Revision)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, a := range r.Attempts {
		o := "no outcome"
		if a.Outcome != "" {
			o = fmt.Sprintf("%s (delivery %s, acceptance %s)", a.Outcome, a.Delivery, a.Acceptance)
		} else if a.Superseded {
			o = "superseded before any crossing"
		}
		fmt.Fprintf(w, "attempt r%d token %d task %s dispatch %s: %s\n", a.Revision, a.Token, a.Task, a.DispatchID, o)
		for _, c := range a.Crossings {
			fmt.Fprintf(w, "  crossed %s at %s\n", c.Boundary, sendonce.Time{Time: c.At})
		}
		if a.Evidence != "" {
			fmt.Fprintf(w, "  evidence: %s\n", a.Evidence)
		}
	}
	for _, e := range r.Events {
		fmt.Fprintf(w, "%5d %s %-17s", e.Seq, sendonce.Time{Time: e.At}, e.Kind)
		if e.Task != "" {
			fmt.Fprintf(w, " task=%s", e.Task)
		}
		if e.Token != 0 {
			fmt.Fprintf(w, " token=%d", e.Token)
		}
		for _, k := range slices.Sorted(maps.Keys(e.Detail)) {
			fmt.Fprintf(w, " %s=%q", k, e.Detail[k])
		}
		fmt.Fprintln(w)
	}
}

package main

import (
	"context"
	"fmt"

	"github.com/sendonce/sendonce"
)

func cmdInit(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("init", "[--store PATH] [--upgrade]")
	var req sendonce.InitRequest
	fs.BoolVar(&req.Upgrade, "upgrade", false, "migrate an existing store on an older schema (the only command that does)")
	first := fs.String("authorizer", "", "name the first authorizer, `NAME=PUBLIC_KEY` (base64; refused once the store has one)")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	if *first != "" {
		a, err := sendonce.ParseAuthorizerKey(*first)
		if err != nil {
			return fmt.Errorf("init --authorizer: %w", err)
		}
		req.FirstAuthorizer = &a
	}
	loc, err := env.storeLocation()
	if err != nil {
		return err
	}
	res, err := sendonce.Init(ctx, loc, req, env.options())
	if err != nil {
		return err
	}
	env.print(res)
	return nil
}

func cmdStatus(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("status", "(--key KEY | [--to TITLE] [--dest-id NS:ID] (--file PATH | --sha256 HEX))")
	keyFlag := fs.String("key", "", "a `KEY` printed by a claim")
	var dest destination
	dest.register(fs)
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	req := sendonce.StatusRequest{Key: *keyFlag}
	req.Destination, req.Content = dest.request()
	return env.report(ctx, req, (*sendonce.Client).Status)
}

func cmdShow(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("show", "KEY")
	pos, err := env.parse(fs, args, 1)
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
	env.print(res)
	return nil
}

package main

import (
	"context"

	"github.com/sendonce/sendonce"
)

func cmdReconcile(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("reconcile", "[--key KEY] [--provider NS] [--provider-config FILE]")
	var req sendonce.ReconcileRequest
	fs.StringVar(&req.Key, "key", "", "reconcile only this `KEY`'s unknown attempts (default: every unknown attempt)")
	fs.StringVar(&req.Namespace, "provider", "", "the provider to ask, `NS`: xmpp or matrix (default: the one --key's destination names, else the one whose account is given)")
	fs.StringVar(&req.ProviderConfig, "provider-config", "", "the provider account `FILE` (JSON; xmpp: jid, password, addr; matrix: homeserver, user, password; docs/delivering.md); or the provider's SENDONCE_XMPP_* / SENDONCE_MATRIX_* variables")
	fs.StringVar(&env.evidenceDir, "evidence-dir", "", "where deliver kept evidence bundles, for attempts that died before recording theirs (default: next to the store)")
	fs.StringVar(&req.Staging, "staging", env.getenv("SENDONCE_STAGING"), "the staging folder deliver used: snapshots of resolved attempts are removed (default as deliver's)")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	if req.Staging == "" {
		req.Staging = env.stateDir("staging")
	}
	c, err := env.open(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.Reconcile(ctx, req)
	if err != nil {
		return err
	}
	env.print(res)
	return nil
}

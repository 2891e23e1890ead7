package main

import (
	"context"
	"flag"
	"strings"

	"github.com/sendonce/sendonce"
)

// repeated is a flag given once per value.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

var _ flag.Value = (*repeated)(nil)

func cmdStoreCopy(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("store copy", "--from FILE [--from FILE ...] --to URL")
	var req sendonce.CopyRequest
	fs.Var((*repeated)(&req.From), "from", "a workstation's SQLite store `FILE` to move (again for each file)")
	fs.StringVar(&req.To, "to", "", "the shared store to move it into, a postgres:// `URL` (made with 'sendonce init --store URL')")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	opt := env.options()
	req.StateDir = env.stateDirFlag
	if req.StateDir == "" && sendonce.SharedStore(req.To) {
		req.StateDir = env.stateDir("")
	}
	res, err := sendonce.CopyStore(ctx, req, opt)
	if err != nil {
		return err // it names the sources copied before it failed
	}
	env.print(res)
	return nil
}

func cmdProfileCheck(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("profile check", "FILE")
	pos, err := env.parse(fs, args, 1)
	if err != nil {
		return err
	}
	res, err := sendonce.CheckProfile(pos[0])
	if err != nil {
		return err
	}
	env.print(res)
	return nil
}

func cmdProfileList(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("profile list", "")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	env.print(sendonce.ListProfiles(env.profiles().Dirs))
	return nil
}

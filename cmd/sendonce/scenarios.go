package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sendonce/sendonce/scenarios"
)

// cmdScenarios runs the policy suite: every scenario's steps as real processes of this
// binary against a fresh store, deliveries replayed from the recorded fixtures.
func cmdScenarios(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("scenarios run", "[--only NAME] [--testdata DIR]")
	only := fs.String("only", "", "run only the scenario with this `NAME`")
	testdata := fs.String("testdata", "testdata", "the repository's testdata `DIR` (fixtures and transcripts)")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	scs, err := scenarios.Load()
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	td, err := filepath.Abs(*testdata)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(td, "fixtures")); err != nil {
		return usagef("scenarios need the repository's testdata folder: give --testdata DIR (%v)", err)
	}
	work, err := os.MkdirTemp("", "sendonce-scenarios-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	r := scenarios.Runner{Exe: exe, Testdata: td, Env: []string{"OMP_THREAD_LIMIT=1"}}
	var results []scenarios.Result
	failed := 0
	for i, sc := range scs {
		if *only != "" && sc.Name != *only {
			continue
		}
		res := r.Run(ctx, sc, filepath.Join(work, fmt.Sprint(i)))
		if !res.Pass {
			failed++
		}
		results = append(results, res)
		env.log.Info().Str("scenario", sc.Name).Bool("pass", res.Pass).Msg("scenario")
	}
	env.print(map[string]any{"scenarios": results}, func(w io.Writer) {
		for _, r := range results {
			mark := "PASS"
			if !r.Pass {
				mark = "FAIL"
			}
			fmt.Fprintf(w, "%s  %s\n      expected: %s\n      got:      %s\n", mark, r.Name, r.Expected, r.Got)
		}
		fmt.Fprintf(w, "scenarios: %d passed, %d failed\n", len(results)-failed, failed)
	})
	if failed > 0 {
		return exitError{1, fmt.Errorf("%d scenario(s) failed", failed)}
	}
	return nil
}

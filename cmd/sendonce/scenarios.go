//go:build sendonce_testhooks

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/scenarios"
)

// This file is in test builds only (-tags sendonce_testhooks): the scenario suite and the
// history checker drive this binary's test-only surfaces (the worker command, deliver
// --replay, SENDONCE_TEST_KILL_AFTER), which a release build does not have.

// testHooks says that this build has the test-only surfaces.
const testHooks = true

func testCommands() []command {
	return []command{
		{"scenarios run", "run the policy scenario suite (replayed deliveries, real processes)", cmdScenarios},
		{"scenarios history", "run the randomized history checker (kills, pauses, restarts) and check it", cmdScenarioHistory},
		{"scenarios worker", "one executor of the history checker (used by scenarios history)", cmdScenarioWorker},
	}
}

// killpoint is a documented test hook: with SENDONCE_TEST_KILL_AFTER=NAME in the
// environment, the process kills itself with SIGKILL right after the step NAME is
// durable, the way a crash would. The crash-matrix tests use it.
//
// With SENDONCE_TEST_BARRIER_AT=NAME, SENDONCE_TEST_BARRIER_DIR=DIR and
// SENDONCE_TEST_BARRIER_N=N, the process waits at NAME until N processes have reached it
// (each leaves a file in DIR), at most a minute: a race the test makes real rather than
// hopes for, whatever the machine's load.
func (env *environment) killpoint(name string) {
	if env.getenv("SENDONCE_TEST_BARRIER_AT") == name {
		barrier(env.getenv("SENDONCE_TEST_BARRIER_DIR"), env.getenv("SENDONCE_TEST_BARRIER_N"))
	}
	if env.getenv("SENDONCE_TEST_KILL_AFTER") == name {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
	if env.getenv("SENDONCE_TEST_TERM_AFTER") == name {
		syscall.Kill(os.Getpid(), syscall.SIGTERM) // and go on: a graceful stop must let this delivery finish
	}
}

// barrier leaves this process's file in dir and waits until n files are there.
func barrier(dir, n string) {
	want, err := strconv.Atoi(n)
	if dir == "" || err != nil || want < 1 {
		return
	}
	if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(os.Getpid())), nil, 0o600); err != nil {
		return
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if es, err := os.ReadDir(dir); err == nil && len(es) >= want {
			return
		}
	}
}

// cmdScenarios runs the policy suite: every scenario's steps as real processes of this
// binary against a fresh store, deliveries replayed from the recorded fixtures.
func cmdScenarios(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("scenarios run", "[--only NAME] [--testdata DIR]")
	only := fs.String("only", "", "run only the scenario with this `NAME`")
	testdata := fs.String("testdata", "testdata", "the repository's testdata `DIR` (fixtures and transcripts)")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	td, err := filepath.Abs(*testdata)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(td, "fixtures")); err != nil {
		return usagef("scenarios need the repository's testdata folder: give --testdata DIR (%v)", err)
	}
	r := scenarios.Runner{Testdata: td, Env: []string{"OMP_THREAD_LIMIT=1"}}
	rep, err := r.RunSuite(ctx, *only, func(res scenarios.Result) {
		env.log.Info().Str("scenario", res.Name).Bool("pass", res.Pass).Msg("scenario")
	})
	if err != nil {
		return err
	}
	env.print(rep)
	if n := rep.Failed(); n > 0 {
		return exitError{1, fmt.Errorf("%d scenario(s) failed", n)}
	}
	return nil
}

// cmdScenarioWorker is one executor of the history checker (scenarios.Worker): a real
// process on the shared store, with a send that leaves a trace in a log.
func cmdScenarioWorker(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("scenarios worker", "--sends FILE [--acks FILE] --task ID --key KEY --lease DUR")
	sends := fs.String("sends", "", "the sends log `FILE`")
	acks := fs.String("acks", "", "the `FILE` to note what the store acknowledged in (none when empty)")
	task := fs.String("task", "", "the task `ID`")
	keyFlag := fs.String("key", "", "the `KEY`")
	lease := fs.Duration("lease", time.Second, "the lease")
	unsafe := fs.Bool("unsafe", false, "send without asking the gate (only to show that the checker catches duplicates)")
	workstation := fs.String("workstation", "", "the workstation `ID` the claim records")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	k, err := gate.ParseKey(*keyFlag)
	if err != nil {
		return err
	}
	path, err := env.storeLocation()
	if err != nil {
		return err
	}
	return scenarios.Worker(ctx, path, *sends, *acks, *task, *workstation, k, *lease, *unsafe)
}

// cmdScenarioHistory runs the history checker and prints its counts.
func cmdScenarioHistory(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("scenarios history", "[--rounds N] [--keys N] [--workers N] [--lease DUR] [--store URL --workstations N]")
	cfg := scenarios.HistoryConfig{}
	fs.IntVar(&cfg.Rounds, "rounds", 5, "rounds, each with fresh keys")
	fs.IntVar(&cfg.Keys, "keys", 3, "keys per round")
	fs.IntVar(&cfg.Workers, "workers", 4, "worker processes per key per round")
	fs.DurationVar(&cfg.Lease, "lease", 600*time.Millisecond, "the workers' lease")
	fs.BoolVar(&cfg.Unsafe, "unsafe", false, "a control run: workers skip the gate, and the checker must report duplicates")
	fs.IntVar(&cfg.Workstations, "workstations", 0, "split the workers across this many workstation ids")
	fs.StringVar(&cfg.Store, "run-store", "", "a fresh empty store to run on (a PostgreSQL database's `URL`; a SQLite file in a temporary folder when empty)")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	rep, err := scenarios.RunHistory(ctx, cfg, "")
	if err != nil {
		return err
	}
	env.print(rep)
	if len(rep.Violations) > 0 {
		return exitError{1, fmt.Errorf("%d violation(s)", len(rep.Violations))}
	}
	return nil
}

// testClock shifts this process's wall clock by SENDONCE_TEST_CLOCK_SHIFT (e.g. -10m),
// as a workstation whose clock is wrong; SENDONCE_TEST_LEASES_ON_CLOCK=1 makes a shared
// store measure leases by it too (the clock-skew test's control).
func (env *environment) testClock(o *sendonce.Options) {
	if d, err := time.ParseDuration(env.getenv("SENDONCE_TEST_CLOCK_SHIFT")); err == nil && d != 0 {
		o.Clock = func() time.Time { return time.Now().Add(d) }
	}
	o.LeasesOnClock = env.getenv("SENDONCE_TEST_LEASES_ON_CLOCK") == "1"
}

//go:build cgo

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sendonce/sendonce/scenarios"
	"github.com/sendonce/sendonce/store/postgres/pgtest"
)

// TestScenarios runs the policy suite (scenarios/scenarios.json): real processes of this
// binary against fresh SQLite stores, deliveries replayed from the recorded fixtures.
func TestScenarios(t *testing.T) {
	scs, err := scenarios.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(scs) < 14 {
		t.Fatalf("%d scenarios; the suite needs at least 14", len(scs))
	}
	td, _ := filepath.Abs("../../testdata")
	// Every store kind with Gajim's fixtures, and SQLite with each other app's: the
	// policy does not depend on the app, and its fixtures show it.
	runs := []struct{ kind, app string }{{"sqlite", "psi-plus"}}
	for _, kind := range storeKinds {
		runs = append(runs, struct{ kind, app string }{kind, "gajim"})
	}
	for _, run := range runs {
		kind := run.kind
		t.Run(kind+"/"+run.app, func(t *testing.T) {
			r := scenarios.Runner{Exe: self(t), Testdata: td, App: run.app, Env: []string{"SENDONCE_AS_CLI=1", "OMP_THREAD_LIMIT=1"}}
			if run.app != gajimApp.name {
				r.Fixtures = filepath.Join(td, "fixtures", run.app)
			}
			if kind == "postgres" {
				r.Env = append(r.Env, "SENDONCE_STATE_DIR="+t.TempDir())
				r.Store = func(string) (string, error) { return newPostgresDatabase(t), nil }
				r.Corrupt = corruptPostgres
			}
			for _, sc := range scs {
				t.Run(sc.Name, func(t *testing.T) {
					res := r.Run(context.Background(), sc, t.TempDir())
					if !res.Pass {
						t.Fatalf("expected: %s\ngot: %s", res.Expected, res.Got)
					}
				})
			}
		})
	}
}

// TestScenariosCommand: 'sendonce scenarios run --json' prints the table as one object
// and exits 0 only when all pass.
func TestScenariosCommand(t *testing.T) {
	out, code := cli(t, []string{"OMP_THREAD_LIMIT=1"}, "scenarios", "run", "--only", "a prior sent_verified", "--testdata", "../../testdata", "--json")
	var v struct {
		Scenarios []struct {
			Name, Expected, Got string
			Pass                bool
		}
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 || len(v.Scenarios) != 1 || !v.Scenarios[0].Pass || v.Scenarios[0].Got == "" {
		t.Fatalf("exit %d, %q: %v", code, out, err)
	}
}

// TestHistoryChecker runs a bounded randomized history (kills, pauses past the lease,
// restarts) of real worker processes on one SQLite store and checks it: zero
// duplicate sends, no grant after consumption, no send without a crossing before it,
// every resolution backed by a send. The same checker run with workers that skip the
// gate must find duplicates: the checker can fail.
func TestHistoryChecker(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) { historyCheck(t, kind) })
	}
}

func historyCheck(t *testing.T, kind string) {
	cfg := scenarios.HistoryConfig{Exe: self(t), Env: []string{"SENDONCE_AS_CLI=1"}, Rounds: 3, Keys: 3, Workers: 4, Lease: 600 * time.Millisecond}
	fresh := func() string { return "" }
	restarted := 0
	if kind == "postgres" {
		// A cluster of its own, restarted in the middle of the second round while its
		// workers (split across two workstations) run.
		server, restart := privatePostgres(t)
		cfg.Env = append(cfg.Env, "SENDONCE_STATE_DIR="+t.TempDir(), "PGPASSFILE="+os.Getenv("PGPASSFILE"))
		cfg.Workstations = 2
		cfg.DuringRound = func(round int) {
			if round == 1 {
				time.Sleep(150 * time.Millisecond)
				restart()
				restarted++
			}
		}
		fresh = func() string { return pgtest.DatabaseOn(t, server) }
	}
	cfg.Store = fresh()
	rep, err := scenarios.RunHistory(context.Background(), cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: processes %d, kills %d, pauses %d, restarts %d, server restarts %d, sends %d, resolved %d, duplicates %d", kind, rep.Processes, rep.Kills, rep.Pauses, rep.Restarts, restarted, rep.Sends, rep.Resolved, rep.Duplicates)
	if kind == "postgres" && restarted != 1 {
		t.Fatalf("the server was restarted %d times; want once, during the run", restarted)
	}
	cfg.DuringRound = nil
	if len(rep.Violations) > 0 || rep.Duplicates > 0 {
		t.Fatalf("violations: %v", rep.Violations)
	}
	if rep.Sends == 0 || rep.Processes < cfg.Rounds*cfg.Keys*cfg.Workers {
		t.Fatalf("the run did nothing worth checking: %+v", rep)
	}
	cfg.Unsafe, cfg.Rounds, cfg.Store = true, 1, fresh()
	rep, err = scenarios.RunHistory(context.Background(), cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Duplicates == 0 {
		t.Fatalf("workers that skip the gate sent %d times with no duplicate found: the checker cannot fail", rep.Sends)
	}
}

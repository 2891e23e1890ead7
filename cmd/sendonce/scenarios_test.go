//go:build cgo

package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	mathrand "math/rand/v2"
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
			if run.app == psiApp.name {
				// Psi+'s mark of our side is one a peer can produce (it renders a
				// contact's coloured text), so its screen confirms nothing and its
				// recorded deliveries replay as unknown. The policy suite is about the
				// gate, not the mark: it replays them as a user who turned contacts'
				// formatting off would run them, with a profile of their own that says
				// the mark is the app's alone.
				r.Env = append(r.Env, "XDG_CONFIG_HOME="+appOnlyProfile(t, run.app))
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
// restarts) of real worker processes on one store and checks it: zero duplicate sends,
// no grant after consumption, no send without a crossing before it, every resolution
// backed by a send. On PostgreSQL the workers reach the server through a TCP proxy,
// and each round brings a fault of the server's side on top: backends terminated at
// random (pg_terminate_backend), the server restarted, and connections cut with a
// COMMIT in flight (the proxy drops the COMMIT, or the server's answer to it). The same
// checker run with workers that skip the gate must find duplicates: the checker can
// fail.
func TestHistoryChecker(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) { historyCheck(t, kind) })
	}
}

func historyCheck(t *testing.T, kind string) {
	cfg := scenarios.HistoryConfig{Exe: self(t), Env: []string{"SENDONCE_AS_CLI=1"}, Rounds: 3, Keys: 3, Workers: 4, Lease: 600 * time.Millisecond}
	fresh := func() string { return "" }
	var faults serverFaults
	if kind == "postgres" {
		// A cluster of its own; its workers split across two workstations.
		server, restart := privatePostgres(t)
		cfg.Env = append(cfg.Env, "SENDONCE_STATE_DIR="+t.TempDir(), "PGPASSFILE="+os.Getenv("PGPASSFILE"))
		cfg.Workstations = 2
		var direct string // the round's database, not through the proxy
		var proxy *pgtest.Proxy
		cfg.DuringRound = func(round int) {
			switch round {
			case 0:
				faults.terminated = terminateBackends(t, direct, time.Second)
			case 1:
				time.Sleep(150 * time.Millisecond)
				restart()
				faults.restarts++
			case 2:
				faults.commitsCut = cutCommits(proxy, time.Second)
			}
		}
		fresh = func() string {
			direct = pgtest.DatabaseOn(t, server)
			var through string
			proxy, through = pgtest.NewProxy(t, direct)
			return through
		}
	}
	cfg.Store = fresh()
	rep, err := scenarios.RunHistory(context.Background(), cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: processes %d, kills %d, pauses %d, restarts %d, backends terminated %d, server restarts %d, COMMITs cut %d, sends %d, resolved %d, duplicates %d",
		kind, rep.Processes, rep.Kills, rep.Pauses, rep.Restarts, faults.terminated, faults.restarts, faults.commitsCut, rep.Sends, rep.Resolved, rep.Duplicates)
	if kind == "postgres" && (faults.terminated == 0 || faults.restarts != 1 || faults.commitsCut == 0) {
		t.Fatalf("server faults %+v; want backends terminated, one restart and COMMITs cut, during the run", faults)
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

// serverFaults counts what a PostgreSQL history run did to the server's side.
type serverFaults struct{ terminated, restarts, commitsCut int }

// terminateBackends ends, for d, one backend of the database at u at a time, picked at
// random among those open, every 20 to 80 ms; it returns how many it ended.
func terminateBackends(t *testing.T, u string, d time.Duration) int {
	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer db.Close()
	ended := 0
	for until := time.Now().Add(d); time.Now().Before(until); {
		time.Sleep(time.Duration(20+mathrand.IntN(60)) * time.Millisecond)
		var ok bool
		err := db.QueryRow(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() ORDER BY random() LIMIT 1`).Scan(&ok)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			t.Errorf("terminating a backend: %v", err)
			return ended
		case ok:
			ended++
		}
	}
	return ended
}

// cutCommits arms the proxy, for d, to cut the connection of the next COMMIT, dropping
// the COMMIT or (every other time) the server's answer to it; it returns how many it
// cut.
func cutCommits(p *pgtest.Proxy, d time.Duration) int {
	before := p.Hits()
	for i, until := 0, time.Now().Add(d); time.Now().Before(until); i++ {
		p.Arm([]pgtest.Fault{pgtest.DropAnswer, pgtest.DropBeforeCommit}[i%2])
		time.Sleep(time.Duration(30+mathrand.IntN(70)) * time.Millisecond)
	}
	p.Arm(pgtest.Pass)
	return p.Hits() - before
}

// appOnlyProfile writes, in a new config folder, the built-in profile of app with
// confirm.mark app_only, where `sendonce` finds a user's profiles first
// (XDG_CONFIG_HOME/sendonce/profiles/APP.json); it returns the folder.
func appOnlyProfile(t *testing.T, app string) string {
	t.Helper()
	config := t.TempDir()
	dir := filepath.Join(config, "sendonce", "profiles")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	editedProfile(t, app, filepath.Join(dir, app+".json"), func(p map[string]any) { p["confirm"].(map[string]any)["mark"] = "app_only" })
	return config
}

// editedProfile writes to path this tree's built-in profile of app with edit applied
// (a field a test needs otherwise), and returns path.
func editedProfile(t *testing.T, app, path string, edit func(map[string]any)) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "driver", "profiles", app+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	edit(p)
	if b, err = json.MarshalIndent(p, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

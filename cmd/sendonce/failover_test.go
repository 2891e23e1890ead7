//go:build unix

package main

// Failover of a fleet's store: a PostgreSQL primary with a streaming standby of the
// test's own (testbed/postgres up --standby sync|async), the primary SIGKILLed and the
// standby promoted while workers run, reached as fleets reach "the primary": a
// multi-host URL (target_session_attrs=read-write) or PgBouncer repointed after the
// promotion.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sendonce/sendonce/scenarios"
	"github.com/sendonce/sendonce/store/postgres"
)

// pairs numbers the pairs this test process starts.
var pairs atomic.Int64

// pgPair is a primary and a streaming standby of the test's own.
type pgPair struct {
	dir   string
	state map[string]string // state.env
}

func startPair(t *testing.T, mode string) *pgPair {
	t.Helper()
	if os.Getenv("PGPASSFILE") == "" {
		t.Fatal("no PGPASSFILE: start the shared test cluster first (scripts/test does)")
	}
	main := filepath.Dir(os.Getenv("PGPASSFILE"))
	// A short folder name: the server's socket path must stay under 108 bytes.
	p := &pgPair{dir: filepath.Join(filepath.Dir(main), fmt.Sprintf(".pgpair-%d-%d", os.Getpid(), pairs.Add(1))), state: map[string]string{}}
	t.Cleanup(func() { p.script(nil, "down") })
	for _, line := range strings.Split(string(p.script(t, "up", "--standby", mode)), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			p.state[k] = v
		}
	}
	if p.state["SENDONCE_TEST_POSTGRES_PAIR"] == "" || p.state["PG_STANDBY"] != mode {
		t.Fatalf("testbed/postgres up --standby %s printed no pair: %v", mode, p.state)
	}
	t.Setenv("PGPASSFILE", p.state["PGPASSFILE"])
	return p
}

// script runs testbed/postgres on the pair; a nil t ignores its failure.
func (p *pgPair) script(t *testing.T, args ...string) []byte {
	cmd := exec.Command("../../testbed/postgres", args...)
	cmd.Env = append(os.Environ(), "PG_DIR="+p.dir)
	out, err := cmd.CombinedOutput()
	if err != nil && t != nil {
		t.Fatalf("testbed/postgres %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (p *pgPair) primary() string   { return p.state["SENDONCE_TEST_POSTGRES"] }
func (p *pgPair) multiHost() string { return p.state["SENDONCE_TEST_POSTGRES_PAIR"] }
func (p *pgPair) bouncer() string   { return p.state["SENDONCE_TEST_PGBOUNCER"] }
func (p *pgPair) standby() string {
	return "postgres://sendonce@127.0.0.1:" + p.state["STANDBY_PORT"] + "/postgres?sslmode=disable"
}

// failover does what a failover manager does once the primary is gone: promote the
// standby and, for PgBouncer, point it there.
func (p *pgPair) failover(t *testing.T) {
	p.script(t, "promote")
	p.script(t, "repoint")
}

// stallStandby stops the standby's WAL receiver (SIGSTOP): the primary's WAL stops
// reaching it. It returns the receiver's pid; killing it later (SIGKILL) drops what it
// had not written yet.
func (p *pgPair) stallStandby(t *testing.T) int {
	t.Helper()
	var pid int
	if err := query(t, p.standby(), "SELECT pid FROM pg_stat_wal_receiver", &pid); err != nil || pid == 0 {
		t.Fatalf("the standby's WAL receiver: %d, %v", pid, err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) }) // never left stopped
	return pid
}

// caughtUp waits until the standby has replayed everything the primary wrote.
func (p *pgPair) caughtUp(t *testing.T) {
	t.Helper()
	var lsn string
	if err := query(t, p.primary(), "SELECT pg_current_wal_lsn()::text", &lsn); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var done bool
		if err := query(t, p.standby(), "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", &done, lsn); err != nil {
			t.Fatal(err)
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby did not replay up to %s within 30s", lsn)
		}
	}
}

func query(t *testing.T, u, q string, into any, args ...any) error {
	t.Helper()
	db, err := sql.Open("pgx", u)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return db.QueryRowContext(ctx, q, args...).Scan(into)
}

// waitCount polls the primary, on one connection, until q counts at least n; a count
// that never gets there within a minute fails the test (the fault would land on an idle
// server and show nothing).
func waitCount(t *testing.T, u, q string, n int) int {
	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var got int
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if err := db.QueryRow(q).Scan(&got); err == nil && got >= n {
			return got
		}
	}
	t.Errorf("%q counted %d, not %d, within a minute: the fault did not land where it was meant to", q, got, n)
	return got
}

// TestFailoverSynchronous: the history checker's workers (32 processes a round:
// claims, crossings, records, leases renewed; some killed, paused or restarted) run
// on a primary whose synchronous standby is promoted after the primary is SIGKILLed,
// during claims, during crossings, and with COMMITs in flight (waiting for the
// standby); three runs of each, the third through PgBouncer. Then: no key sent twice,
// no grant after a crossing, every claim, crossing and record the store acknowledged
// present on the promoted standby, every send preceded by a crossing it holds, and
// what was in flight settled by the store's rules (an unknown only by the sends log).
func TestFailoverSynchronous(t *testing.T) {
	faults := []struct {
		name  string
		fault func(t *testing.T, p *pgPair) string
	}{
		{"during claims", func(t *testing.T, p *pgPair) string {
			n := waitCount(t, p.primary(), "SELECT count(*) FROM sendonce.events WHERE kind = 'claim_granted'", 4)
			p.script(t, "kill-primary")
			return fmt.Sprintf("killed after %d claims", n)
		}},
		{"during crossings", func(t *testing.T, p *pgPair) string {
			n := waitCount(t, p.primary(), "SELECT count(*) FROM sendonce.events WHERE kind = 'crossed'", 3)
			p.script(t, "kill-primary")
			return fmt.Sprintf("killed after %d crossings", n)
		}},
		{"during a COMMIT", func(t *testing.T, p *pgPair) string {
			waitCount(t, p.primary(), "SELECT count(*) FROM sendonce.events WHERE kind = 'claim_granted'", 2)
			receiver := p.stallStandby(t)
			n := waitCount(t, p.primary(), "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'", 2)
			p.script(t, "kill-primary")
			syscall.Kill(receiver, syscall.SIGKILL)
			if n == 0 {
				t.Errorf("no COMMIT was waiting for the standby when the primary was killed")
			}
			return fmt.Sprintf("killed with %d COMMITs waiting for the standby", n)
		}},
	}
	for _, f := range faults {
		for run := 1; run <= 3; run++ {
			viaBouncer := run == 3
			name := fmt.Sprintf("%s/run %d", f.name, run)
			if viaBouncer {
				name += " through PgBouncer"
			}
			t.Run(name, func(t *testing.T) {
				p := startPair(t, "sync")
				loc := p.multiHost()
				if viaBouncer {
					loc = p.bouncer()
				}
				cfg := scenarios.HistoryConfig{Exe: self(t), Env: []string{"SENDONCE_AS_CLI=1", "SENDONCE_STATE_DIR=" + t.TempDir(), "PGPASSFILE=" + p.state["PGPASSFILE"]},
					Rounds: 2, Keys: 4, Workers: 8, Lease: 2 * time.Second, Workstations: 2, Acks: true, Store: loc}
				var said string
				cfg.DuringRound = func(round int) {
					if round == 0 {
						said = f.fault(t, p)
						p.failover(t)
					}
				}
				rep, err := scenarios.RunHistory(context.Background(), cfg, t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: processes %d (kills %d, pauses %d, restarts %d), acknowledged %d, lost %d, sends %d, resolved %d, duplicates %d",
					said, rep.Processes, rep.Kills, rep.Pauses, rep.Restarts, rep.Acknowledged, rep.Lost, rep.Sends, rep.Resolved, rep.Duplicates)
				if len(rep.Violations) > 0 || rep.Duplicates > 0 || rep.Lost > 0 {
					t.Fatalf("violations: %v", rep.Violations)
				}
				if rep.Sends == 0 || rep.Acknowledged == 0 {
					t.Fatalf("the run did nothing worth checking: %+v", rep)
				}
				var inRecovery bool
				if err := query(t, p.standby(), "SELECT pg_is_in_recovery()", &inRecovery); err != nil || inRecovery {
					t.Fatalf("the standby was not promoted: %v %v", inRecovery, err)
				}
			})
		}
	}
}

// failoverCLI runs sendonce as one workstation (its own state folder), and returns its
// stdout and stderr together and its exit code.
func failoverCLI(t *testing.T, stateDir string, args ...string) (string, int) {
	t.Helper()
	out, errOut, code := failoverRun(t, stateDir, args...)
	return out + errOut, code
}

// failoverRun is failoverCLI with stdout and stderr apart.
func failoverRun(t *testing.T, stateDir string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(self(t), args...)
	cmd.Env = append(os.Environ(), "SENDONCE_AS_CLI=1", "SENDONCE_STATE_DIR="+stateDir)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running sendonce %v: %v", args, err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// failoverLease is the lease of the asynchronous test's claims.
const failoverLease = 15 * time.Second

// failoverClaim is a claim's grant, as the CLI prints it, turned into the flags a
// permit's commands take.
func failoverClaim(t *testing.T, stateDir, loc, content, task string) ([]string, int, string) {
	t.Helper()
	out, _, code := failoverRun(t, stateDir, "--json", "gate", "claim", "--store", loc, "--to", "Bob", "--sha256", digest(content), "--task", task, "--lease", failoverLease.String())
	if code != 0 {
		return nil, code, out
	}
	var c struct {
		Key        string `json:"key"`
		Token      uint64 `json:"token"`
		DispatchID string `json:"dispatch_id"`
	}
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("claim: %v: %s", err, out)
	}
	return []string{"--store", loc, "--key", c.Key, "--task", task, "--token", strconv.FormatUint(c.Token, 10)}, 0, c.DispatchID
}

func failoverCross(t *testing.T, stateDir string, permit []string, b string) {
	t.Helper()
	if out, code := failoverCLI(t, stateDir, append([]string{"gate", "cross", "--boundary", b}, permit...)...); code != 0 {
		t.Fatalf("cross %s: %d %s", b, code, out)
	}
}

// TestFailoverAsynchronous: a primary whose standby is asynchronous is refused at open
// (init, and every command) unless the store URL accepts the risk, and doctor says
// which it is. With the risk accepted, the standby is stalled, so that crossings the
// primary acknowledges never reach it, the primary is SIGKILLed and the standby
// promoted: the store has lost them, and another workstation is granted a key whose
// crossing was lost (the silent second grant an asynchronous standby allows). The
// workstation that was told of them finds each one missing at its next claim, raises
// the rolled-back alarm (exit 5, naming every one), and writes them back: each key stops
// at send_status_unknown, the second grant's holder is fenced before it crosses, and
// no one is granted those keys again.
func TestFailoverAsynchronous(t *testing.T) {
	p := startPair(t, "async")
	plain := p.multiHost()
	for _, args := range [][]string{{"init", "--store", plain}, {"gate", "claim", "--store", p.bouncer(), "--to", "Bob", "--sha256", digest("x"), "--task", "T"}} {
		out, code := failoverCLI(t, t.TempDir(), args...)
		if code != exitFailClosed || !strings.Contains(out, "asynchronous") || !strings.Contains(out, postgres.AcceptAsyncParam+"=accept_risk") {
			t.Fatalf("%v on an asynchronous pair: exit %d, %s; want %d naming the risk and the setting that accepts it", args[:2], code, out, exitFailClosed)
		}
	}
	if out, code := failoverCLI(t, t.TempDir(), "init", "--store", plain+"&"+postgres.AcceptAsyncParam+"=yes"); code != exitUsage {
		t.Fatalf("init with %s=yes: exit %d, %s; want %d", postgres.AcceptAsyncParam, code, out, exitUsage)
	}
	loc := plain + "&" + postgres.AcceptAsyncParam + "=accept_risk"
	a, b := t.TempDir(), t.TempDir() // two workstations
	if out, code := failoverCLI(t, a, "init", "--store", loc); code != 0 {
		t.Fatalf("init with the risk accepted: %d %s", code, out)
	}
	out, _ := failoverCLI(t, a, "--json", "doctor", "--app", "gajim", "--display", ":9999", "--store", loc)
	if !strings.Contains(out, "asynchronous: the primary acknowledges a COMMIT before any standby has it") || !strings.Contains(out, "the risk is accepted") {
		t.Fatalf("doctor does not say the store is asynchronous with the risk accepted:\n%s", out)
	}

	// Replicated: a claim and both crossings.
	safe, code, _ := failoverClaim(t, a, loc, "replicated", "A1")
	if code != 0 {
		t.Fatalf("claim: %d", code)
	}
	failoverCross(t, a, safe, "choose_file")
	failoverCross(t, a, safe, "send")
	p.caughtUp(t)

	// Acknowledged by the primary alone: a claim replicated, its crossing not; and a
	// claim and crossing both lost.
	kept, code, keptDispatch := failoverClaim(t, a, loc, "claim kept", "A2")
	if code != 0 {
		t.Fatalf("claim: %d", code)
	}
	p.caughtUp(t)
	receiver := p.stallStandby(t)
	failoverCross(t, a, kept, "send")
	gone, code, goneDispatch := failoverClaim(t, a, loc, "claim lost", "A3")
	if code != 0 {
		t.Fatalf("claim: %d", code)
	}
	failoverCross(t, a, gone, "choose_file")
	p.script(t, "kill-primary")
	syscall.Kill(receiver, syscall.SIGKILL)
	p.failover(t)

	// The store lost them: the crossing of the kept claim, the other claim altogether.
	var crossings, attempts int
	if err := query(t, p.standby(), "SELECT count(*) FROM sendonce.crossings c JOIN sendonce.attempts a ON a.token = c.token WHERE a.dispatch_id = $1", &crossings, keptDispatch); err != nil {
		t.Fatal(err)
	}
	if err := query(t, p.standby(), "SELECT count(*) FROM sendonce.attempts WHERE dispatch_id = $1", &attempts, goneDispatch); err != nil {
		t.Fatal(err)
	}
	if crossings != 0 || attempts != 0 {
		t.Fatalf("the promoted standby holds %d crossings of the kept claim and %d attempts of the lost one: the stall did not lose them, and the test shows nothing", crossings, attempts)
	}

	// A asks again for the crossing the store lost: the store gives it (it has
	// forgotten), and A's journal, which holds the first, gives no pass.
	if out, code := failoverCLI(t, a, append([]string{"gate", "cross", "--boundary", "send"}, kept...)...); code != exitFailClosed || !strings.Contains(out, "journal") {
		t.Fatalf("A's second cross of send after the store lost the first: exit %d, %s; want %d, no pass by its journal", code, out, exitFailClosed)
	}

	// Another workstation: the lost key reads free, and is granted.
	second, code, _ := failoverClaim(t, b, loc, "claim lost", "B1")
	if code != 0 {
		t.Fatalf("workstation B's claim of the lost key: %d; the store lost it and should grant it (what the alarm is for)", code)
	}

	// Workstation A's next claim: the alarm.
	out, code = failoverCLI(t, a, "gate", "claim", "--store", loc, "--to", "Bob", "--sha256", digest("after"), "--task", "A4")
	if code != exitFailClosed || !strings.Contains(out, "rolled back") || !strings.Contains(out, goneDispatch) || !strings.Contains(out, "fencing token") {
		t.Fatalf("A's claim after the failover: exit %d, %s; want %d, the rolled-back alarm naming %s and the holder it fenced (the kept claim's crossing is back already: A crossed it again)", code, out, exitFailClosed, goneDispatch)
	}
	t.Logf("the alarm: %s", out)
	if out, code := failoverCLI(t, b, append([]string{"gate", "cross", "--boundary", "send"}, second...)...); code != exitStale || !strings.Contains(out, "not the latest permit") {
		t.Fatalf("B's cross of send on a key whose lost crossing was written back: exit %d, %s; want %d, fenced (its lease is still live)", code, out, exitStale)
	}
	time.Sleep(failoverLease) // the kept claim's lease ends: its key reads as what it is
	for _, content := range []string{"claim kept", "claim lost"} {
		out, _ := failoverCLI(t, b, "--json", "status", "--store", loc, "--to", "Bob", "--sha256", digest(content))
		if !strings.Contains(out, "send_status_unknown") {
			t.Fatalf("status of %q after the alarm: %s; want send_status_unknown", content, out)
		}
		if _, code, _ := failoverClaim(t, b, loc, content, "B2"); code == 0 {
			t.Fatalf("%q was granted again after its lost crossing was written back", content)
		}
	}
	// The alarm is raised once: A's next claim goes on.
	if _, code, _ := failoverClaim(t, a, loc, "after", "A5"); code != 0 {
		t.Fatalf("A's claim after the write-back: %d", code)
	}
}

//go:build cgo

package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sendonce/sendonce/gate"
)

// Crash, pause and race tests against the real test bed (see live_test.go: how the test
// bed is found or started, the liveRun world, counting uploads by SHA-256, and what a
// failure keeps). Deliveries are real processes of this test binary; a crash is the
// documented test hook SENDONCE_TEST_KILL_AFTER, a pause is SIGSTOP. After every case the
// server (the upload folder) must hold at most one copy of the file, and the store must
// say no more than that evidence supports. They run one after another, like every live
// test: they share one Gajim.

// crashPoint is one place deliver can die, and what the store must say about it.
type crashPoint struct {
	name string
	// crossed: the killed attempt crossed a boundary first, so the key is consumed and
	// a rerun is refused (3) without touching anything; else the key is free again once
	// the lease expires, and a rerun delivers.
	crossed bool
	// pressed: send was pressed before the kill; Gajim uploads by itself, so the server
	// may hold the copy although deliver never saw it.
	pressed bool
	// settled are the statuses the store may show once the killed attempt's lease is over.
	settled []string
}

var crashPoints = []crashPoint{
	{name: "claim", settled: []string{"free"}},
	{name: "picker_opened", settled: []string{"free"}},
	{name: "file_chosen", crossed: true, settled: []string{"send_status_unknown"}},
	{name: "send_pressed", crossed: true, pressed: true, settled: []string{"send_status_unknown"}},
	{name: "looking", crossed: true, pressed: true, settled: []string{"send_status_unknown"}},
	// Killed after the outcome is recorded: whatever it recorded stands (sent_verified
	// when it saw the sent item, send_status_unknown when it did not).
	{name: "recorded", crossed: true, pressed: true, settled: []string{"sent_verified", "send_status_unknown"}},
}

// crashLease is the lease the killed deliveries take, so the test waits seconds for it
// to run out, not the default five minutes.
const crashLease = "3s"

// procResult is how one sendonce process ended.
type procResult struct {
	stdout, stderr string
	code           int            // the exit code; -1 when a signal ended it
	signal         syscall.Signal // the signal that ended it; 0 when it exited
	took           time.Duration
}

func (r procResult) String() string {
	how := fmt.Sprintf("exit %d", r.code)
	if r.signal != 0 {
		how = fmt.Sprintf("killed by signal %d (%v)", int(r.signal), r.signal)
	}
	return fmt.Sprintf("%s after %v\nstdout: %s\nstderr (end):\n%s", how, r.took.Round(time.Millisecond),
		strings.TrimSpace(r.stdout), tail(r.stderr, 15))
}

// sendonceProc is one running sendonce process (this test binary as the CLI). Unlike cli
// it says whether a signal ended the process, keeps stderr, and can run in the
// background while the test signals it.
type sendonceProc struct {
	cmd       *exec.Cmd
	out, errb bytes.Buffer
	start     time.Time
	done      chan struct{}
	res       procResult
}

// startSendonce starts sendonce with liveEnv and extraEnv on top of the test's
// environment. The process is killed (SIGCONT, then SIGKILL) if it is still running when
// the test ends.
func startSendonce(t *testing.T, extraEnv []string, args ...string) *sendonceProc {
	t.Helper()
	p := &sendonceProc{done: make(chan struct{})}
	p.cmd = exec.Command(self(t), args...)
	p.cmd.Env = append(append(append(os.Environ(), "SENDONCE_AS_CLI=1"), liveEnv...), extraEnv...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.errb
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting sendonce %v: %v", args, err)
	}
	go func() {
		defer close(p.done)
		err := p.cmd.Wait()
		p.res.took = time.Since(p.start)
		p.res.stdout, p.res.stderr = p.out.String(), p.errb.String()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			p.res.code, p.res.stderr = -1, p.res.stderr+"\nwaiting: "+err.Error()
			return
		}
		p.res.code = p.cmd.ProcessState.ExitCode()
		if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.res.signal = ws.Signal()
		}
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			syscall.Kill(p.cmd.Process.Pid, syscall.SIGCONT)
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// exited says whether the process has ended.
func (p *sendonceProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the process to end, at most timeout (then it fails the test).
func (p *sendonceProc) wait(t *testing.T, timeout time.Duration) procResult {
	t.Helper()
	select {
	case <-p.done:
		return p.res
	case <-time.After(timeout):
		t.Fatalf("sendonce %v still runs after %v; stderr so far:\n%s", p.cmd.Args[1:], timeout, tail(p.errb.String(), 20))
		return procResult{}
	}
}

// runSendonce runs sendonce to its end (at most timeout).
func runSendonce(t *testing.T, timeout time.Duration, extraEnv []string, args ...string) procResult {
	t.Helper()
	return startSendonce(t, extraEnv, args...).wait(t, timeout)
}

// crashSizes are the file sizes the tests of this file used: each file gets a size of
// its own, so that a card of an earlier file cannot pass for a new one on the screen.
var crashSizes = struct {
	sync.Mutex
	seen map[int64]bool
}{seen: map[int64]bool{}}

// distinctFile is l.file with a size no earlier file of this test binary's crash tests had.
func (l *liveRun) distinctFile(name string) (path, sum string) {
	l.t.Helper()
	crashSizes.Lock()
	defer crashSizes.Unlock()
	for {
		path, sum = l.file(name)
		fi, err := os.Stat(path)
		if err != nil {
			l.t.Fatal(err)
		}
		if !crashSizes.seen[fi.Size()] {
			crashSizes.seen[fi.Size()] = true
			return path, sum
		}
		delete(l.files, sum)         // overwritten: never sent
		time.Sleep(time.Millisecond) // l.file takes its size from the clock
	}
}

// deliveryKey is the first key deliver claims for file sent to xmpp:bob@localhost (the
// provider id's key, as deliverArgs gives --dest-id): a killed deliver prints nothing.
func deliveryKey(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	id, err := gate.ProviderID("xmpp:bob@localhost")
	if err != nil {
		t.Fatal(err)
	}
	return gate.NewKey(id, gate.DigestOf(b)).String()
}

// collectBundles notes every bundle in the store's evidence folder (deliver's default),
// so that a failure keeps those of killed processes, which printed nothing.
func (l *liveRun) collectBundles() {
	dirs, _ := filepath.Glob(filepath.Join(filepath.Dir(l.store), "evidence", "*"))
	for _, d := range dirs {
		known := false
		for _, b := range l.bundles {
			known = known || b == d
		}
		if !known {
			l.bundles = append(l.bundles, d)
		}
	}
}

// statusOf is the key's status word.
func (l *liveRun) statusOf(key string) string {
	l.t.Helper()
	s, _ := l.status(key)["status"].(string)
	return s
}

// waitStatus polls the key's status until ok accepts it or timeout passes, and returns
// the last status object.
func (l *liveRun) waitStatus(key string, timeout time.Duration, ok func(string) bool) map[string]any {
	l.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st := l.status(key)
		if s, _ := st["status"].(string); ok(s) || time.Now().After(deadline) {
			return st
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// attemptsOf lists the attempts of every intent a status shows.
func attemptsOf(t *testing.T, st map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	intents, _ := st["intents"].([]any)
	for _, in := range intents {
		as, _ := in.(map[string]any)["attempts"].([]any)
		for _, a := range as {
			out = append(out, a.(map[string]any))
		}
	}
	return out
}

func crossingCount(a map[string]any) int {
	cs, _ := a["crossings"].([]any)
	return len(cs)
}

// providerConfig writes the account reconcile asks the server with: Alice, the sender.
func (l *liveRun) providerConfig() string {
	l.t.Helper()
	path := filepath.Join(l.dir, "provider.json")
	cfg := map[string]any{
		"jid":      l.bed.get(l.t, l.app.jidKey),
		"password": l.bed.get(l.t, l.app.passwordKey),
		"addr":     "127.0.0.1:" + l.bed.get(l.t, "C2S_PORT"),
		// The test bed is one machine: its upload service is on loopback.
		"allow_private_addresses": true,
	}
	if l.app == psiApp {
		// carol is on psi.localhost, and her upload service hands out links on
		// localhost: a host outside her domain, named as the one to download from.
		cfg["download_hosts"] = []string{"localhost"}
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		l.t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		l.t.Fatal(err)
	}
	return path
}

// reconcile runs `sendonce reconcile --key KEY --provider-config CFG --json`. available
// is false when this build has no reconcile command.
func (l *liveRun) reconcile(key string) (res procResult, available bool) {
	l.t.Helper()
	res = runSendonce(l.t, 2*time.Minute, nil, "reconcile", "--store", l.store, "--key", key, "--provider-config", l.providerConfig(), "--json")
	if res.code == exitUsage && strings.Contains(res.stdout+res.stderr, `unknown command "reconcile`) {
		return res, false
	}
	l.t.Logf("reconcile --key %s: exit %d in %v: %s", key, res.code, res.took.Round(time.Millisecond), strings.TrimSpace(res.stdout))
	l.collectBundles()
	return res, true
}

// settleUploads waits until an upload the attempt may have started has landed: until the
// file is there (at most 10 s) when send was pressed, else 2 s. It returns what is new.
func (l *liveRun) settleUploads(before map[string]string, sum string, pressed bool) map[string]string {
	l.t.Helper()
	if pressed {
		return l.waitUploads(before, sum)
	}
	time.Sleep(2 * time.Second)
	return newUploads(before, uploads(l.t, l.uploadDir()))
}

// wantEvidenceSupportsStatus checks, at the end of a case, the one rule every case obeys:
// the server holds at most one copy of the file, nothing else arrived, and the store
// says what that supports: with one copy, sent_verified once reconcile has run (without
// reconcile, unknown is honest too); with none, anything but sent_verified.
func (l *liveRun) wantEvidenceSupportsStatus(before map[string]string, sum, key string, reconciled bool) (copies int, status string) {
	l.t.Helper()
	time.Sleep(time.Second) // an upload in flight lands within a fraction of that
	fresh := newUploads(before, uploads(l.t, l.uploadDir()))
	copies = countSHA(fresh, sum)
	if copies > 1 {
		l.t.Errorf("DUPLICATE: the server holds %d copies of %s; at most one may ever arrive (new files: %v)", copies, sum, fresh)
	}
	if len(fresh) != copies {
		l.t.Errorf("the upload folder got files other than %s: %v", sum, fresh)
	}
	status = l.statusOf(key)
	switch {
	case copies == 1 && reconciled && status != "sent_verified":
		l.t.Errorf("the server holds the exact bytes (one copy) and reconcile ran, but status is %s; want sent_verified", status)
	case copies == 1 && !reconciled && status != "sent_verified" && status != "send_status_unknown":
		l.t.Errorf("the server holds one copy, reconcile is not available, and status is %s; want send_status_unknown or sent_verified", status)
	case copies == 0 && status == "sent_verified":
		l.t.Errorf("status is sent_verified but the server holds no copy of %s", sum)
	}
	return copies, status
}

// TestCrashMatrix kills deliver (SIGKILL, through SENDONCE_TEST_KILL_AFTER) right after
// each of its steps, with a fresh store and a fresh file each time, lets the lease run
// out, runs the same delivery again, reconciles with the server, and checks that the
// server never holds two copies and that the store says what the server supports.
func TestCrashMatrix(t *testing.T) { crashMatrix(t, gajimApp, crashPoints) }

// crashMatrix runs the crash cases for one app at the points given.
func crashMatrix(t *testing.T, app liveApp, points []crashPoint) {
	var reconcileMissing bool
	for _, cp := range points {
		t.Run(cp.name, func(t *testing.T) {
			// A moment for Gajim to settle after the previous case; whatever that case left
			// on screen (a chooser, a send page) the next deliver dismisses itself.
			time.Sleep(time.Second)
			caseStart := time.Now()
			l := newLiveWith(t, app)
			file, sum := l.distinctFile("crash-" + cp.name + ".txt")
			key := deliveryKey(t, file)
			before := uploads(t, l.uploadDir())

			// 1. The delivery, killed right after cp.
			killed := runSendonce(t, 4*time.Minute, []string{"SENDONCE_TEST_KILL_AFTER=" + cp.name},
				l.deliverArgs(file, "Bob", "--lease", crashLease, "--display-wait", "3m")...)
			l.collectBundles()
			t.Logf("deliver with SENDONCE_TEST_KILL_AFTER=%s: %s", cp.name, strings.SplitN(killed.String(), "\n", 2)[0])
			if killed.signal != syscall.SIGKILL {
				t.Fatalf("deliver with SENDONCE_TEST_KILL_AFTER=%s did not die by SIGKILL (signal 9): %s", cp.name, killed)
			}
			if strings.TrimSpace(killed.stdout) != "" {
				t.Errorf("the killed deliver printed %q; a process killed before printing prints nothing", killed.stdout)
			}

			// 2. Its lease runs out; the store says what the crash left.
			st := l.waitStatus(key, 20*time.Second, func(s string) bool { return s != "held" })
			settled, _ := st["status"].(string)
			t.Logf("status after the lease: %s (%v)", settled, st["explanation"])
			if !slices.Contains(cp.settled, settled) {
				t.Errorf("status after the killed attempt's lease: %s; want one of %v (%v)", settled, cp.settled, st["explanation"])
			}
			if as := attemptsOf(t, st); len(as) != 1 {
				t.Errorf("the store shows %d attempts after the kill; want 1: %v", len(as), st)
			} else if n := crossingCount(as[0]); (n > 0) != cp.crossed {
				t.Errorf("the killed attempt has %d crossing(s); a kill after %s should leave crossed=%v", n, cp.name, cp.crossed)
			}
			// A crash leaves a readable bundle (unsealed), whose chain heads the store knows.
			if cp.name != "claim" { // killed before its bundle was made
				bundle := filepath.Join(filepath.Dir(l.store), "evidence", fmt.Sprint(attemptsOf(t, st)[0]["dispatch_id"]))
				if v := runSendonce(t, time.Minute, nil, "evidence", "verify", bundle, "--store", l.store, "--json"); v.code != exitOK {
					t.Errorf("evidence verify of the killed attempt's bundle: %s", v)
				}
			}
			afterKill := l.settleUploads(before, sum, cp.pressed)
			if n := countSHA(afterKill, sum); n > 1 || (n == 1 && !cp.pressed) {
				t.Errorf("after the kill the server holds %d copies of the file (send pressed: %v): %v", n, cp.pressed, afterKill)
			} else {
				t.Logf("after the kill the server holds %d copy(ies) of the file", n)
			}

			// 3. The same delivery again.
			mid := uploads(t, l.uploadDir())
			m, code, took := l.deliver(file, "Bob", "--display-wait", "3m")
			if cp.crossed {
				if code != exitConsumed || m["outcome"] != "refused" {
					t.Errorf("the rerun after a kill at %s exited %d; want 3 refused (the first attempt crossed)\n%s", cp.name, code, describe(m))
				}
				if took > 10*time.Second {
					t.Errorf("the refused rerun took %v; a refusal is decided by the store before any desktop work", took)
				}
				time.Sleep(time.Second)
				if fresh := newUploads(mid, uploads(t, l.uploadDir())); len(fresh) != 0 {
					t.Errorf("the refused rerun was followed by new uploads: %v; want none", fresh)
				}
				if as := attemptsOf(t, l.status(key)); len(as) != 1 {
					t.Errorf("the refused rerun left %d attempts; want the killed one only", len(as))
				}
			} else {
				l.wantSentVerified(m, code)
				l.verifyBundle(m)
				if got := countSHA(l.waitUploads(mid, sum), sum); got != 1 {
					t.Errorf("the rerun said sent_verified; the server got %d new copies of the file; want 1", got)
				}
				as := attemptsOf(t, l.status(key))
				if len(as) != 2 || crossingCount(as[0]) != 0 || crossingCount(as[1]) == 0 {
					t.Errorf("want the killed attempt without crossings and the rerun's with them; the store shows: %v", as)
				}
			}

			// 4. Ask the server.
			rec, available := l.reconcile(key)
			if !available {
				reconcileMissing = true
				t.Logf("reconcile is not available in this build (%s): status is checked without it", strings.TrimSpace(rec.stderr+rec.stdout))
			}

			// 5. What the server holds, and what the store says about it.
			copies, status := l.wantEvidenceSupportsStatus(before, sum, key, available)
			if !cp.crossed && (copies != 1 || status != "sent_verified") {
				t.Errorf("kill at %s, then a rerun: %d copies, status %s; want 1 copy and sent_verified", cp.name, copies, status)
			}
			t.Logf("case %s: %d copy(ies) on the server, final status %s, %v", cp.name, copies, status, time.Since(caseStart).Round(time.Millisecond))
		})
	}
	if reconcileMissing {
		t.Log("NOTE: `sendonce reconcile` was not available: statuses were checked without it")
	}
}

// storeWritable says whether a write transaction can begin on the store within a short
// time: a process stopped inside one holds SQLite's write lock.
func storeWritable(t *testing.T, path string) bool {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	dsn := (&url.URL{Scheme: "file", Path: abs, RawQuery: url.Values{"_pragma": {"busy_timeout(300)"}}.Encode()}).String()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return false
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return false
	}
	conn.ExecContext(ctx, "ROLLBACK")
	return true
}

// stepRecords counts the records of a bundle's steps.jsonl (0 when there is none yet).
func stepRecords(bundle string) int {
	f, err := os.Open(filepath.Join(bundle, "steps.jsonl"))
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		n++
	}
	return n
}

// TestPausedWorkerIsFenced: worker A claims the key and is paused (SIGSTOP) before its
// first crossing; its lease runs out, worker B delivers the same file; A, woken up, is
// refused (stale, 6) at its next check and sends nothing: the server holds one copy.
func TestPausedWorkerIsFenced(t *testing.T) {
	start := time.Now()
	l := newLive(t)
	file, sum := l.distinctFile("paused.txt")
	key := deliveryKey(t, file)
	before := uploads(t, l.uploadDir())

	a := startSendonce(t, nil, l.deliverArgs(file, "Bob", "--task", "paused-A", "--lease", "4s", "--display-wait", "3m")...)
	pid := a.cmd.Process.Pid

	// A holds the key. It is stopped once it is at work on the desktop (its bundle has a
	// first step record): past the claim and the display lease, so not inside one of
	// their transactions, and seconds before its first crossing (after the conversation
	// is opened and its title read).
	var dispatch string
	deadline := time.Now().Add(time.Minute)
	for {
		if a.exited() {
			t.Fatalf("A ended before it could be paused: %s", a.res)
		}
		if time.Now().After(deadline) {
			t.Fatalf("A did not claim the key and start on the desktop within a minute; status: %v", l.status(key))
		}
		st := l.status(key)
		if st["status"] == "held" {
			if as := attemptsOf(t, st); len(as) == 1 {
				dispatch, _ = as[0]["dispatch_id"].(string)
				if stepRecords(filepath.Join(filepath.Dir(l.store), "evidence", dispatch)) > 0 {
					break
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopped := false
	for try := 0; try < 20; try++ {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("SIGSTOP A (pid %d): %v", pid, err)
		}
		time.Sleep(50 * time.Millisecond)
		if storeWritable(t, l.store) {
			stopped = true
			break
		}
		// Stopped inside a transaction (a lease renewal): let it finish, stop again.
		syscall.Kill(pid, syscall.SIGCONT)
		time.Sleep(30 * time.Millisecond)
	}
	if !stopped {
		t.Fatal("A could not be stopped outside a store transaction in 20 tries")
	}
	pausedAt := time.Now()
	l.collectBundles()
	st := l.status(key)
	as := attemptsOf(t, st)
	if st["status"] != "held" || len(as) != 1 {
		t.Fatalf("A is paused but the store does not show it holding the key: %v", st)
	}
	if n := crossingCount(as[0]); n != 0 {
		t.Fatalf("A crossed %d boundary(ies) before it could be paused: this test needs it paused before its first crossing, and cannot show fencing (status: %v)", n, st)
	}
	t.Logf("A (pid %d, dispatch %s) paused %v after it started, holding the key with no crossing (%d step records)",
		pid, dispatch, pausedAt.Sub(a.start).Round(time.Millisecond), stepRecords(filepath.Join(filepath.Dir(l.store), "evidence", dispatch)))

	// Its lease runs out.
	st = l.waitStatus(key, 30*time.Second, func(s string) bool { return s != "held" })
	if st["status"] != "free" {
		t.Fatalf("after A's 4s lease, status is %v; want free (A never crossed): %v", st["status"], st["explanation"])
	}
	t.Logf("A's lease ran out %v after the pause", time.Since(pausedAt).Round(time.Millisecond))

	// B delivers the same file.
	m, code, took := l.deliver(file, "Bob", "--task", "paused-B", "--display-wait", "3m")
	l.wantSentVerified(m, code)
	l.verifyBundle(m)
	t.Logf("B delivered in %v", took.Round(time.Millisecond))

	// A wakes up: refused at its next check, sends nothing.
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT A: %v", err)
	}
	res := a.wait(t, 3*time.Minute)
	l.collectBundles()
	am := map[string]any{}
	json.Unmarshal([]byte(res.stdout), &am)
	t.Logf("A after SIGCONT: %s", strings.SplitN(res.String(), "\n", 2)[0])
	if res.code != exitStale {
		t.Errorf("A, woken after B delivered, %s\nwant exit 6 (stale: its token is fenced)\n%s", res, describe(am))
	}
	if am["outcome"] == "sent_verified" {
		t.Errorf("A, which was fenced, printed sent_verified")
	}

	l.wantExactlyOneCopyEach(before, sum)
	st = l.status(key)
	if st["status"] != "sent_verified" {
		t.Errorf("status after both: %v; want sent_verified (B's)", st["status"])
	}
	for _, at := range attemptsOf(t, st) {
		switch at["task"] {
		case "paused-A":
			if n := crossingCount(at); n != 0 {
				t.Errorf("A's attempt has %d crossing(s) after it was fenced; want none: %v", n, at)
			}
		case "paused-B":
			if at["outcome"] != "sent_verified" {
				t.Errorf("B's attempt: %v; want sent_verified", at)
			}
		}
	}
	t.Logf("TestPausedWorkerIsFenced took %v", time.Since(start).Round(time.Millisecond))
}

// TestSameKeyManyProcesses: four deliveries of the same file to the same destination
// started at once: exactly one delivers (0, sent_verified), the others are refused as
// held (4) or consumed (3), and the server holds exactly one copy.
func TestSameKeyManyProcesses(t *testing.T) {
	const procs = 4
	l := newLive(t)
	file, sum := l.distinctFile("same-key.txt")
	key := deliveryKey(t, file)
	before := uploads(t, l.uploadDir())

	ps := make([]*sendonceProc, procs)
	for i := range ps {
		ps[i] = startSendonce(t, nil, l.deliverArgs(file, "Bob", "--task", fmt.Sprintf("same-key-%d", i), "--display-wait", "3m")...)
	}
	var winner map[string]any
	delivered, refused := 0, 0
	for i, p := range ps {
		res := p.wait(t, 5*time.Minute)
		m := map[string]any{}
		if err := json.Unmarshal([]byte(res.stdout), &m); err != nil {
			t.Errorf("process %d printed no JSON object: %s", i, res)
			continue
		}
		l.noteBundle(m)
		t.Logf("process %d: exit %d in %v: outcome %v, gate %v", i, res.code, res.took.Round(time.Millisecond), m["outcome"], m["gate"])
		switch {
		case res.code == exitOK && m["outcome"] == "sent_verified":
			delivered++
			winner = m
		case (res.code == exitHeld || res.code == exitConsumed) && m["outcome"] == "refused":
			refused++
			if m["key"] != key {
				t.Errorf("process %d was refused for key %v; want %s", i, m["key"], key)
			}
		default:
			t.Errorf("process %d: %s\nwant 0 sent_verified, or 4/3 refused\n%s", i, res, describe(m))
		}
	}
	if delivered != 1 || refused != procs-1 {
		t.Fatalf("%d delivered and %d refused; want exactly 1 and %d", delivered, refused, procs-1)
	}
	l.verifyBundle(winner)
	l.wantExactlyOneCopyEach(before, sum)
	st := l.status(key)
	if st["status"] != "sent_verified" {
		t.Errorf("status: %v; want sent_verified", st["status"])
	}
	if as := attemptsOf(t, st); len(as) != 1 {
		t.Errorf("the store shows %d attempts; want the winner's only: %v", len(as), as)
	}
}

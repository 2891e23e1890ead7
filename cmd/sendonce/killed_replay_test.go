//go:build cgo

package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sendonce/sendonce/gate"
)

// killedReplays is how many replayed deliveries TestKilledReplaysLeaveReadableBundles
// kills.
const killedReplays = 20

// killLease is the lease the killed replays take: the test waits it out once, so that
// status and reconcile see each killed attempt as a crashed one.
const killLease = 2 * time.Second

// TestKilledReplaysLeaveReadableBundles kills deliver (SIGKILL, from outside: no test
// hook chooses the moment) at random moments in 20 replayed deliveries of the recorded
// Gajim delivery of a text file, each with a store of its own. Once their leases ran
// out: each bundle an attempt left must verify against its store (sealed, or unsealed
// and ending at a whole record whose frames are all there); an attempt that crossed a
// boundary is send_status_unknown, and reconcile reads it, asks the real provider (the
// test bed's Prosody, which never saw a replayed delivery), notes the absence and leaves
// the key consumed, unless the run had recorded its outcome (sent_verified) before the
// kill, which then stands with nothing to reconcile; one that crossed nothing is free,
// and reconcile passes it by. The
// moments come from a logged seed; SENDONCE_KILL_SEED replays them.
func TestKilledReplaysLeaveReadableBundles(t *testing.T) {
	l := newLive(t) // the test bed's Prosody answers reconcile
	fixture, err := filepath.Abs("../../testdata/fixtures/verified-text-file")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(fixture, "file", "minutes.txt")
	key := deliveryKey(t, file)
	deliverArgs := func(store string) []string {
		return []string{"deliver", "--replay", fixture, "--app", "gajim", "--to", "Bob", "--dest-id", "xmpp:bob@localhost",
			"--file", file, "--staging", filepath.Join(filepath.Dir(store), "staging"), "--store", store, "--lease", killLease.String(), "--json"}
	}

	// One replay to its end: it delivers, and says how long a whole one takes.
	whole := runSendonce(t, 3*time.Minute, liveEnv, deliverArgs(newStore(t))...)
	if m := decode(t, whole.stdout); whole.code != exitOK || m["outcome"] != "sent_verified" {
		t.Fatalf("the replay run to its end: %s", whole)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SENDONCE_KILL_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("SENDONCE_KILL_SEED: %v", err)
		}
	}
	t.Logf("a whole replay took %v; kill moments from SENDONCE_KILL_SEED=%d", whole.took.Round(time.Millisecond), seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	type killedRun struct {
		store string
		at    time.Duration
	}
	var killed []killedRun
	// The moments are drawn from the shortest whole run seen so far: the first run may
	// have paid for a cold start, and kills past a run's end test nothing.
	horizon := whole.took
	for i := 1; i <= killedReplays; i++ {
		store := newStore(t)
		at := time.Duration(rng.Int64N(int64(horizon)))
		p := startSendonce(t, liveEnv, deliverArgs(store)...)
		time.Sleep(time.Until(p.start.Add(at)))
		p.cmd.Process.Signal(syscall.SIGKILL)
		res := p.wait(t, time.Minute)
		if res.signal != syscall.SIGKILL {
			// It ended before the kill: then it delivered, as the whole run did.
			if m := decode(t, res.stdout); res.code != exitOK || m["outcome"] != "sent_verified" {
				t.Errorf("run %d ended before its kill at %v, but not sent_verified: %s", i, at, res)
			}
			t.Logf("run %d ended in %v, before its kill at %v", i, res.took.Round(time.Millisecond), at.Round(time.Millisecond))
			horizon = min(horizon, res.took)
			continue
		}
		killed = append(killed, killedRun{store, at})
	}
	time.Sleep(killLease)

	bundles, unrecorded, crossed, creating, decided := 0, 0, 0, 0, 0
	for i, k := range killed {
		what := fmt.Sprintf("run killed %v after its start (%d of %d)", k.at, i+1, len(killed))
		dirs, _ := filepath.Glob(filepath.Join(filepath.Dir(k.store), "evidence", "*"))
		for _, dir := range dirs {
			if base := filepath.Base(dir); strings.HasPrefix(base, ".") {
				if strings.Contains(base, ".creating-") {
					creating++ // killed while its bundle was being made: no bundle (evidence.Create)
				}
				continue // or while its seal was being written: its bundle is unsealed
			}
			bundles++
			v := runSendonce(t, time.Minute, nil, "evidence", "verify", dir, "--store", k.store, "--json")
			if v.code != exitOK {
				t.Errorf("%s, %d records written: evidence verify of its bundle: %s", what, stepRecords(dir), v)
				continue
			}
			if u, _ := decode(t, v.stdout)["unrecorded"].([]any); len(u) > 0 {
				unrecorded++
			}
		}
		l.store = k.store
		st := l.status(key)
		attempts := attemptsOf(t, st)
		didCross := len(attempts) == 1 && crossingCount(attempts[0]) > 0
		if didCross {
			crossed++
		}
		got, _ := st["status"].(string)
		want := gate.StatusFree
		if didCross {
			want = gate.StatusSendStatusUnknown
			if got == string(gate.StatusSentVerified) {
				// Killed after it recorded its outcome, before it exited (sealing the
				// bundle, printing): the outcome stands, and nothing is left to reconcile.
				want = gate.StatusSentVerified
				decided++
			}
		}
		if len(attempts) > 1 || got != string(want) {
			t.Errorf("%s: status %q with %d attempt(s); want %q with at most one (none when killed before its claim)", what, got, len(attempts), want)
			continue
		}
		rec, _ := l.reconcile(key)
		if rec.code != exitOK {
			t.Errorf("%s: reconcile: %s", what, rec)
			continue
		}
		var out struct {
			Reconciled []struct {
				DispatchID string `json:"dispatch_id"`
				Result     string `json:"result"`
			} `json:"reconciled"`
		}
		if err := json.Unmarshal([]byte(rec.stdout), &out); err != nil {
			t.Fatalf("%s: reconcile printed %q: %v", what, rec.stdout, err)
		}
		switch {
		case want == gate.StatusSentVerified && len(out.Reconciled) != 0:
			t.Errorf("%s: reconcile %+v; want nothing to reconcile for an attempt whose outcome was recorded", what, out.Reconciled)
		case want == gate.StatusSendStatusUnknown && (len(out.Reconciled) != 1 || out.Reconciled[0].DispatchID != attempts[0]["dispatch_id"] || out.Reconciled[0].Result != "absent"):
			t.Errorf("%s: reconcile %+v; want the crossed attempt read and its absence on the server noted", what, out.Reconciled)
		case !didCross && len(out.Reconciled) != 0:
			t.Errorf("%s: reconcile %+v; want nothing to reconcile for an attempt that crossed nothing", what, out.Reconciled)
		}
		if got := l.statusOf(key); got != string(want) {
			t.Errorf("%s: status %q after reconcile; want %q still", what, got, want)
		}
	}
	t.Logf("%d of %d runs killed before they ended, %d of them after a crossing (%d after recording sent_verified); %d bundles verified, %d with a frame ahead of its record, %d killed while their bundle was being made",
		len(killed), killedReplays, crossed, decided, bundles, unrecorded, creating)
	if len(killed) < killedReplays/2 || crossed-decided == 0 || crossed == len(killed) {
		t.Errorf("%d of %d runs killed, %d after a crossing: the kill moments do not cover a delivery", len(killed), killedReplays, crossed)
	}
}

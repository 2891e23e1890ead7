//go:build cgo

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// workstation is one of the test bed's two desktops, driven by its own sendonce with
// its own state folder (so its own workstation id).
type workstation struct {
	name, display, state, store string
}

// raceRun is one workstation's delivery in a round.
type raceRun struct {
	ws        workstation
	task      string
	cmd       *exec.Cmd
	out, errb bytes.Buffer
	code      int
	result    map[string]any
}

// race starts the same delivery on every workstation at once and waits for all.
func race(t *testing.T, l *liveRun, file string, round int, wss []workstation) []*raceRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var runs []*raceRun
	// Both processes wait, once everything is checked, until both are about to claim:
	// the race is made, not hoped for (on a loaded machine, two processes started
	// together reached the store 140 ms apart).
	gate := []string{"SENDONCE_TEST_BARRIER_AT=claiming", "SENDONCE_TEST_BARRIER_DIR=" + t.TempDir(), fmt.Sprintf("SENDONCE_TEST_BARRIER_N=%d", len(wss))}
	for _, ws := range wss {
		r := &raceRun{ws: ws, task: fmt.Sprintf("%s-round-%d", ws.name, round)}
		args := []string{"deliver", "--app", "gajim", "--to", "Bob", "--dest-id", "xmpp:bob@localhost", "--file", file,
			"--display", ws.display, "--staging", l.bed.staging(t), "--store", ws.store, "--task", r.task, "--json"}
		r.cmd = exec.CommandContext(ctx, self(t), args...)
		r.cmd.Env = append(append(append(os.Environ(), "SENDONCE_AS_CLI=1", "SENDONCE_STATE_DIR="+ws.state), liveEnv...), gate...)
		r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.errb
		runs = append(runs, r)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := r.cmd.Run(); err != nil && r.cmd.ProcessState == nil {
				t.Errorf("%s: %v", r.ws.name, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("round %d did not finish in time", round)
	}
	for _, r := range runs {
		r.code = r.cmd.ProcessState.ExitCode()
		r.result = decode(t, r.out.String())
		l.noteBundle(r.result)
		t.Logf("round %d, %s (%s): exit %d, outcome %v", round, r.ws.name, r.ws.display, r.code, r.result["outcome"])
	}
	return runs
}

// claimEvents are the times the store logged each task's claim of a key (granted or
// refused), and the workstation each named.
func claimEvents(t *testing.T, store, state, key string) map[string]time.Time {
	t.Helper()
	out, code := cli(t, []string{"SENDONCE_STATE_DIR=" + state}, "--json", "show", "--store", store, key)
	if code != 0 {
		t.Fatalf("show: %d %s", code, out)
	}
	m := decode(t, out)
	at := map[string]time.Time{}
	for _, in := range m["intents"].([]any) {
		evs, _ := in.(map[string]any)["events"].([]any)
		for _, e := range evs {
			e := e.(map[string]any)
			if k := e["kind"]; k != "claim_granted" && k != "claim_refused" {
				continue
			}
			when, err := time.Parse(time.RFC3339Nano, e["at"].(string))
			if err != nil {
				t.Fatal(err)
			}
			at[e["task"].(string)] = when
		}
	}
	return at
}

// passedOpenPicker says whether the store logged that task passing open_picker.
func passedOpenPicker(t *testing.T, store, state, key, task string) bool {
	t.Helper()
	out, _ := cli(t, []string{"SENDONCE_STATE_DIR=" + state}, "--json", "show", "--store", store, key)
	m := decode(t, out)
	for _, in := range m["intents"].([]any) {
		evs, _ := in.(map[string]any)["events"].([]any)
		for _, e := range evs {
			e := e.(map[string]any)
			d, _ := e["detail"].(map[string]any)
			if e["kind"] == "check_passed" && e["task"] == task && d["boundary"] == "open_picker" {
				return true
			}
		}
	}
	return false
}

// TestLiveTwoWorkstations: the test bed's two desktops (two displays, two Gajims logged
// in as alice, one Prosody), each driven by its own sendonce with its own workstation id,
// share one PostgreSQL store; the same delivery starts on both at once, 5 rounds. Each
// round ends with exactly one copy on the server and the other workstation refused with
// the winner named; the store's event log shows that in at least one round both claims
// reached it within 100 ms of each other (the race was real). The control gives each
// workstation its own SQLite store: a duplicate, both workstations past open_picker.
func TestLiveTwoWorkstations(t *testing.T) {
	l := newLive(t)
	shared := newStoreOf(t, "postgres")
	wss := []workstation{
		{name: "ws1", display: l.bed.display(t), state: t.TempDir(), store: shared},
		{name: "ws2", display: l.bed.get(t, "WS2_DISPLAY"), state: t.TempDir(), store: shared},
	}
	closest := time.Hour
	for round := 1; round <= 5; round++ {
		file, sum := l.file(fmt.Sprintf("fleet-%d.txt", round))
		before := uploads(t, l.uploadDir())
		runs := race(t, l, file, round, wss)
		var winner, loser *raceRun
		for _, r := range runs {
			switch {
			case r.code == exitOK && r.result["outcome"] == "sent_verified":
				winner = r
			case r.code == exitHeld || r.code == exitConsumed:
				loser = r
			}
		}
		if winner == nil || loser == nil {
			for _, r := range runs {
				t.Logf("%s: exit %d\n%s\nstderr:\n%s", r.ws.name, r.code, describe(r.result), tail(r.errb.String(), 15))
			}
			t.Fatalf("round %d: want one sent_verified and one refused", round)
		}
		if stopped, _ := loser.result["stopped"].(string); !strings.Contains(stopped, winner.task) {
			t.Errorf("round %d: the refusal %q does not name the winner %s", round, stopped, winner.task)
		}
		l.wantExactlyOneCopyEach(before, sum)
		key, _ := winner.result["key"].(string)
		at := claimEvents(t, shared, wss[0].state, key)
		a, b := at[runs[0].task], at[runs[1].task]
		if a.IsZero() || b.IsZero() {
			t.Fatalf("round %d: the store logged claims %v; want one of each task", round, at)
		}
		gap := a.Sub(b).Abs()
		closest = min(closest, gap)
		t.Logf("round %d: %s won; the two claims reached the store %v apart", round, winner.ws.name, gap)
	}
	if closest > 100*time.Millisecond {
		t.Errorf("the closest two claims reached the store %v apart; want one round within 100ms (the race was not real)", closest)
	}

	t.Run("control: a SQLite store each", func(t *testing.T) {
		own := []workstation{
			{name: "ws1", display: wss[0].display, state: t.TempDir(), store: newStore(t)},
			{name: "ws2", display: wss[1].display, state: t.TempDir(), store: newStore(t)},
		}
		file, sum := l.file("fleet-control.txt")
		before := uploads(t, l.uploadDir())
		runs := race(t, l, file, 0, own)
		fresh := l.waitUploads(before, sum)
		deadline := time.Now().Add(20 * time.Second)
		for countSHA(fresh, sum) < 2 && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
			fresh = newUploads(before, uploads(t, l.uploadDir()))
		}
		if n := countSHA(fresh, sum); n < 2 {
			t.Errorf("each workstation on its own store: %d copies on the server; want a duplicate (2)", n)
		}
		for i, r := range runs {
			key, _ := r.result["key"].(string)
			if !passedOpenPicker(t, own[i].store, own[i].state, key, r.task) {
				t.Errorf("%s did not pass open_picker in the control round (exit %d, %v)", r.ws.name, r.code, r.result["outcome"])
			}
		}
	})
}

// recordedObject is the provider object the store bound with the key's outcome, or "".
func recordedObject(t *testing.T, store, key string) string {
	t.Helper()
	out, code := cli(t, nil, "--json", "show", "--store", store, key)
	if code != 0 {
		t.Fatalf("show: %d %s", code, out)
	}
	for _, in := range decode(t, out)["intents"].([]any) {
		evs, _ := in.(map[string]any)["events"].([]any)
		for _, e := range evs {
			e := e.(map[string]any)
			if d, _ := e["detail"].(map[string]any); e["kind"] == "recorded" && d["object_id"] != nil {
				return d["object_id"].(string)
			}
		}
	}
	return ""
}

// TestLiveLookupUnderShiftedClock: a workstation whose clock is 10 minutes slow or fast
// delivers through the shared store; the lookup window comes from the database's clock,
// so the provider lookup after the send still finds the message, and the outcome is
// bound to the provider's object. The control measures the store's times by the shifted
// workstation clock: the window misses the message, and nothing is bound.
func TestLiveLookupUnderShiftedClock(t *testing.T) {
	l := newLive(t)
	shared := newStoreOf(t, "postgres")
	for _, tc := range []struct {
		name, shift   string
		leasesOnClock bool
		found         bool
	}{
		{"10 minutes slow", "-10m", false, true},
		{"10 minutes fast", "10m", false, true},
		{"control: store times from the fast workstation", "10m", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file, _ := l.file("shifted.txt")
			env := append([]string{"SENDONCE_TEST_CLOCK_SHIFT=" + tc.shift}, liveEnv...)
			if tc.leasesOnClock {
				env = append(env, "SENDONCE_TEST_LEASES_ON_CLOCK=1")
			}
			args := []string{"deliver", "--app", "gajim", "--to", "Bob", "--dest-id", "xmpp:bob@localhost", "--file", file,
				"--display", l.bed.display(t), "--staging", l.bed.staging(t), "--store", shared, "--provider-config", l.providerConfig(), "--json"}
			out, code := cli(t, env, args...)
			m := decode(t, out)
			l.noteBundle(m)
			key, _ := m["key"].(string)
			if key == "" || (code != exitOK && code != exitUnknown) {
				t.Fatalf("deliver: exit %d\n%s", code, describe(m))
			}
			object := recordedObject(t, shared, key)
			t.Logf("clock %s: exit %d, %v, provider object %q", tc.shift, code, m["outcome"], object)
			if tc.found && (code != exitOK || object == "") {
				t.Errorf("with the clock %s: exit %d, object %q; want sent_verified bound to the provider's object", tc.shift, code, object)
			}
			if !tc.found && object != "" {
				t.Errorf("the control found object %q; want the shifted window to miss it (the test could not fail)", object)
			}
		})
	}
}

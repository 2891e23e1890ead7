package main

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
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sendonce/sendonce/gate"
)

// These tests run the real CLI as real OS processes (this test binary, re-executed with
// SENDONCE_AS_CLI=1) sharing one SQLite file.

func self(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// cli runs sendonce with args and returns stdout and the exit code.
func cli(t testing.TB, extraEnv []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(self(t), args...)
	cmd.Env = append(append(os.Environ(), "SENDONCE_AS_CLI=1"), extraEnv...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running sendonce %v: %v", args, err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

func newStore(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sendonce.db")
	if out, code := cli(t, nil, "init", "--store", path); code != 0 {
		t.Fatalf("init: %d %s", code, out)
	}
	return path
}

func digest(s string) string { return gate.DigestOf([]byte(s)).String() }

func titleKey(content string) string {
	id, _ := gate.Title("Bob")
	return gate.NewKey(id, gate.DigestOf([]byte(content))).String()
}

func decode(t *testing.T, out string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not one JSON object: %q: %v", out, err)
	}
	return m
}

// TestManyProcessesOneGrant starts 64 processes that claim one key on one store at the
// same moment, several rounds in a row, and sees exactly one grant each round and 63
// refusals that name the winner's task (exit 4); none fails closed. (How long they take
// is in BENCHMARKS.md's rows for 64 processes on one key: BenchmarkContended64, beside
// 64 bare process starts.)
func TestManyProcessesOneGrant(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			const procs, rounds = 64, 3
			path := newStoreOf(t, kind)
			for round := 0; round < rounds; round++ {
				sha := digest(fmt.Sprint("round ", round))
				cmds := make([]*exec.Cmd, procs)
				starts := make([]*os.File, procs)
				outs := make([]*strings.Builder, procs)
				for i := range cmds {
					// Each child waits on its stdin, so that all of them are running before any claims.
					r, w, err := os.Pipe()
					if err != nil {
						t.Fatal(err)
					}
					c := exec.Command("sh", "-c", `read go; exec "$0" "$@"`, self(t), "gate", "claim", "--store", path, "--to", "Bob", "--sha256", sha, "--task", fmt.Sprint("task-", i), "--json")
					c.Env = append(os.Environ(), "SENDONCE_AS_CLI=1")
					c.Stdin = r
					outs[i] = new(strings.Builder)
					c.Stdout = outs[i]
					if err := c.Start(); err != nil {
						t.Fatal(err)
					}
					r.Close()
					cmds[i], starts[i] = c, w
				}
				for _, w := range starts {
					w.WriteString("go\n")
					w.Close()
				}
				var wg sync.WaitGroup
				codes := make([]int, procs)
				for i, c := range cmds {
					wg.Add(1)
					go func(i int, c *exec.Cmd) {
						defer wg.Done()
						c.Wait()
						codes[i] = c.ProcessState.ExitCode()
					}(i, c)
				}
				wg.Wait()
				winner, holders := "", map[string]int{}
				for i, code := range codes {
					answer := decode(t, outs[i].String())
					switch code {
					case 0:
						if winner != "" {
							t.Fatalf("round %d: %s and task-%d were both granted", round, winner, i)
						}
						winner = fmt.Sprint("task-", i)
					case 4:
						h, _ := answer["holder"].(string)
						holders[h]++
					default:
						t.Errorf("round %d process %d exited %d (%s); want 0 or 4", round, i, code, outs[i].String())
					}
				}
				if winner == "" || holders[winner] != procs-1 {
					t.Fatalf("round %d: winner %q, refusals by the holder they name %v; want one winner named by all %d refusals", round, winner, holders, procs-1)
				}
			}
		})
	}
}

// TestKillAfterCrossLeavesUnknown: a process killed with SIGKILL right after its crossing
// is durable, before any record, leaves the key consumed: held while the lease lives,
// send_status_unknown after it.
func TestKillAfterCrossLeavesUnknown(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			path := newStoreOf(t, kind)
			sha, key := digest("killed"), titleKey("killed")
			if out, code := cli(t, nil, "gate", "claim", "--store", path, "--to", "Bob", "--sha256", sha, "--task", "A", "--lease", "1500ms"); code != 0 {
				t.Fatalf("claim: %d %s", code, out)
			}
			cmd := exec.Command(self(t), "gate", "cross", "--store", path, "--key", key, "--task", "A", "--token", "1", "--boundary", "send")
			cmd.Env = append(os.Environ(), "SENDONCE_AS_CLI=1", "SENDONCE_TEST_KILL_AFTER=cross")
			err := cmd.Run()
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if err == nil || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("cross with the kill hook: %v; want death by SIGKILL", err)
			}
			if _, code := cli(t, nil, "gate", "claim", "--store", path, "--to", "Bob", "--sha256", sha, "--task", "B"); code != exitConsumed {
				t.Fatalf("claim after the killed crossing exited %d; want 3", code)
			}
			time.Sleep(1600 * time.Millisecond) // let the lease run out: semantics, not speed
			out, code := cli(t, nil, "status", "--store", path, "--key", key, "--json")
			if code != 0 || decode(t, out)["status"] != "send_status_unknown" {
				t.Fatalf("status after the lease: %d %s; want send_status_unknown", code, out)
			}
			if _, code := cli(t, nil, "gate", "claim", "--store", path, "--to", "Bob", "--sha256", sha, "--task", "C"); code != exitConsumed {
				t.Fatalf("claim after expiry exited %d; want 3", code)
			}
		})
	}
}

// TestStaleHolderRefused: a holder whose lease expired and was taken over is refused on
// check, cross and record, by a real process on a real clock.
func TestStaleHolderRefused(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			path := newStoreOf(t, kind)
			sha, key := digest("stale"), titleKey("stale")
			cli(t, nil, "gate", "claim", "--store", path, "--to", "Bob", "--sha256", sha, "--task", "A", "--lease", "300ms")
			time.Sleep(400 * time.Millisecond)
			if out, code := cli(t, nil, "gate", "claim", "--store", path, "--to", "Bob", "--sha256", sha, "--task", "B"); code != 0 {
				t.Fatalf("takeover: %d %s", code, out)
			}
			for _, args := range [][]string{
				{"gate", "check", "--boundary", "open_picker"},
				{"gate", "cross", "--boundary", "choose_file"},
				{"gate", "renew"},
				{"gate", "record", "--outcome", "not_sent"},
			} {
				args = append(args, "--store", path, "--key", key, "--task", "A", "--token", "1")
				if out, code := cli(t, nil, args...); code != exitStale {
					t.Errorf("%v by the stale holder exited %d (%s); want 6", args[:2], code, out)
				}
			}
			out, _ := cli(t, nil, "show", key, "--store", path, "--json")
			if strings.Count(out, `"kind":"crossed"`) != 0 {
				t.Fatal("a stale holder crossed")
			}
		})
	}
}

// TestStoreFaultsFailClosed: every store fault exits 5 and grants nothing.
func TestStoreFaultsFailClosed(t *testing.T) {
	sha := digest("faults")
	claimArgs := func(path string) []string {
		return []string{"gate", "claim", "--store", path, "--to", "Bob", "--sha256", sha, "--task", "A", "--json", "--lock-timeout", "300ms"}
	}
	wantFailClosed := func(t *testing.T, out string, code int) {
		t.Helper()
		if code != exitFailClosed {
			t.Fatalf("exit %d (%s); want 5", code, out)
		}
		if m := decode(t, out); m["decision"] == "granted" || m["error"] == nil {
			t.Fatalf("output %s: want an error and no grant", out)
		}
	}
	wantNoAttempt := func(t *testing.T, path string) {
		t.Helper()
		out, code := cli(t, nil, "status", "--store", path, "--key", titleKey("faults"), "--json")
		if code != 0 || !strings.Contains(out, `"status":"free"`) || strings.Contains(out, `"dispatch_id"`) {
			t.Fatalf("after the fault: %d %s; want a free key with no attempt", code, out)
		}
	}

	t.Run("missing", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "none.db")
		out, code := cli(t, nil, claimArgs(path)...)
		wantFailClosed(t, out, code)
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("claim created a store")
		}
	})
	t.Run("empty", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "empty.db")
		os.WriteFile(path, nil, 0o600)
		out, code := cli(t, nil, claimArgs(path)...)
		wantFailClosed(t, out, code)
	})
	t.Run("unreadable", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "garbage.db")
		os.WriteFile(path, bytes.Repeat([]byte("not a database "), 500), 0o600)
		out, code := cli(t, nil, claimArgs(path)...)
		wantFailClosed(t, out, code)
	})
	t.Run("corrupt", func(t *testing.T) {
		path := newStore(t)
		for i := 0; i < 3; i++ { // some history, so there are pages to damage
			cli(t, nil, "gate", "claim", "--store", path, "--to", "Bob", "--sha256", digest(fmt.Sprint(i)), "--task", "A")
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i := 100; i < len(b); i++ { // keep the header, damage every page
			b[i] ^= 0x5a
		}
		os.WriteFile(path, b, 0o600)
		out, code := cli(t, nil, claimArgs(path)...)
		wantFailClosed(t, out, code)
	})
	t.Run("schema too new", func(t *testing.T) {
		path := newStore(t)
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		db.Exec("PRAGMA user_version = 42")
		db.Close()
		out, code := cli(t, nil, claimArgs(path)...)
		wantFailClosed(t, out, code)
		if !strings.Contains(out, "upgrade sendonce") {
			t.Fatalf("%s: want it to say upgrade sendonce", out)
		}
	})
	t.Run("locked past the timeout", func(t *testing.T) {
		path := newStore(t)
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		conn, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		out, code := cli(t, nil, claimArgs(path)...)
		conn.ExecContext(context.Background(), "ROLLBACK")
		conn.Close()
		wantFailClosed(t, out, code)
		wantNoAttempt(t, path)
	})
	t.Run("read-only", func(t *testing.T) {
		requireMountNamespace(t)
		path := newStore(t)
		dir := filepath.Dir(path)
		// sh -c SCRIPT BINARY DIR ARGS...: make DIR read-only in this namespace only.
		script := `d="$1"; shift; mount --bind "$d" "$d" && mount -o remount,bind,ro "$d" || exit 90; exec "$0" "$@"`
		args := append([]string{"--mount", "--propagation", "private", "sh", "-c", script, self(t), dir}, claimArgs(path)...)
		out, code := runUnshare(t, args)
		wantFailClosed(t, out, code)
		wantNoAttempt(t, path)
	})
	t.Run("disk full", func(t *testing.T) {
		requireMountNamespace(t)
		dir := t.TempDir()
		path := filepath.Join(dir, "full", "sendonce.db")
		os.Mkdir(filepath.Dir(path), 0o700)
		script := `d="$1"; shift
mount -t tmpfs -o size=1m,mode=0700 tmpfs "$d" || exit 90
"$0" init --store "$d/sendonce.db" >/dev/null || exit 91
dd if=/dev/zero of="$d/fill" bs=4k >/dev/null 2>&1
"$0" "$@"; code=$?
rm -f "$d/fill"
"$0" status --store "$d/sendonce.db" --key "$KEY" --json >"$d/../status.json"
exit $code`
		args := append([]string{"--mount", "--propagation", "private", "sh", "-c", script, self(t), filepath.Dir(path)}, claimArgs(path)...)
		t.Setenv("KEY", titleKey("faults"))
		out, code := runUnshare(t, args)
		wantFailClosed(t, out, code)
		st, err := os.ReadFile(filepath.Join(dir, "status.json"))
		if err != nil || !strings.Contains(string(st), `"status":"free"`) || strings.Contains(string(st), "dispatch_id") {
			t.Fatalf("status after the full disk was freed: %s %v; want free with no attempt", st, err)
		}
	})
}

// requireMountNamespace fails (never skips) when the test cannot make a private mount
// namespace: the read-only and disk-full faults are part of the contract.
func requireMountNamespace(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("unshare", "--mount", "--propagation", "private", "true").CombinedOutput(); err != nil {
		t.Fatalf("these fault tests need root and unshare(1) for a private mount namespace: %v %s", err, out)
	}
}

func runUnshare(t *testing.T, args []string) (string, int) {
	t.Helper()
	cmd := exec.Command("unshare", args...)
	cmd.Env = append(os.Environ(), "SENDONCE_AS_CLI=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if code >= 90 {
		t.Fatalf("setting up the fault failed (%d): %s", code, errb.String())
	}
	return out.String(), code
}

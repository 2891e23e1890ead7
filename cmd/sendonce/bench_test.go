package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/service"
)

// BenchmarkContended64 measures the time until all of 64 processes, started together
// and claiming one key on one store, have their answer (exactly one grant): on a SQLite
// file, and on PostgreSQL (scripts/bench-postgres runs that one, with its server).
// Its anchor, measured beside it, is 64 processes of the same binary started together
// that only print the help: what starting 64 processes costs this machine.
func BenchmarkContended64(b *testing.B) {
	b.Run("anchor=64-starts", func(b *testing.B) {
		exe, err := os.Executable()
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			cmds := make([]*exec.Cmd, 64)
			for j := range cmds {
				cmds[j] = exec.Command(exe, "help")
				cmds[j].Env = append(os.Environ(), "SENDONCE_AS_CLI=1")
				if err := cmds[j].Start(); err != nil {
					b.Fatal(err)
				}
			}
			for _, c := range cmds {
				if err := c.Wait(); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("store=sqlite", func(b *testing.B) { contended64(b, b.TempDir()+"/s.db") })
	b.Run("store=postgres", func(b *testing.B) {
		if os.Getenv("SENDONCE_TEST_POSTGRES") == "" {
			b.Fatal("no PostgreSQL: scripts/bench-postgres starts one")
		}
		b.Setenv("SENDONCE_STATE_DIR", b.TempDir())
		contended64(b, newPostgresDatabase(b))
	})
}

func contended64(b *testing.B, path string) {
	const procs = 64
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	initCmd := exec.Command(exe, "init", "--store", path)
	initCmd.Env = append(os.Environ(), "SENDONCE_AS_CLI=1")
	if out, err := initCmd.CombinedOutput(); err != nil {
		b.Fatalf("init: %v: %s", err, out)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		sha := digest(fmt.Sprint("bench ", i))
		cmds := make([]*exec.Cmd, procs)
		for j := range cmds {
			c := exec.Command(exe, "gate", "claim", "--store", path, "--to", "Bob", "--sha256", sha, "--task", fmt.Sprint("t", j))
			c.Env = append(os.Environ(), "SENDONCE_AS_CLI=1")
			if err := c.Start(); err != nil {
				b.Fatal(err)
			}
			cmds[j] = c
		}
		granted := 0
		for _, c := range cmds {
			if c.Wait() == nil {
				granted++
			}
		}
		if granted != 1 {
			b.Fatalf("%d grants; want 1", granted)
		}
	}
}

// BenchmarkClaimsHTTPBesideLibrary: one claim of a new key a loop through 'sendonce
// serve' (HTTP over its unix socket, Idempotency-Key, token check, guard), and one
// beside it straight through the library on the same store, in the same run. It reports
// each path's claims per second and p99.
func BenchmarkClaimsHTTPBesideLibrary(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	path, socket, tokens := dir+"/s.db", dir+"/s.sock", dir+"/tokens.json"
	env := append(os.Environ(), "SENDONCE_AS_CLI=1")
	initCmd := exec.Command(exe, "init", "--store", path)
	initCmd.Env = env
	if err := initCmd.Run(); err != nil {
		b.Fatal(err)
	}
	tok, err := service.CreateToken(tokens, "bench", service.RoleAgent, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	srv := exec.Command(exe, "--store", path, "serve", "--listen", "unix:"+socket, "--tokens", tokens, "--replay", "../../testdata/fixtures/verified-text-file", "--staging", dir)
	srv.Env = env
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	remote, err := service.Dial("unix:"+socket, tok.Token)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, _, err := remote.Do(ctx, "GET", "/v1/healthz", "", nil, nil); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the service did not come up")
		}
		time.Sleep(50 * time.Millisecond)
	}
	lib, err := sendonce.Open(ctx, path, sendonce.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer lib.Close()
	var viaLib, viaHTTP []time.Duration
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		res, err := lib.Claim(ctx, sendonce.ClaimRequest{Destination: sendonce.Destination{Title: "Bob"}, Content: sendonce.Content{SHA256: digest(fmt.Sprint("lib ", i))}, Task: "lib"})
		viaLib = append(viaLib, time.Since(start))
		if err != nil || !res.Granted() {
			b.Fatalf("library claim: %v", err)
		}
		start = time.Now()
		var out sendonce.ClaimResult
		_, _, err = remote.Do(ctx, "POST", "/v1/claim", service.NewKey(), service.ClaimBody{To: "Bob", SHA256: digest(fmt.Sprint("http ", i)), Task: "http"}, &out)
		viaHTTP = append(viaHTTP, time.Since(start))
		if err != nil || !out.Granted() {
			b.Fatalf("HTTP claim: %v", err)
		}
	}
	report := func(name string, d []time.Duration) {
		var sum time.Duration
		for _, x := range d {
			sum += x
		}
		slices.Sort(d)
		b.ReportMetric(float64(len(d))/sum.Seconds(), name+"-claims/s")
		b.ReportMetric(float64(d[len(d)*99/100].Microseconds())/1000, name+"-p99-ms")
	}
	report("library", viaLib)
	report("http", viaHTTP)
}

// BenchmarkGateClaimCLI is the wall time of one 'sendonce gate claim' process claiming
// a new key (start, open the store, claim, print, exit), one after another, beside the
// same binary's bare start ('help') as its anchor. The in-process claim is
// store/sqlite's BenchmarkClaim.
func BenchmarkGateClaimCLI(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	env := append(os.Environ(), "SENDONCE_AS_CLI=1")
	run := func(b *testing.B, args ...string) {
		c := exec.Command(exe, args...)
		c.Env = env
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	b.Run("anchor=help", func(b *testing.B) {
		for b.Loop() {
			run(b, "help")
		}
	})
	b.Run("gate-claim", func(b *testing.B) {
		path := b.TempDir() + "/s.db"
		run(b, "init", "--store", path)
		for i := 0; b.Loop(); i++ {
			run(b, "gate", "claim", "--store", path, "--to", "Bob", "--sha256", digest(fmt.Sprint("cli ", i)), "--task", "bench")
		}
	})
}

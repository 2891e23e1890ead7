//go:build unix

// Package testbed reads and starts the local test bed (Xvfb, Prosody, Gajim) that the
// scripts in this folder run, for the tests that need the real parts: testbed/up writes
// $TESTBED_DIR/state.env, KEY=VALUE lines, READY=1 last.
package testbed

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// State is a running test bed, as its state.env describes it.
type State struct {
	File string            // the state.env
	Vars map[string]string // its lines
}

// Load reads a state.env and checks that the test bed is up: READY=1, the required keys
// present, and each recorded process (Xvfb, Prosody, Gajim) alive.
func Load(path string, required ...string) (*State, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the test bed state: %v (start a test bed with testbed/up; it writes $TESTBED_DIR/state.env)", err)
	}
	defer f.Close()
	s := &State{File: path, Vars: map[string]string{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		s.Vars[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %v", path, err)
	}
	if s.Vars["READY"] != "1" {
		return nil, fmt.Errorf("the test bed state %s has no READY=1: testbed/up did not finish (run it again)", path)
	}
	for _, k := range required {
		if s.Vars[k] == "" {
			return nil, fmt.Errorf("the test bed state %s has no %s", path, k)
		}
	}
	pids := []string{"XVFB_PID", "PROSODY_PID"}
	for _, app := range strings.Split(s.Vars["APPS"], ",") {
		switch app {
		case "gajim", "": // a state without APPS is Gajim's
			pids = append(pids, "GAJIM_PID")
		case "psi-plus":
			pids = append(pids, "PSI_PID")
		}
	}
	for _, k := range pids {
		pid, err := strconv.Atoi(s.Vars[k])
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("the test bed state %s has no valid %s (%q)", path, k, s.Vars[k])
		}
		if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
			return nil, fmt.Errorf("the test bed of %s is not running: %s=%d: %v (restart it: TESTBED_DIR=%s testbed/up)", path, k, pid, err, filepath.Dir(path))
		}
	}
	return s, nil
}

// Apps is testbed/up's arguments for a test bed with every app the tests drive (what
// scripts/test starts too).
func Apps() []string { return []string{"--app", "gajim", "--app", "psi-plus"} }

// Start runs testbed/up (from the repository at repo) in a new temporary folder, after
// arming a watchdog process that runs testbed/down and removes the folder when teardown
// is called or, failing that, when this process exits however it exits (the kernel
// closes the pipe the watchdog waits on). Keep teardown referenced for as long as the
// test bed is wanted: the pipe closes when it is collected.
func Start(repo string, required ...string) (s *State, teardown func() error, err error) {
	up, down := filepath.Join(repo, "testbed", "up"), filepath.Join(repo, "testbed", "down")
	for _, p := range []string{up, down} {
		if _, err := os.Stat(p); err != nil {
			return nil, nil, fmt.Errorf("no test bed script: %v", err)
		}
	}
	dir, err := os.MkdirTemp("", "sendonce-testbed-")
	if err != nil {
		return nil, nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil { // Gajim's user must reach staging/
		return nil, nil, err
	}
	r, w, err := os.Pipe() // close-on-exec: no child of this process keeps w open
	if err != nil {
		return nil, nil, err
	}
	script := `cat >/dev/null; TESTBED_DIR="$1" "$2" >"$1.down.log" 2>&1 && rm -rf -- "$1" "$1.down.log" "$1.up.log"`
	wd := exec.Command("sh", "-c", script, "sendonce-testbed-watchdog", dir, down)
	// Stdout and stderr stay /dev/null, so `go test` never waits on them; its own process
	// group, so a Ctrl+C to the test's group does not kill it before it tears down.
	wd.Stdin = r
	wd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := wd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, nil, fmt.Errorf("starting the teardown watchdog: %v", err)
	}
	r.Close()
	teardown = func() error {
		w.Close()
		if err := wd.Wait(); err != nil {
			log, _ := os.ReadFile(dir + ".down.log")
			return fmt.Errorf("testbed/down: %v\n%s", err, log)
		}
		return nil
	}

	upLog := dir + ".up.log"
	logf, err := os.Create(upLog)
	if err != nil {
		return nil, teardown, err
	}
	defer logf.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, up, Apps()...)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "TESTBED_DIR="+dir)
	cmd.Stdout, cmd.Stderr = logf, logf // a file, not a pipe: the daemons up starts must not hold us
	if err := cmd.Run(); err != nil {
		log, _ := os.ReadFile(upLog)
		return nil, teardown, fmt.Errorf("TESTBED_DIR=%s testbed/up: %v\n%s", dir, err, lastLines(string(log), 40))
	}
	s, err = Load(filepath.Join(dir, "state.env"), required...)
	return s, teardown, err
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

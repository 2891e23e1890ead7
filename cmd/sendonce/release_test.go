package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReleaseBuildHasNoTestHooks builds the release binary (go build ./cmd/sendonce, no
// tags) and checks that the test-only surfaces are not in it: the scenario commands,
// deliver --replay (a replayed desktop could record outcomes for real keys), and the
// SENDONCE_TEST_KILL_AFTER hook.
func TestReleaseBuildHasNoTestHooks(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "sendonce")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(args ...string) (string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "SENDONCE_STORE="+filepath.Join(t.TempDir(), "s.db"), "DISPLAY=:999")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.Run()
		return out.String(), cmd.ProcessState.ExitCode()
	}
	for _, args := range [][]string{{"scenarios", "worker"}, {"scenarios", "run"}, {"scenarios", "history"}} {
		if out, code := run(args...); code != exitUsage || !strings.Contains(out, "unknown command") {
			t.Errorf("release sendonce %s: exit %d, %q; want 2, unknown command", strings.Join(args, " "), code, out)
		}
	}
	if out, code := run("deliver", "--replay", "testdata", "--app", "gajim", "--to", "Bob", "--file", "release_test.go"); code != exitUsage || !strings.Contains(out, "-replay") {
		t.Errorf("release sendonce deliver --replay: exit %d, %q; want 2, flag not defined", code, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("SENDONCE_TEST_KILL_AFTER")) {
		t.Error("the release binary contains the SENDONCE_TEST_KILL_AFTER hook")
	}
	if out, code := run("help"); code != exitOK || strings.Contains(out, "scenarios") {
		t.Errorf("release sendonce help: exit %d, lists scenarios:\n%s", code, out)
	}
}

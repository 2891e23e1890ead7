//go:build cgo

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLiveReadmeTour runs the README's five-minute tour as written, with bash, against
// the live test bed: in a folder laid out as scripts/demo leaves the clone (bin/sendonce,
// .testbed/state.env, an initialized store), the first delivery exits 0 with
// sent_verified, the same one again exits 3 refused, status says sent_verified, and the
// show and evidence report lines work on the key and bundle the delivery printed.
func TestLiveReadmeTour(t *testing.T) {
	bed := liveTestBed(t)
	block := regexp.MustCompile("(?s)## A five-minute tour.*?```sh\n(.*?)```").FindStringSubmatch(readDoc(t, "README.md"))
	if block == nil {
		t.Fatal("the README has no tour block")
	}
	lines := strings.Split(strings.TrimSpace(block[1]), "\n")
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
	os.MkdirAll(filepath.Join(dir, ".testbed"), 0o700)
	wrapper := "#!/bin/sh\nSENDONCE_AS_CLI=1 OMP_THREAD_LIMIT=1 exec " + self(t) + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "bin", "sendonce"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	state, err := os.ReadFile(bed.stateFile)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, ".testbed", "state.env"), state, 0o600)
	run := func(script string) (string, int) {
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "SENDONCE_STORE=", "SENDONCE_STATE_DIR=")
		out, err := cmd.CombinedOutput()
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatalf("%s: %v", script, err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	setup := lines[0] // the state and the store's place, kept for every later line
	if out, code := run(setup + "\nbin/sendonce init"); code != 0 {
		t.Fatalf("init as scripts/demo does: %d %s", code, out)
	}
	var key, bundle string
	for i, line := range lines[1:] {
		line, _, _ = strings.Cut(line, " # ")
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		line = strings.ReplaceAll(strings.ReplaceAll(line, "KEY", key), "BUNDLE", bundle)
		line = strings.ReplaceAll(line, "report.html", filepath.Join(dir, "report.html"))
		out, code := run(setup + "\n" + line)
		switch {
		case strings.Contains(line, "deliver") && key == "":
			if code != 0 || !strings.Contains(out, "outcome: sent_verified") {
				t.Fatalf("line %d, the first delivery: exit %d\n%s", i+2, code, out)
			}
			key = regexp.MustCompile(`(?m)^key: (\S+)`).FindStringSubmatch(out)[1]
			bundle = regexp.MustCompile(`(?m)^evidence: (\S+)`).FindStringSubmatch(out)[1]
		case strings.Contains(line, "deliver"):
			if code != exitConsumed || !strings.Contains(out, "outcome: refused") {
				t.Fatalf("line %d, the same delivery again: exit %d\n%s", i+2, code, out)
			}
		case strings.Contains(line, "status"):
			if code != 0 || !strings.Contains(out, "status: sent_verified") {
				t.Fatalf("line %d, status: exit %d\n%s", i+2, code, out)
			}
		default:
			if code != 0 {
				t.Fatalf("line %d: %s: exit %d\n%s", i+2, line, code, out)
			}
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "report.html")); err != nil || fi.Size() == 0 {
		t.Fatalf("the tour's report: %v", err)
	}
}

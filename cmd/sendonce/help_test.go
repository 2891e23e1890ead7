package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestEveryCommandHasHelp: each command's -h exits 0 and prints, on stdout, its usage
// once, its summary and an example that names it and only flags it has.
func TestEveryCommandHasHelp(t *testing.T) {
	cs := completions(context.Background())
	if len(cs) != len(commands()) {
		t.Fatalf("%d commands completed of %d", len(cs), len(commands()))
	}
	flagInExample := regexp.MustCompile(`(?:^| )--([a-z0-9-]+)`)
	for _, c := range cs {
		name := strings.Join(c.words, " ")
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			env := &environment{stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }}
			code := run(context.Background(), append(slices.Clone(c.words), "-h"), env)
			if code != exitOK || errOut.Len() != 0 {
				t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, errOut.String())
			}
			text := out.String()
			if name != "help" && strings.Count(text, "usage: sendonce "+name) != 1 {
				t.Errorf("the usage printed %d times:\n%s", strings.Count(text, "usage: sendonce "+name), text)
			}
			ex := examples()[name]
			if !strings.HasPrefix(ex, "sendonce "+name) {
				t.Fatalf("example %q does not run the command", ex)
			}
			if name != "help" && !strings.Contains(text, "\nexample:\n  "+ex+"\n") {
				t.Errorf("no example in:\n%s", text)
			}
			for _, m := range flagInExample.FindAllStringSubmatch(ex, -1) {
				if !slices.Contains(c.flags, m[1]) {
					t.Errorf("the example uses --%s, which the command does not have (%v)", m[1], c.flags)
				}
			}
		})
	}
	for name := range examples() {
		if !slices.ContainsFunc(cs, func(c completed) bool { return strings.Join(c.words, " ") == name }) && !strings.HasPrefix(name, "scenarios ") {
			t.Errorf("an example for %q, which is no command", name)
		}
	}
}

// TestBashCompletion: bash, given the script, completes commands, a group's commands
// and a command's flags.
func TestBashCompletion(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"completion", "bash"}, &environment{stdout: &out, stderr: os.Stderr, getenv: func(string) string { return "" }}); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	script := filepath.Join(t.TempDir(), "sendonce.bash")
	if err := os.WriteFile(script, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"sendonce", "ga"}, "gate"},
		{[]string{"sendonce", "gate", "c"}, "claim check cross"},
		{[]string{"sendonce", "gate", "claim", "--ta"}, "--task"},
		{[]string{"sendonce", "--json", "evidence", "v"}, "verify"},
	} {
		args := append([]string{"-c", `source "$0"; COMP_WORDS=("${@}"); COMP_CWORD=$(( $# - 1 )); _sendonce; echo "${COMPREPLY[*]}"`, script}, tc.words...)
		cmd := exec.Command("bash", args...)
		got, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v", tc.words, err)
		}
		if strings.TrimSpace(string(got)) != tc.want {
			t.Errorf("%v: completed %q; want %q", tc.words, strings.TrimSpace(string(got)), tc.want)
		}
	}
}

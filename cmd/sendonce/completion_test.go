package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestBashCompletionAfterValues runs the bash script in bash: what _sendonce offers after a
// global flag's value (the command names, not nothing: the value was once taken for a
// command), after --file (the file names here), after completion (the shells), and a
// command's flags after its name.
func TestBashCompletionAfterValues(t *testing.T) {
	var script bytes.Buffer
	bashCompletion(&script, completions(context.Background()))
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "report.pdf"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(dir, "completion.bash"), script.Bytes(), 0o600)
	offer := func(words ...string) []string {
		t.Helper()
		// COMP_WORDS as bash makes them: the line's words, the last the one completed.
		line := "source completion.bash; COMP_WORDS=(" + shellWords(words) + "); COMP_CWORD=" + strconv.Itoa(len(words)-1) + `; _sendonce; printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command("bash", "--norc", "--noprofile", "-c", line)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.Fields(string(out))
	}
	for _, tc := range []struct {
		words []string
		want  []string // offered, among others
		not   []string // never offered
	}{
		{[]string{"sendonce", ""}, []string{"gate", "deliver", "version"}, nil},
		{[]string{"sendonce", "--store", "s.db", ""}, []string{"gate", "status", "show"}, []string{"--json"}},
		{[]string{"sendonce", "--store", "s.db", "--log", "json", "gate", ""}, []string{"claim", "cross"}, nil},
		{[]string{"sendonce", "--store", "s.db", "gate", "claim", "--"}, []string{"--file", "--to", "--task"}, []string{"claim"}},
		{[]string{"sendonce", "gate", "claim", "--file", ""}, []string{"report.pdf", "notes.txt"}, []string{"--to"}},
		{[]string{"sendonce", "gate", "claim", "--file", "rep"}, []string{"report.pdf"}, []string{"notes.txt"}},
		{[]string{"sendonce", "--store", ""}, []string{"report.pdf"}, []string{"gate"}},
		{[]string{"sendonce", "gate", "claim", "--task", "t1", "--"}, []string{"--file", "--sha256"}, nil},
		{[]string{"sendonce", "completion", ""}, []string{"bash", "zsh", "fish"}, nil},
		{[]string{"sendonce", "completion", "z"}, []string{"zsh"}, []string{"bash"}},
	} {
		got := offer(tc.words...)
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("%q: offered %q; want %q among them", tc.words, got, w)
			}
		}
		for _, w := range tc.not {
			if slices.Contains(got, w) {
				t.Errorf("%q: offered %q; want no %q", tc.words, got, w)
			}
		}
	}
}

// TestValuedFlagsAreNeverBool: a flag that takes a value in one command takes one in
// every command, so the completion's one list of them is right for each.
func TestValuedFlagsAreNeverBool(t *testing.T) {
	cs := completions(context.Background())
	valued := map[string]string{}
	for _, c := range cs {
		for _, f := range c.valued {
			valued[f] = strings.Join(c.words, " ")
		}
	}
	for _, c := range cs {
		for _, f := range c.flags {
			if by, ok := valued[f]; ok && !slices.Contains(c.valued, f) {
				t.Errorf("--%s takes a value in %s but not in %s", f, by, strings.Join(c.words, " "))
			}
		}
	}
}

func shellWords(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + w + "'"
	}
	return strings.Join(q, " ")
}

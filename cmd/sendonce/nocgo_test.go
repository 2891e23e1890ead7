//go:build !cgo

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestNoDesktopCommands: in the build without cgo (Windows, macOS, a server), each
// desktop command says that it needs the desktop build and what works here (exit 2),
// rather than "unknown command"; help lists them; version says the build is gate only.
// scripts/test runs it with CGO_ENABLED=0.
func TestNoDesktopCommands(t *testing.T) {
	for _, args := range [][]string{{"deliver", "--app", "gajim"}, {"record"}, {"doctor", "--app", "gajim"}, {"--json", "doctor"}} {
		var stdout, stderr bytes.Buffer
		env := &environment{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}
		code := run(context.Background(), args, env)
		out := stdout.String() + stderr.String()
		if code != exitUsage || !strings.Contains(out, "needs the desktop build") || !strings.Contains(out, "built without cgo") || strings.Contains(out, "unknown command") {
			t.Errorf("sendonce %s: exit %d, %q; want 2 and the desktop build named", strings.Join(args, " "), code, out)
		}
	}
	var help bytes.Buffer
	run(context.Background(), []string{"help"}, &environment{stdout: &help, stderr: &help, getenv: func(string) string { return "" }})
	for _, name := range []string{"deliver", "record", "doctor"} {
		if !strings.Contains(help.String(), "  "+name+" ") {
			t.Errorf("help does not list %s:\n%s", name, help.String())
		}
	}
	var v bytes.Buffer
	run(context.Background(), []string{"version"}, &environment{stdout: &v, stderr: &v, getenv: func(string) string { return "" }})
	if !strings.Contains(v.String(), "gate only") {
		t.Errorf("version in the build without cgo: %q; want it to say gate only", v.String())
	}
}

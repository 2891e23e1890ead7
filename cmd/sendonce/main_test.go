package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets the test binary be the sendonce command: for testscript's scripts, and
// for the tests that start many real OS processes (SENDONCE_AS_CLI=1).
func TestMain(m *testing.M) {
	if !testHooks {
		fmt.Fprintln(os.Stderr, "cmd/sendonce's tests drive its test-only surfaces: run them with -tags sendonce_testhooks")
		os.Exit(2)
	}
	if os.Getenv("SENDONCE_AS_CLI") == "1" {
		// As main does: SIGINT and SIGTERM cancel the command's context.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], processEnvironment())
		stop()
		os.Exit(code)
	}
	testscript.Main(m, map[string]func(){
		"sendonce": func() { main() },
	})
}

// TestScripts runs the CLI's behaviour as scripts: testdata/script/*.txt.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(e *testscript.Env) error {
			e.Setenv("SENDONCE_STORE", e.WorkDir+"/sendonce.db")
			e.Setenv("XDG_STATE_HOME", e.WorkDir+"/state") // the default staging folder, inside the script's work folder
			root, err := filepath.Abs("../../testdata")
			e.Setenv("BUNDLES", root+"/bundles")
			e.Setenv("TRANSCRIPTS", root+"/transcripts")
			return err
		},
	})
}

// TestLoadsOCR: the commands that load libtesseract are known whatever global flags
// come before them, so that main restarts them with OMP_THREAD_LIMIT=1 (without it a
// `sendonce --store S deliver` read the screen four times slower than `sendonce
// deliver --store S`); the gate's commands are not restarted.
func TestLoadsOCR(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"deliver", "--store", "s.db"}, true},
		{[]string{"--store", "s.db", "deliver", "--app", "gajim"}, true},
		{[]string{"--json", "--log", "json", "record"}, true},
		{[]string{"--store=s.db", "mcp", "--http", "127.0.0.1:0"}, true},
		{[]string{"serve", "--listen", "unix:/tmp/s"}, true},
		{[]string{"doctor"}, true},
		{[]string{"gate", "claim", "--dest-id", "xmpp:bob@localhost"}, false},
		{[]string{"--store", "deliver", "status"}, false}, // the store's path is "deliver"
		{[]string{"status", "deliver"}, false},
		{[]string{"--no-such-flag", "deliver"}, false}, // run reports the flag
		{nil, false},
	} {
		if got := loadsOCR(tc.args); got != tc.want {
			t.Errorf("loadsOCR(%q) = %v; want %v", tc.args, got, tc.want)
		}
	}
}

// Command sendonce delivers a file through a desktop chat app at most once, and leaves
// proof. Its gate commands are a command-line contract any agent can call: see
// docs/gate.md for the contract table and the exit codes.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/jezek/xgb"
)

func main() {
	reexecForOCR(os.Args)
	// xgb logs to stderr when there is no ~/.Xauthority; its errors still return.
	xgb.Logger.SetOutput(io.Discard)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], processEnvironment())
	stop()
	os.Exit(code)
}

// processEnvironment is the command's environment as a process: its standard output,
// its own stderr (ownStderr) and its environment variables.
func processEnvironment() *environment {
	return &environment{stdout: os.Stdout, stderr: ownStderr(), getenv: os.Getenv}
}

// loadsOCR: args (without the program's name) name a command that loads libtesseract,
// whatever global flags come before it.
func loadsOCR(args []string) bool {
	rest, err := parseGlobal(&environment{getenv: func(string) string { return "" }}, args)
	if err != nil {
		return false
	}
	c, _, ok := lookup(rest)
	switch c.name {
	case "deliver", "record", "doctor", "mcp", "serve":
		return ok
	}
	return false
}

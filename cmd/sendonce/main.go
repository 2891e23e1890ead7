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

// ownStderr is a duplicate of file descriptor 2, which the command writes to: a
// Tesseract engine loads with descriptor 2 pointed at /dev/null (gosseract's doing), and
// a delivery loads its second engine in the background while it prints its progress.
// Where the descriptor cannot be duplicated, it is os.Stderr.
func ownStderr() *os.File {
	fd, err := syscall.Dup(2)
	if err != nil {
		return os.Stderr
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "/dev/stderr")
}

// reexecForOCR restarts the process with OMP_THREAD_LIMIT=1 for the commands that load
// libtesseract: it reads the variable when it loads, and without it OCR spends its time
// starting threads (a chat read took 0.62 s instead of 0.14 s on 2 cores). It returns
// when nothing needs doing or the exec failed.
func reexecForOCR(args []string) {
	if os.Getenv("OMP_THREAD_LIMIT") == "1" || !loadsOCR(args[1:]) {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	syscall.Exec(exe, args, append(os.Environ(), "OMP_THREAD_LIMIT=1"))
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

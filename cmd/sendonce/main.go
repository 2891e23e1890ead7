// Command sendonce delivers a file through a desktop chat app at most once, and leaves
// proof. Its gate commands are a command-line contract any agent can call: see the
// README for the contract table and the exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	reexecForOCR(os.Args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], &environment{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv})
	stop()
	os.Exit(code)
}

// reexecForOCR restarts the process with OMP_THREAD_LIMIT=1 for the commands that load
// libtesseract: it reads the variable when it loads, and without it OCR spends its time
// starting threads. It returns when nothing needs doing or the exec failed.
func reexecForOCR(args []string) {
	if len(args) < 2 || (args[1] != "deliver" && args[1] != "record") || os.Getenv("OMP_THREAD_LIMIT") == "1" {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	syscall.Exec(exe, args, append(os.Environ(), "OMP_THREAD_LIMIT=1"))
}

//go:build unix

package main

import (
	"os"
	"syscall"
)

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

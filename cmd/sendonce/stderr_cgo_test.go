//go:build cgo

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sendonce/sendonce/vision/tesseract"
)

// TestStderrLinesSurviveABackgroundEngineLoad: while a Tesseract engine loads in the
// background (as a delivery's second one does), gosseract points file descriptor 2 at
// /dev/null; every line the command writes meanwhile (to ownStderr, a duplicate) still
// arrives. Lines written to descriptor 2 itself in the same window are the control: some
// of them are lost, so the test did write while the engine loaded.
func TestStderrLinesSurviveABackgroundEngineLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stderr")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved, err := syscall.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Dup2(int(f.Fd()), 2); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			syscall.Dup2(saved, 2)
			syscall.Close(saved)
			restored = true
		}
	}
	defer restore()
	out := ownStderr()
	type loaded struct {
		c   *tesseract.Client
		err error
	}
	done := make(chan loaded, 1)
	go func() {
		c, err := tesseract.New(nil)
		done <- loaded{c, err}
	}()
	written := 0
	var l loaded
	deadline := time.After(20 * time.Second)
	for waiting := true; waiting; {
		select {
		case l = <-done:
			waiting = false
		case <-deadline:
			restore()
			t.Fatal("the engine never loaded")
		default:
			fmt.Fprintf(out, "ours %d\n", written)
			fmt.Fprintf(os.Stderr, "direct %d\n", written)
			written++
			time.Sleep(time.Millisecond)
		}
	}
	out.Close()
	restore()
	if l.err != nil {
		t.Fatal(l.err)
	}
	l.c.Close()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ours, direct := strings.Count(string(got), "ours "), strings.Count(string(got), "direct ")
	if ours != written {
		t.Errorf("%d of %d lines written to the command's stderr arrived", ours, written)
	}
	if direct == written {
		t.Errorf("all %d lines written to descriptor 2 arrived: nothing was written while the engine loaded (the test proves nothing)", written)
	}
}

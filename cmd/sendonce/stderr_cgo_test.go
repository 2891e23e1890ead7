//go:build cgo

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sendonce/sendonce/vision/tesseract"
)

// TestStderrLinesSurviveABackgroundEngineLoad: while a delivery's second Tesseract
// engine loads in the background, gosseract points file descriptor 2 at /dev/null;
// every line the command writes meanwhile (to ownStderr, a duplicate) still arrives.
// Lines written to descriptor 2 itself in the same window are the control: some of
// them are lost, so the test did write while the engine loaded.
func TestStderrLinesSurviveABackgroundEngineLoad(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one core: no engine loads in the background, so there is nothing to lose")
	}
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
	b, err := tesseract.NewBanded()
	if err != nil {
		restore()
		t.Fatal(err)
	}
	written := 0
	deadline := time.Now().Add(20 * time.Second)
	for !available(b) && time.Now().Before(deadline) {
		fmt.Fprintf(out, "ours %d\n", written)
		fmt.Fprintf(os.Stderr, "direct %d\n", written)
		written++
		time.Sleep(time.Millisecond)
	}
	loaded := available(b)
	b.Close()
	out.Close()
	restore()
	if !loaded {
		t.Fatal("the second engine never loaded")
	}
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

func available(b *tesseract.Banded) bool {
	for _, e := range b.Engines[1:] {
		if a, ok := e.(interface{ Available() bool }); ok && a.Available() {
			return true
		}
	}
	return false
}

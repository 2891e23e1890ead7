package main

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// BenchmarkContended64 measures the time until all of 64 processes, started together
// and claiming one key on one store, have their answer (exactly one grant).
func BenchmarkContended64(b *testing.B) {
	const procs = 64
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	path := b.TempDir() + "/s.db"
	initCmd := exec.Command(exe, "init", "--store", path)
	initCmd.Env = append(os.Environ(), "SENDONCE_AS_CLI=1")
	if err := initCmd.Run(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		sha := digest(fmt.Sprint("bench ", i))
		cmds := make([]*exec.Cmd, procs)
		for j := range cmds {
			c := exec.Command(exe, "gate", "claim", "--store", path, "--to", "Bob", "--sha256", sha, "--task", fmt.Sprint("t", j))
			c.Env = append(os.Environ(), "SENDONCE_AS_CLI=1")
			if err := c.Start(); err != nil {
				b.Fatal(err)
			}
			cmds[j] = c
		}
		granted := 0
		for _, c := range cmds {
			if c.Wait() == nil {
				granted++
			}
		}
		if granted != 1 {
			b.Fatalf("%d grants; want 1", granted)
		}
	}
}

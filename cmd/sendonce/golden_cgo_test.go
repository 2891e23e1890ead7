//go:build cgo

package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestGoldenDeliver pins deliver's JSON for each outcome, a refusal, a dry run and bad
// input, replaying recorded fixtures (no X server; real Tesseract OCR).
func TestGoldenDeliver(t *testing.T) {
	t.Setenv("OMP_THREAD_LIMIT", "1")
	g := newGolden(t)
	g.env["DISPLAY"] = ":replay"
	g.run("deliver-init", 0, "init")
	fixture := func(name string) (dir, file string) {
		dir = filepath.Join(g.repo, "fixtures", name)
		matches, _ := filepath.Glob(filepath.Join(dir, "file", "*"))
		if len(matches) != 1 {
			t.Fatalf("fixture %s: want one file under file/, got %v", name, matches)
		}
		b, err := os.ReadFile(matches[0])
		if err != nil {
			t.Fatal(err)
		}
		sub := filepath.Join(g.work, name)
		os.MkdirAll(sub, 0o755)
		file = filepath.Join(sub, filepath.Base(matches[0]))
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return dir, file
	}
	common := []string{"--app", "gajim", "--to", "Bob", "--staging", filepath.Join(g.work, "staging"),
		"--evidence-dir", filepath.Join(g.work, "evidence"), "--sent-item-timeout", "2s"}
	deliver := func(name string, code int, fx, file string, extra ...string) {
		t.Helper()
		args := append([]string{"deliver", "--replay", fx, "--file", file, "--task", name}, common...)
		g.run(name, code, append(args, extra...)...)
	}

	dir, file := fixture("verified-text-file")
	deliver("deliver-bad-app", 2, dir, file, "--app", "nochat")
	deliver("deliver-missing-file", 2, dir, filepath.Join(g.work, "nope.txt"))
	deliver("deliver-folder", 2, dir, g.work)
	deliver("deliver-invisible-title", 2, dir, file, "--to", "Bob\u200b")
	deliver("deliver-dry-run", 0, dir, file, "--dest-id", "xmpp:bob@localhost", "--dry-run")
	deliver("deliver-sent-verified", 0, dir, file, "--dest-id", "xmpp:bob@localhost")
	deliver("deliver-consumed", 3, dir, file, "--dest-id", "xmpp:bob@localhost")
	dir, file = fixture("wrong-title")
	deliver("deliver-not-sent", 8, dir, file)
	dir, file = fixture("name-unreadable-on-send-page")
	deliver("deliver-unknown", 7, dir, file)
}

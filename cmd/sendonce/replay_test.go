//go:build cgo

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/driver/replay"
	"github.com/sendonce/sendonce/evidence"
)

// TestReplayFixtures runs every recorded fixture through the whole delivery pipeline
// (gate store, runner, Tesseract OCR, evidence, classifier) with the replay driver and
// no X server: the outcome must be the one the live run recorded, and the pipeline must
// send the recorded input events, in order, and all of them.
func TestReplayFixtures(t *testing.T) {
	t.Setenv("OMP_THREAD_LIMIT", "1")
	dirs, _ := filepath.Glob("../../testdata/fixtures/*")
	if len(dirs) < 4 {
		t.Fatalf("%d fixtures under testdata/fixtures; want at least 4 (sendonce record)", len(dirs))
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			rd, err := replay.New(dir)
			if err != nil {
				t.Fatal(err)
			}
			fx := rd.Fixture()
			work := t.TempDir()
			file := filepath.Join(work, fx.FileName)
			content, err := os.ReadFile(filepath.Join(dir, "file", fx.FileName))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(file, content, 0o644)
			store := newStore(t)
			var stdout, stderr bytes.Buffer
			env := &environment{stdout: &stdout, stderr: &stderr, getenv: func(k string) string {
				if k == "DISPLAY" {
					return ":replay"
				}
				return os.Getenv(k)
			}}
			env.desktop = func(string) (driver.Driver, func(), error) { return rd, func() {}, nil }
			args := []string{"deliver", "--store", store, "--json", "--app", fx.App, "--to", fx.To, "--file", file,
				"--staging", filepath.Join(work, "staging"), "--evidence-dir", filepath.Join(work, "evidence"), "--sent-item-timeout", "2s"}
			if fx.DestID != "" {
				args = append(args, "--dest-id", fx.DestID)
			}
			code := run(context.Background(), args, env)
			var out deliveryOutput
			if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
				t.Fatalf("exit %d, output %q: %v\n%s", code, stdout.String(), err, stderr.String())
			}
			if out.Outcome != fx.Expected {
				t.Fatalf("outcome %s (exit %d); the live run recorded %s\nreasons: %v\nstderr: %s", out.Outcome, code, fx.Expected, out.Reasons, stderr.String())
			}
			if rd.Inputs() != len(fx.Inputs) {
				t.Fatalf("replayed %d of %d recorded input events", rd.Inputs(), len(fx.Inputs))
			}
			b, err := evidence.Verify(out.Evidence, evidence.VerifyOptions{})
			if err != nil || !b.Sealed() {
				t.Fatalf("evidence bundle: %v (sealed %v)", err, b != nil && b.Sealed())
			}
			if c := evidence.ClassifyBundle(b); string(c.Outcome) != fx.Expected {
				t.Fatalf("the bundle classifies as %s", c.Outcome)
			}
		})
	}
}

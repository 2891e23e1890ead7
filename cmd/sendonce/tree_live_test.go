//go:build cgo

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/evidence"
)

// TestLiveTreeReadGatesTheChoice: Gajim's profile with its "wait for Open to be enabled"
// read from the accessibility tree (a wait_node for the chooser's Open button, sensitive)
// instead of inverted, thresholded OCR of the button's pixels delivers through the real
// Gajim: sent_verified, one copy on the server, and the evidence records the button as
// the app named it, in its dialog, sensitive.
func TestLiveTreeReadGatesTheChoice(t *testing.T) {
	l := newLive(t)
	b, err := os.ReadFile(filepath.Join("..", "..", "driver", "profiles", "gajim.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	replaced := false
	steps := p["choose_file"].([]any)
	for i, s := range steps {
		if s.(map[string]any)["name"] == "wait for Open to be enabled" {
			steps[i] = map[string]any{"name": "wait for Open to be enabled", "do": "wait_node", "class": "safe", "timeout": "5s",
				"node": map[string]any{"role": "push button", "name": "Open", "states": []string{"sensitive"},
					"under": map[string]any{"role": "file chooser", "name": "Choose File to Send…"}}}
			replaced = true
		}
	}
	if !replaced {
		t.Fatal("gajim.json has no step named \"wait for Open to be enabled\" any more: update this test")
	}
	p["app"] = "gajim-tree"
	profile := filepath.Join(t.TempDir(), "gajim-tree.json")
	b, _ = json.Marshal(p)
	os.WriteFile(profile, b, 0o644)

	file, sum := l.file("tree-read.txt")
	before := uploads(t, l.uploadDir())
	args := l.deliverArgs(file, "Bob")
	for i := range args {
		if args[i] == "--app" {
			args[i], args[i+1] = "--profile", profile
		}
	}
	out, code := cli(t, liveEnv, args...)
	m := decode(t, out)
	l.noteBundle(m)
	l.wantSentVerified(m, code)
	l.wantExactlyOneCopyEach(before, sum)
	bundle, err := evidence.Verify(m["evidence"].(string), evidence.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var read []string
	for _, r := range bundle.Records {
		if r.Target != nil && r.Target.Method == "accessibility_tree" {
			read = append(read, r.Target.Words...)
		}
	}
	if len(read) != 1 || !strings.Contains(read[0], `push button "Open" [`) || !strings.Contains(read[0], "sensitive") || !strings.Contains(read[0], `file chooser "Choose File to Send…"`) {
		t.Fatalf("the evidence records %q from the tree; want the chooser's Open button, sensitive", read)
	}
	t.Logf("read from Gajim's tree: %s", read[0])
}

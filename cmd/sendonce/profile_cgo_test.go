//go:build cgo

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/evidence"
)

// TestDeliverWithAProfileFile: a profile outside the binary drives a (replayed)
// delivery, given as --profile FILE and, again, by name from the profiles folder; each
// bundle records which file it was and what it said.
func TestDeliverWithAProfileFile(t *testing.T) {
	builtin, err := os.ReadFile("../../driver/profiles/gajim.json")
	if err != nil {
		t.Fatal(err)
	}
	// The built-in, as a user's own app: another name, the same behaviour.
	text := strings.Replace(string(builtin), `"app": "gajim"`, `"app": "work-chat"`, 1)
	if text == string(builtin) {
		t.Fatal(`the built-in profile has no "app": "gajim" line to rename`)
	}
	config := t.TempDir()
	folder := filepath.Join(config, "sendonce", "profiles")
	os.MkdirAll(folder, 0o755)
	inFolder := filepath.Join(folder, "work-chat.json")
	outside := filepath.Join(t.TempDir(), "my-profile.json")
	for _, p := range []string{inFolder, outside} {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fx := "../../testdata/fixtures/verified-text-file"
	files, _ := filepath.Glob(filepath.Join(fx, "file", "*"))
	if len(files) != 1 {
		t.Fatalf("fixture files: %v", files)
	}
	content, _ := os.ReadFile(files[0])
	for _, tc := range []struct{ name, source string }{
		{"--profile FILE", outside},
		{"--app NAME from the profiles folder", inFolder},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work := t.TempDir()
			file := filepath.Join(work, filepath.Base(files[0]))
			os.WriteFile(file, content, 0o644)
			store := newStore(t)
			pick := []string{"--profile", outside}
			if tc.source == inFolder {
				pick = []string{"--app", "work-chat"}
			}
			args := append([]string{"--json", "deliver", "--replay", fx, "--store", store, "--to", "Bob", "--file", file,
				"--staging", filepath.Join(work, "staging"), "--sent-item-timeout", "2s"}, pick...)
			out, code := cli(t, []string{"DISPLAY=:replay", "XDG_CONFIG_HOME=" + config, "OMP_THREAD_LIMIT=1"}, args...)
			m := decode(t, out)
			if code != exitOK || m["outcome"] != "sent_verified" {
				t.Fatalf("deliver %s: exit %d\n%s", tc.name, code, describe(m))
			}
			b, err := evidence.Verify(m["evidence"].(string), evidence.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p := b.Manifest.Profile; p == nil || p.Source != tc.source || string(b.Profile) != text {
				t.Fatalf("the bundle's profile: %+v; want the text of %s", p, tc.source)
			}
		})
	}
}

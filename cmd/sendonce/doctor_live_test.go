//go:build cgo

package main

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// TestLiveDoctor: on the test bed, doctor passes every check (exit 0); then, for each
// check, one thing is broken and doctor fails (exit 1) naming exactly that check (and
// what depends on it). It never writes an event to the store.
func TestLiveDoctor(t *testing.T) {
	l := newLive(t)
	config := t.TempDir()
	profiles := filepath.Join(config, "sendonce", "profiles")
	os.MkdirAll(profiles, 0o755)
	builtin, err := os.ReadFile("../../driver/profiles/gajim.json")
	if err != nil {
		t.Fatal(err)
	}
	absent := strings.Replace(strings.Replace(string(builtin), `"app": "gajim"`, `"app": "absent"`, 1), `"process": "gajim"`, `"process": "no-such-process"`, 1)
	os.WriteFile(filepath.Join(profiles, "absent.json"), []byte(absent), 0o644)
	os.WriteFile(filepath.Join(profiles, "broken.json"), []byte(`{"app": "broken", "process": "x"}`), 0o644)
	open := t.TempDir()
	os.Chmod(open, 0o777)
	wrongPassword := filepath.Join(t.TempDir(), "account.json")
	b, _ := json.Marshal(map[string]any{"jid": l.bed.get(t, "ALICE_JID"), "password": "not-the-password",
		"addr": "127.0.0.1:" + l.bed.get(t, "C2S_PORT"), "allow_private_addresses": true})
	os.WriteFile(wrongPassword, b, 0o600)

	events := func() int {
		db, err := sql.Open("sqlite", "file:"+l.store+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int
		if err := db.QueryRow("SELECT count(*) FROM events").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := events()
	private := filepath.Join(t.TempDir(), "staging") // 0700: the test bed's apps run as another user
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change map[string]string // flag -> value
		env    []string
		failed []string
	}{
		{name: "everything in order"},
		{name: "no store", change: map[string]string{"--store": filepath.Join(t.TempDir(), "none.db")}, failed: []string{"store"}},
		{name: "a staging folder others can write", change: map[string]string{"--staging": open}, failed: []string{"staging"}},
		{name: "a staging folder the app's user cannot read", change: map[string]string{"--staging": private}, failed: []string{"app reads snapshots"}},
		{name: "a staging folder deliver would make private", change: map[string]string{"--staging": filepath.Join(t.TempDir(), "not-yet")}, failed: []string{"app reads snapshots"}},
		{name: "an invalid profile", change: map[string]string{"--app": "broken"}, failed: []string{"profile", "window"}},
		{name: "the app is not running", change: map[string]string{"--app": "absent"}, failed: []string{"window"}},
		{name: "no display", change: map[string]string{"--display": ":987"}, failed: []string{"display", "window"}},
		{name: "no OCR language data", env: []string{"TESSDATA_PREFIX=" + t.TempDir()}, failed: []string{"ocr"}},
		{name: "a wrong provider password", change: map[string]string{"--provider-config": wrongPassword}, failed: []string{"provider"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flags := map[string]string{"--store": l.store, "--app": "gajim", "--display": l.bed.display(t), "--staging": l.bed.staging(t), "--provider-config": l.providerConfig()}
			for k, v := range tc.change {
				flags[k] = v
			}
			args := []string{"--json", "doctor"}
			for _, k := range slices.Sorted(func(yield func(string) bool) {
				for k := range flags {
					if !yield(k) {
						return
					}
				}
			}) {
				args = append(args, k, flags[k])
			}
			out, code := cli(t, append([]string{"XDG_CONFIG_HOME=" + config, "OMP_THREAD_LIMIT=1"}, tc.env...), args...)
			res := decodeDoctor(t, out)
			var failed, names []string
			for _, c := range res.Checks {
				names = append(names, c.Name)
				if !c.OK {
					failed = append(failed, c.Name)
					if c.Fix == "" {
						t.Errorf("check %s failed with no fix: %s", c.Name, c.Saw)
					}
				}
			}
			wantCode := exitOK
			if len(tc.failed) > 0 {
				wantCode = 1
			}
			if code != wantCode || !slices.Equal(failed, tc.failed) || res.Ready != (len(tc.failed) == 0) {
				t.Fatalf("exit %d, failed %v; want exit %d, failed %v\n%s", code, failed, wantCode, tc.failed, out)
			}
			for _, n := range []string{"store", "staging", "profile", "display", "window", "ocr", "accessibility", "app reads snapshots", "provider"} {
				afterWindow := n == "ocr" || n == "accessibility" || n == "app reads snapshots"
				if !slices.Contains(names, n) && !(afterWindow && slices.Contains(tc.failed, "window")) && !(n == "app reads snapshots" && slices.Contains(tc.failed, "staging")) {
					t.Errorf("no %s check in %v", n, names)
				}
			}
			for _, c := range res.Checks {
				if c.Name == "accessibility" && !strings.Contains(c.Saw, "org.gajim.Gajim publishes") {
					t.Errorf("the accessibility check saw %q; want Gajim's tree", c.Saw)
				}
			}
		})
	}
	if after := events(); after != before {
		t.Fatalf("the store's event log went from %d to %d events: doctor must write none", before, after)
	}
}

// doctorOutput is what `doctor --json` prints.
type doctorOutput struct {
	Ready  bool
	Checks []doctorCheck
}

type doctorCheck struct {
	Name, Saw, Fix string
	OK             bool
}

func decodeDoctor(t *testing.T, out string) doctorOutput {
	t.Helper()
	var res doctorOutput
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("doctor: %v: %s", err, out)
	}
	return res
}

package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// attemptIn runs one attempt at content for Bob in the store at loc through the CLI:
// a claim, a crossing of send when crossed, and the outcome ("" leaves the lease live).
func attemptIn(t *testing.T, loc, content, task string, crossed bool, outcome string) {
	t.Helper()
	out, code := cli(t, nil, "--json", "gate", "claim", "--store", loc, "--to", "Bob", "--sha256", digest(content), "--task", task)
	if code != 0 {
		t.Fatalf("claim %s in %s: %d %s", content, loc, code, out)
	}
	var c struct {
		Key   string `json:"key"`
		Token uint64 `json:"token"`
	}
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("claim: %v: %s", err, out)
	}
	permit := []string{"--store", loc, "--key", c.Key, "--task", task, "--token", fmt.Sprint(c.Token)}
	if crossed {
		if out, code := cli(t, nil, append([]string{"gate", "cross", "--boundary", "send"}, permit...)...); code != 0 {
			t.Fatalf("cross: %d %s", code, out)
		}
	}
	if outcome != "" {
		if out, code := cli(t, nil, append([]string{"gate", "record", "--outcome", outcome}, permit...)...); code != 0 && code != exitConsumed {
			t.Fatalf("record: %d %s", code, out)
		}
	}
}

// TestStoreCopy: two workstations' SQLite histories move into a shared PostgreSQL store
// that already has one of its own. Keys consumed in either file are refused (3) on
// PostgreSQL after the copy; where two histories know one key the strictest status wins
// (a not_sent in a file does not free a key the target consumed, nor one the other file
// consumed); a fresh key's token is past every copied one. A source with a live lease
// is refused with nothing copied; a copied file is retired: every command on it fails
// closed (5) naming the new store, and so does a second copy of it.
func TestStoreCopy(t *testing.T) {
	a, b := newStore(t), newStore(t)
	pg := newStoreOf(t, "postgres")
	attemptIn(t, a, "unknown in A", "A1", true, "send_status_unknown")
	attemptIn(t, a, "verified in A, not sent in B", "A2", true, "sent_verified")
	attemptIn(t, a, "not sent in A, verified in the target", "A3", false, "not_sent")
	attemptIn(t, a, "not sent anywhere", "A4", false, "not_sent")
	attemptIn(t, b, "verified in A, not sent in B", "B1", false, "not_sent")
	attemptIn(t, b, "rejected in B", "B2", true, "sent_rejected")
	attemptIn(t, pg, "not sent in A, verified in the target", "P1", true, "sent_verified")
	for i := 0; i < 5; i++ { // B's tokens run past the target's
		attemptIn(t, b, fmt.Sprintf("filler %d", i), "B3", false, "not_sent")
	}

	attemptIn(t, b, "live in B", "B4", false, "")
	out, code := cli(t, nil, "--json", "store", "copy", "--from", a, "--from", b, "--to", pg)
	if code != exitHeld || !strings.Contains(out, "live lease") {
		t.Fatalf("a copy while B holds a live lease: %d %s; want 4 naming the lease", code, out)
	}
	if _, code := cli(t, nil, "--json", "status", "--store", b, "--key", titleKey("rejected in B")); code != 0 {
		t.Fatalf("B after the refused copy: exit %d; want it still in use (not retired)", code)
	}
	if out, code := cli(t, nil, "--json", "gate", "claim", "--store", pg, "--to", "Bob", "--sha256", digest("rejected in B"), "--task", "P2"); code != 0 {
		t.Fatalf("a key of B on the target after a refused copy: %d %s; want it free (nothing copied)", code, out)
	} else {
		var c struct {
			Key, Task string
			Token     uint64
		}
		json.Unmarshal([]byte(out), &c)
		cli(t, nil, "gate", "record", "--store", pg, "--key", c.Key, "--task", "P2", "--token", fmt.Sprint(c.Token), "--outcome", "not_sent")
	}
	if out, code := cli(t, nil, "--json", "status", "--store", a, "--key", titleKey("unknown in A")); code != 0 {
		t.Fatalf("A after the refused copy: %d %s; want it untouched (every source is checked before any is copied)", code, out)
	}

	// The live lease ends (recorded not_sent); the copy goes through.
	var live struct {
		Key   string
		Token uint64
	}
	out, _ = cli(t, nil, "--json", "gate", "claim", "--store", b, "--to", "Bob", "--sha256", digest("live in B"), "--task", "B4")
	json.Unmarshal([]byte(out), &live)
	if out, code := cli(t, nil, "gate", "record", "--store", b, "--key", live.Key, "--task", "B4", "--token", fmt.Sprint(live.Token), "--outcome", "not_sent"); code != 0 {
		t.Fatalf("ending B's lease: %d %s", code, out)
	}
	from := []string{"--from", a, "--from", b}
	out, code = cli(t, nil, append(append([]string{"--json", "store", "copy"}, from...), "--to", pg)...)
	if code != 0 {
		t.Fatalf("store copy: %d %s", code, out)
	}
	var res struct {
		Copied []struct {
			Intents, Merged int
			HighestToken    uint64 `json:"highest_token"`
			Retired         bool
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Copied) != len(from)/2 {
		t.Fatalf("copy result: %v %s", err, out)
	}
	highest := uint64(0)
	for _, c := range res.Copied {
		highest = max(highest, c.HighestToken)
		if !c.Retired {
			t.Fatalf("a source not retired: %s", out)
		}
	}

	for content, want := range map[string]int{
		"unknown in A":                          exitConsumed,
		"verified in A, not sent in B":          exitConsumed, // A's verified beats B's not_sent
		"not sent in A, verified in the target": exitConsumed, // the target's verified beats A's not_sent
		"rejected in B":                         exitConsumed,
		"not sent anywhere":                     0,
		"new on the target":                     0,
	} {
		out, code := cli(t, nil, "--json", "gate", "claim", "--store", pg, "--to", "Bob", "--sha256", digest(content), "--task", "after-copy")
		if code != want {
			t.Errorf("claim %q on the target after the copy: %d %s; want %d", content, code, out, want)
		}
		if content == "new on the target" {
			var c struct{ Token uint64 }
			json.Unmarshal([]byte(out), &c)
			if c.Token <= highest {
				t.Errorf("a fresh key's token %d; want past every copied source's highest (%d)", c.Token, highest)
			}
		}
	}
	out, _ = cli(t, nil, "--json", "show", "--store", pg, titleKey("unknown in A"))
	if !strings.Contains(out, `"copied"`) || !strings.Contains(out, `"send_status_unknown"`) {
		t.Errorf("show on the target: %s; want the copied attempt and its copied event", out)
	}

	for _, src := range []string{a, b} {
		out, code := cli(t, nil, "--json", "gate", "claim", "--store", src, "--to", "Bob", "--sha256", digest("after retirement"), "--task", "late")
		if code != exitFailClosed || !strings.Contains(out, "retired") || !strings.Contains(out, "127.0.0.1") {
			t.Errorf("a claim on a retired source: %d %s; want 5, naming the store it went to", code, out)
		}
		if strings.Contains(out, "password") {
			t.Errorf("the retirement names a password: %s", out)
		}
	}
	if out, code := cli(t, nil, "--json", "store", "copy", "--from", b, "--to", pg); code != exitFailClosed || !strings.Contains(out, "retired") {
		t.Errorf("a second copy of a retired file: %d %s; want 5", code, out)
	}
}

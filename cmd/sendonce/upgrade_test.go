package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpgradeNeverReopensAKey starts from a store made by the v1 release (schema 3, v1
// keys; testdata/stores/v1-schema3.db holds report.txt delivered, sent_verified, to
// xmpp:bob@xn--bcher-kva.example, xmpp:alice@ｅｘａｍｐｌｅ.org (full-width, as v1
// kept it), xmpp:bob@localhost with title Bob, and the blank title " "). Nothing but
// init --upgrade migrates it; after the upgrade every spelling of those destinations is
// refused as consumed.
func TestUpgradeNeverReopensAKey(t *testing.T) {
	work := t.TempDir()
	src, err := os.ReadFile("../../testdata/stores/v1-schema3.db")
	if err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(work, "s.db")
	os.WriteFile(store, src, 0o600)
	report := filepath.Join(work, "report.txt")
	os.WriteFile(report, []byte("quarterly report\n"), 0o644)

	run1 := func(args ...string) (map[string]any, int) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		env := &environment{stdout: &stdout, stderr: &stderr, getenv: func(k string) string {
			if k == "SENDONCE_STORE" {
				return store
			}
			return ""
		}}
		code := run(context.Background(), append([]string{"--json"}, args...), env)
		var m map[string]any
		json.Unmarshal(stdout.Bytes(), &m)
		return m, code
	}

	if m, code := run1("status", "--dest-id", "xmpp:bob@localhost", "--file", report); code != exitFailClosed || !strings.Contains(str(m, "error"), "init --upgrade") {
		t.Fatalf("status on a schema-3 store: exit %d %v; want 5 naming init --upgrade", code, m)
	}
	if m, code := run1("init"); code != exitOK || m["upgrade_needed"] != true {
		t.Fatalf("init on a schema-3 store: exit %d %v; want 0 with upgrade_needed, nothing changed", code, m)
	}
	if _, code := run1("status", "--dest-id", "xmpp:bob@localhost", "--file", report); code != exitFailClosed {
		t.Fatalf("plain init migrated the store (status exit %d)", code)
	}
	if m, code := run1("init", "--upgrade"); code != exitOK || m["upgraded"] != true {
		t.Fatalf("init --upgrade: exit %d %v", code, m)
	}
	for _, dest := range [][]string{
		{"--dest-id", "xmpp:bob@xn--bcher-kva.example"}, {"--dest-id", "xmpp:bob@bücher.example"},
		{"--dest-id", "xmpp:Bob@XN--BCHER-KVA.EXAMPLE"}, {"--dest-id", "xmpp:bob@ｂüｃｈｅｒ．example"},
		{"--dest-id", "xmpp:alice@example.org"}, {"--dest-id", "xmpp:alice@ｅｘａｍｐｌｅ.org"}, {"--dest-id", "xmpp:ALICE@Example.Org."},
		{"--dest-id", "xmpp:bob@localhost"}, {"--to", "Bob"}, {"--to", "Bob", "--dest-id", "xmpp:bob@LOCALHOST/phone"},
	} {
		args := append(append([]string{"gate", "claim"}, dest...), "--file", report, "--task", "after-upgrade")
		if m, code := run1(args...); code != exitConsumed {
			t.Errorf("claim %v after the upgrade: exit %d %v; want 3 (consumed under v1)", dest, code, m)
		}
	}
	// A title that shows nothing is no longer accepted at all: it cannot be claimed.
	if m, code := run1("gate", "claim", "--to", " ", "--file", report, "--task", "blank"); code != exitUsage {
		t.Errorf("claim for a blank title after the upgrade: exit %d %v; want 2", code, m)
	}
	// The v1 keys printed before the upgrade still name their intents.
	if m, code := run1("status", "--key", "v1:xmpp:bob@xn--bcher-kva.example:8a3c67892f82af22b58377b8e85bb41899053788d3aa3b81d2e6b4580e917c29"); code != exitOK || m["status"] != "sent_verified" {
		t.Errorf("status of a v1 key after the upgrade: exit %d %v", code, m)
	}
}

// TestUpgradeStopsOnTwoSpellings: the v1 release kept xmpp:bob@xn--bcher-kva.example
// (claimed, never crossed: free once its lease ran out) and xmpp:bob@bücher.example
// (delivered) as two intents (testdata/stores/v1-two-spellings.db). Under v2 they are one
// destination; binding the v2 key to the free one would reopen the delivered one, so the
// upgrade stops, names both, and changes nothing.
func TestUpgradeStopsOnTwoSpellings(t *testing.T) {
	src, err := os.ReadFile("../../testdata/stores/v1-two-spellings.db")
	if err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(t.TempDir(), "s.db")
	os.WriteFile(store, src, 0o600)
	var stdout bytes.Buffer
	env := &environment{stdout: &stdout, stderr: &bytes.Buffer{}, getenv: func(string) string { return "" }}
	code := run(context.Background(), []string{"--json", "--store", store, "init", "--upgrade"}, env)
	var m map[string]any
	json.Unmarshal(stdout.Bytes(), &m)
	if code != exitFailClosed || !strings.Contains(str(m, "error"), "one destination") {
		t.Fatalf("init --upgrade with two v1 spellings of one destination: exit %d %v; want 5 naming them", code, m)
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"--json", "--store", store, "init"}, env); code != exitOK || !strings.Contains(stdout.String(), `"upgrade_needed":true`) {
		t.Fatalf("after the refused upgrade: exit %d %s; want the store unchanged (upgrade still needed)", code, stdout.String())
	}
}

package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/driver"
)

// The --json objects the CLI prints are the contract agents parse: these tests pin them,
// field by field, against testdata/golden/*.json. Values that change from run to run
// (times, dispatch ids, nonces, chain heads of real bundles, the work folder) are
// normalized; everything else, including a missing field versus null versus [], must
// match. Regenerate only on purpose: go test ./cmd/sendonce -run Golden -update-golden.

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden from today's output")

// golden runs sendonce commands in-process with --json and compares each output.
type golden struct {
	t       *testing.T
	work    string
	repo    string // the repository's testdata folder
	ids     map[string]string
	env     map[string]string
	lastRaw map[string]any
}

func newGolden(t *testing.T) *golden {
	t.Helper()
	repo, err := filepath.Abs("../../testdata")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	return &golden{t: t, work: work, repo: repo, ids: map[string]string{},
		env: map[string]string{"SENDONCE_STORE": filepath.Join(work, "sendonce.db"), "HOME": work}}
}

// run runs one command, checks its exit code and compares its output with the golden
// file named name. It returns the raw (not normalized) output object.
func (g *golden) run(name string, wantCode int, args ...string) map[string]any {
	g.t.Helper()
	return g.runCtx(context.Background(), name, wantCode, args...)
}

func (g *golden) runCtx(ctx context.Context, name string, wantCode int, args ...string) map[string]any {
	g.t.Helper()
	var stdout, stderr bytes.Buffer
	env := &environment{stdout: &stdout, stderr: &stderr, getenv: func(k string) string {
		if v, ok := g.env[k]; ok {
			return v
		}
		if k == "SENDONCE_XMPP_JID" || k == "SENDONCE_XMPP_PASSWORD" || k == "SENDONCE_XMPP_ADDR" || k == "SENDONCE_STAGING" {
			return ""
		}
		return os.Getenv(k)
	}}
	code := run(ctx, append([]string{"--json"}, args...), env)
	if code != wantCode {
		g.t.Fatalf("%s: sendonce %s: exit %d, want %d\nstdout: %s\nstderr: %s", name, strings.Join(args, " "), code, wantCode, stdout.String(), stderr.String())
	}
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		g.t.Fatalf("%s: stdout is not one JSON object: %q: %v\nstderr: %s", name, stdout.String(), err, stderr.String())
	}
	if dec.More() {
		g.t.Fatalf("%s: more than one JSON object on stdout: %q", name, stdout.String())
	}
	got := map[string]any{"exit_code": json.Number(itoa(code)), "stdout": g.normalize("", raw)}
	g.compare(name, got)
	g.lastRaw = raw
	return raw
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func (g *golden) compare(name string, got map[string]any) {
	g.t.Helper()
	path := filepath.Join("testdata", "golden", name+".json")
	if *updateGolden {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(got); err != nil {
			g.t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			g.t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		g.t.Fatalf("%s: %v (run with -update-golden to create it)", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var want map[string]any
	if err := dec.Decode(&want); err != nil {
		g.t.Fatalf("%s: %v", path, err)
	}
	if !reflect.DeepEqual(got, want) {
		gb, _ := json.MarshalIndent(got, "", "  ")
		g.t.Errorf("%s: output differs from %s\ngot:\n%s\nwant:\n%s", name, path, gb, b)
	}
}

var (
	timeRE = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)
	id32RE = regexp.MustCompile(`\b[0-9a-f]{32}\b`)
	wsRE   = regexp.MustCompile(`\bws-[a-z2-7]{26}\b`)
	hex64  = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// normalize replaces what changes from run to run with stable placeholders. Ids keep
// their identity across the run (<id#1> is the same dispatch everywhere it appears).
func (g *golden) normalize(key string, v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) { // in order: ids are numbered as met
			out[k] = g.normalize(k, x[k])
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = g.normalize(key, e)
		}
		return out
	case string:
		switch {
		case (key == "chain_head" || key == "head") && hex64.MatchString(x):
			return "<chain-head>"
		case key == "public_key" && x != "":
			return "<public-key>"
		}
		s := strings.ReplaceAll(x, g.work, "$WORK")
		s = strings.ReplaceAll(s, g.repo, "$TESTDATA")
		s = timeRE.ReplaceAllString(s, "<time>")
		s = strings.ReplaceAll(s, "(known: "+strings.Join(driver.KnownApps(), ", ")+")", "(known: <the built-in apps>)") // adding a profile changes no golden
		s = wsRE.ReplaceAllStringFunc(s, g.number("workstation"))
		return id32RE.ReplaceAllStringFunc(s, g.number("id"))
	}
	return v
}

// number replaces an id with <kind#N>, N counting the ids of that kind met so far.
func (g *golden) number(kind string) func(string) string {
	return func(id string) string {
		if p, ok := g.ids[id]; ok {
			return p
		}
		n := 1
		for _, p := range g.ids {
			if strings.HasPrefix(p, "<"+kind+"#") {
				n++
			}
		}
		p := "<" + kind + "#" + itoa(n) + ">"
		g.ids[id] = p
		return p
	}
}

func (g *golden) write(name, content string) string {
	g.t.Helper()
	p := filepath.Join(g.work, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		g.t.Fatal(err)
	}
	return p
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// TestGoldenGateContract pins every gate, status, authorizer, evidence and classify
// command's JSON: success, each refusal, and the error object of each exit code.
func TestGoldenGateContract(t *testing.T) {
	g := newGolden(t)
	report := g.write("report.txt", "quarterly report\n")
	other := g.write("other.txt", "another file\n")
	third := g.write("third.txt", "a third file\n")
	const key = "v1:xmpp:bob@localhost:8a3c67892f82af22b58377b8e85bb41899053788d3aa3b81d2e6b4580e917c29"

	g.run("usage-no-command", 2)
	g.run("usage-unknown-command", 2, "gate", "fly")
	g.run("status-not-initialized", 5, "status", "--to", "Bob", "--file", report)
	g.run("init", 0, "init")
	g.run("init-again", 0, "init")

	g.run("claim-no-destination", 2, "gate", "claim", "--file", report, "--task", "A")
	g.run("claim-invisible-title", 2, "gate", "claim", "--to", "Bob\u200b", "--file", report, "--task", "A")
	g.run("claim-missing-file", 2, "gate", "claim", "--to", "Bob", "--file", filepath.Join(g.work, "nope.txt"), "--task", "A")
	g.run("claim-bad-dest-id", 2, "gate", "claim", "--dest-id", "xmpp:", "--file", report, "--task", "A")
	g.run("claim-granted", 0, "gate", "claim", "--to", "Bob", "--dest-id", "xmpp:Bob@LocalHost/gajim", "--file", report, "--task", "A")
	g.run("claim-held", 4, "gate", "claim", "--to", "Bob", "--file", report, "--task", "B")
	g.run("status-held", 0, "status", "--key", key)
	g.run("check-ok", 0, "gate", "check", "--key", key, "--task", "A", "--token", "1", "--boundary", "open_picker")
	g.run("check-stale-token", 6, "gate", "check", "--key", key, "--task", "A", "--token", "7", "--boundary", "send")
	g.run("check-missing-flags", 2, "gate", "check", "--key", key, "--boundary", "send")
	g.run("cross-not-crossable", 2, "gate", "cross", "--key", key, "--task", "A", "--token", "1", "--boundary", "open_picker")
	g.run("cross-choose-file", 0, "gate", "cross", "--key", key, "--task", "A", "--token", "1", "--boundary", "choose_file", "--chain-head", "aa11")
	g.run("cross-again", 3, "gate", "cross", "--key", key, "--task", "A", "--token", "1", "--boundary", "choose_file")
	g.run("renew", 0, "gate", "renew", "--key", key, "--task", "A", "--token", "1", "--lease", "10m")
	g.run("renew-bad-lease", 2, "gate", "renew", "--key", key, "--task", "A", "--token", "1", "--lease", "-1s")
	g.run("cross-send", 0, "gate", "cross", "--key", key, "--task", "A", "--token", "1", "--boundary", "send")
	g.run("record-bad-outcome", 2, "gate", "record", "--key", key, "--task", "A", "--token", "1", "--outcome", "maybe")
	g.run("record-sent-verified", 0, "gate", "record", "--key", key, "--task", "A", "--token", "1", "--outcome", "sent_verified", "--evidence", "/bundles/x", "--chain-head", "bb22")
	g.run("record-spent-token", 6, "gate", "record", "--key", key, "--task", "A", "--token", "1", "--outcome", "sent_verified")
	g.run("claim-consumed", 3, "gate", "claim", "--to", "Bob", "--file", report, "--task", "C")
	g.run("status-by-file", 0, "status", "--to", "Bob", "--file", report)
	g.run("status-by-key", 0, "status", "--key", "v1:title:Bob:8a3c67892f82af22b58377b8e85bb41899053788d3aa3b81d2e6b4580e917c29")
	g.run("status-both-key-and-file", 2, "status", "--key", key, "--file", report)
	g.run("show", 0, "show", key)
	g.run("show-bad-key", 2, "show", "v9:nonsense")
	g.run("status-missing-store", 5, "status", "--key", key, "--store", filepath.Join(g.work, "none.db"))

	// A not_sent claimed after a crossing is refused and recorded unknown.
	c := g.run("claim-other", 0, "gate", "claim", "--to", "Bob", "--file", other, "--task", "D")
	okey, otok := str(c, "key"), c["token"].(json.Number).String()
	g.run("cross-other", 0, "gate", "cross", "--key", okey, "--task", "D", "--token", otok, "--boundary", "choose_file")
	g.run("record-not-sent-after-crossing", 3, "gate", "record", "--key", okey, "--task", "D", "--token", otok, "--outcome", "not_sent")
	g.run("status-unknown", 0, "status", "--key", okey)

	// A deliberate redelivery with a registered person's signature.
	seed := bytes.Repeat([]byte{7}, ed25519.SeedSize)
	priv := ed25519.NewKeyFromSeed(seed)
	pub := base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))
	privFile := g.write("alice.key", sendonce.PrivateKeyHeader+"\n"+base64.StdEncoding.EncodeToString(seed)+"\n")
	g.run("authorizer-add-bare-refused", 2, "authorizer", "add", "--name", "alice", "--public-key", pub)
	g.run("init-authorizer-bad", 2, "init", "--authorizer", "alice")
	ini := g.run("init-first-authorizer", 0, "init", "--authorizer", "alice="+pub)
	storeID := str(ini, "store_id")
	mallory := base64.StdEncoding.EncodeToString(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize)).Public().(ed25519.PublicKey))
	g.run("init-second-first-authorizer", 2, "init", "--authorizer", "mallory="+mallory)
	g.run("authorizer-keygen", 0, "authorizer", "keygen", "--out", filepath.Join(g.work, "bob.key"))
	g.run("authorizer-keygen-exists", 2, "authorizer", "keygen", "--out", filepath.Join(g.work, "bob.key"))
	bobPub := base64.StdEncoding.EncodeToString(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, ed25519.SeedSize)).Public().(ed25519.PublicKey))
	stmt := filepath.Join(g.work, "add-bob.json")
	g.run("authorizer-statement", 0, "authorizer", "statement", "--store-id", storeID, "--action", "add", "--for", "bob", "--public-key", bobPub,
		"--name", "alice", "--private-key", privFile, "--out", stmt)
	g.run("authorizer-add", 0, "authorizer", "add", "--signed", stmt)
	g.run("authorizer-add-replayed", 2, "authorizer", "add", "--signed", stmt)
	signed := filepath.Join(g.work, "auth.json")
	elsewhere := filepath.Join(g.work, "auth-elsewhere.json")
	g.run("authorizer-sign-other-store", 0, "authorizer", "sign", "--store-id", "ffffffffffffffffffffffffffffffff", "--key", okey, "--revision", "1", "--name", "alice", "--private-key", privFile, "--out", elsewhere)
	g.run("authorize-other-store", 2, "gate", "authorize", "--key", okey, "--reason", "x", "--signed", elsewhere)
	g.run("authorizer-sign", 0, "authorizer", "sign", "--store-id", storeID, "--key", okey, "--revision", "1", "--name", "alice", "--private-key", privFile, "--out", signed)
	g.run("authorize-missing-reason", 2, "gate", "authorize", "--key", okey, "--signed", signed)
	g.run("authorize", 0, "gate", "authorize", "--key", okey, "--reason", "the recipient lost it", "--signed", signed)
	g.run("authorize-replayed", 2, "gate", "authorize", "--key", okey, "--reason", "again", "--signed", signed)
	g.run("claim-after-authorize", 0, "gate", "claim", "--to", "Bob", "--file", other, "--task", "E")

	// An unknown attempt settled by provider evidence.
	c = g.run("claim-third", 0, "gate", "claim", "--dest-id", "xmpp:bob@localhost", "--file", third, "--task", "F", "--lease", "1s")
	tkey, dispatch, ttok := str(c, "key"), str(c, "dispatch_id"), c["token"].(json.Number).String()
	sha := tkey[strings.LastIndex(tkey, ":")+1:]
	g.run("cross-third", 0, "gate", "cross", "--key", tkey, "--task", "F", "--token", ttok, "--boundary", "send")
	g.run("resolve-live-lease", 4, "gate", "resolve", "--dispatch", dispatch, "--provider", "xmpp", "--object", "s1", "--sha256", sha)
	g.run("record-unknown", 0, "gate", "record", "--key", tkey, "--task", "F", "--token", ttok, "--outcome", "send_status_unknown")
	g.run("resolve-missing-flags", 2, "gate", "resolve", "--dispatch", dispatch, "--provider", "xmpp", "--object", "s1")
	g.run("resolve", 0, "gate", "resolve", "--dispatch", dispatch, "--provider", "xmpp", "--object", "s1", "--sha256", sha, "--recipient", "xmpp:bob@localhost")
	g.run("resolve-again", 3, "gate", "resolve", "--dispatch", dispatch, "--provider", "xmpp", "--object", "s1", "--sha256", sha)

	// Reconcile: the title-only unknown attempt cannot be asked about.
	cfg := g.write("alice.json", `{"jid":"alice@localhost","password":"pw","addr":"127.0.0.1:1"}`)
	os.Chmod(cfg, 0o600) // an account file: its password is the user's alone
	g.run("reconcile-no-account", 2, "reconcile")
	g.run("reconcile", 0, "reconcile", "--provider-config", cfg)
	g.run("reconcile-one-key", 0, "reconcile", "--provider-config", cfg, "--key", key)

	// Evidence and classify, first without a store to check against.
	storePath := g.env["SENDONCE_STORE"]
	g.env["SENDONCE_STORE"] = ""
	g.run("verify-intact", 10, "evidence", "verify", filepath.Join(g.repo, "bundles", "intact"))
	g.run("verify-intact-allowed", 0, "evidence", "verify", filepath.Join(g.repo, "bundles", "intact"), "--allow-unauthenticated")
	g.run("verify-v1-allowed", 0, "evidence", "verify", filepath.Join(g.repo, "bundles", "v1", "intact"), "--allow-unauthenticated")
	g.run("verify-intact-against-store", 1, "evidence", "verify", filepath.Join(g.repo, "bundles", "intact"), "--store", storePath)
	g.run("verify-tampered", 1, "evidence", "verify", filepath.Join(g.repo, "bundles", "tampered", "edited-step-byte"))
	g.run("verify-wrong-signature", 1, "evidence", "verify", filepath.Join(g.repo, "bundles", "tampered", "wrong-signature"))
	g.run("verify-missing", 2, "evidence", "verify", filepath.Join(g.work, "nothing"))
	g.run("verify-bad-public-key", 2, "evidence", "verify", filepath.Join(g.repo, "bundles", "intact"), "--public-key", "xx")
	g.run("report", 0, "evidence", "report", filepath.Join(g.repo, "bundles", "intact"), "-o", filepath.Join(g.work, "r.html"))
	g.run("report-no-output", 2, "evidence", "report", filepath.Join(g.repo, "bundles", "intact"))
	g.run("export", 0, "evidence", "export", filepath.Join(g.repo, "bundles", "intact"), "-o", filepath.Join(g.work, "b.tar.gz"))
	g.run("export-bad-name", 2, "evidence", "export", filepath.Join(g.repo, "bundles", "intact"), "-o", filepath.Join(g.work, "b.zip"))
	g.run("verify-export", 0, "evidence", "verify", filepath.Join(g.work, "b.tar.gz"), "--allow-unauthenticated")
	g.run("classify-sent-verified", 0, "classify", filepath.Join(g.repo, "transcripts", "sent_verified", "label-says-unknown"))
	g.run("classify-not-sent", 8, "classify", filepath.Join(g.repo, "transcripts", "not_sent", "wrong-title-stopped"))
	g.run("classify-unknown", 7, "classify", filepath.Join(g.repo, "transcripts", "send_status_unknown", "crash-after-send-pressed"))
	g.run("classify-rejected", 9, "classify", firstDir(t, filepath.Join(g.repo, "transcripts", "sent_rejected")))
	g.run("classify-fail-closed", 1, "classify", filepath.Join(g.repo, "transcripts", "fail_closed", "edited-step"))
	g.run("classify-missing", 2, "classify", filepath.Join(g.work, "nothing"))
}

func firstDir(t *testing.T, dir string) string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.IsDir() {
			return filepath.Join(dir, e.Name())
		}
	}
	t.Fatalf("no transcript folder in %s", dir)
	return ""
}

//go:build cgo

package main

import (
	"database/sql"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestSharedStoreFaults: faults of the database under a running service, each ending
// with the right answer and nothing handed out twice: its backends terminated between
// a crossing and the record (the pool reconnects; the record lands, one crossing), the
// database made read-only (503, nothing granted), the schema altered under it (503),
// and the server unreachable (the CLI fails closed, exit 5).
func TestSharedStoreFaults(t *testing.T) {
	loc := newStoreOf(t, "postgres")
	s := startService(t, svcOptions{store: loc})
	tok := s.token(1)
	db, err := sql.Open("pgx", loc)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	u, _ := url.Parse(loc)
	dbName := strings.TrimPrefix(u.Path, "/")

	p := permitOf(t, s.post("/v1/claim", tok, "c1", claimBody("faults", "one")))
	if r := s.post("/v1/cross", tok, "x1", with(p, "boundary", "send")); r.code != 200 {
		t.Fatalf("cross: %v", r)
	}
	if _, err := db.Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", dbName); err != nil {
		t.Fatal(err)
	}
	if r := s.post("/v1/record", tok, "r1", with(p, "outcome", "send_status_unknown")); r.code != 200 || r.body["outcome"] != "send_status_unknown" {
		t.Fatalf("record after the backends were terminated: %v; want it recorded", r)
	}
	if r := s.post("/v1/cross", tok, "x2", with(p, "boundary", "send")); r.code == 200 || r.result()["replayed"] != true {
		t.Fatalf("a cross after the reconnect: %v; want it refused (the permit ended), replayed", r)
	}

	if _, err := db.Exec("ALTER DATABASE " + dbName + " SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	db.Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", dbName) // new sessions read the setting
	if r := s.post("/v1/claim", tok, "c2", claimBody("read-only", "two")); r.code != 503 || r.body["kind"] != "fail_closed" {
		t.Fatalf("a claim on a read-only database: %v; want 503 fail_closed", r)
	}
	if _, err := db.Exec("ALTER DATABASE " + dbName + " SET default_transaction_read_only = off"); err != nil {
		t.Fatal(err)
	}
	db.Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", dbName)
	if r := s.get("/v1/status?to=Bob&dest_id=xmpp:bob@localhost&sha256="+sha256hex("read-only"), tok); r.code != 200 || !strings.Contains(r.text, `"free"`) {
		t.Fatalf("after the read-only spell: %v; want the key free (nothing granted)", r)
	}

	if _, err := db.Exec("ALTER TABLE sendonce.attempts RENAME COLUMN task TO task_renamed"); err != nil {
		t.Fatal(err)
	}
	if r := s.post("/v1/claim", tok, "c3", claimBody("altered", "three")); r.code != 503 || r.body["kind"] != "fail_closed" {
		t.Fatalf("a claim with the schema altered under the service: %v; want 503 fail_closed", r)
	}

	closed := *u
	closed.Host = freePort(t) // nothing listens there
	r := runSendonce(t, time.Minute, nil, "--json", "--lock-timeout", "2s", "--store", closed.String(), "gate", "claim", "--to", "Bob", "--sha256", digest("unreachable"), "--task", "A")
	if r.code != exitFailClosed {
		t.Fatalf("a claim with the database unreachable: %v; want 5", r)
	}
}

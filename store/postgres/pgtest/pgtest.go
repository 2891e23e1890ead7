// Package pgtest gives tests a fresh PostgreSQL database of their own, on the server
// SENDONCE_TEST_POSTGRES names (scripts/test starts one with testbed/postgres; the
// password is in PGPASSFILE). Without a server the test fails: it never skips.
package pgtest

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// Server is the test server's URL (no password in it).
func Server(t testing.TB) string {
	t.Helper()
	u := os.Getenv("SENDONCE_TEST_POSTGRES")
	if u == "" {
		t.Fatal("no PostgreSQL: `PG_DIR=/tmp/pg testbed/postgres up`, then `set -a; . /tmp/pg/state.env; set +a` (scripts/test does this)")
	}
	return u
}

// Database makes an empty database, dropped when the test ends, and returns its URL.
func Database(t testing.TB) string {
	t.Helper()
	return DatabaseOn(t, Server(t))
}

// DatabaseOn makes an empty database on the server at base (a URL without a password),
// dropped when the test ends, and returns its URL.
func DatabaseOn(t testing.TB, base string) string {
	t.Helper()
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var b [6]byte
	rand.Read(b[:])
	name := "sendonce_test_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("creating a test database: %v", err)
	}
	t.Cleanup(func() {
		if a, err := sql.Open("pgx", base); err == nil {
			a.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
			a.Close()
		}
	})
	u, _ := url.Parse(base)
	u.Path = "/" + name
	return u.String()
}

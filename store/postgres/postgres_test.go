package postgres

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/store/storetest"
)

// These tests need a real PostgreSQL: SENDONCE_TEST_POSTGRES names it (a URL without a
// password; PGPASSFILE holds it). scripts/test starts a throwaway cluster with
// testbed/postgres and sets both. Without one the tests fail: they never skip.

func serverURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("SENDONCE_TEST_POSTGRES")
	if u == "" {
		t.Fatal("no PostgreSQL: run `eval \"$(testbed/postgres up)\"` and export PGPASSFILE and SENDONCE_TEST_POSTGRES (scripts/test does)")
	}
	return u
}

// newDatabase makes an empty database for one test and returns its URL.
func newDatabase(t *testing.T) string {
	t.Helper()
	base := serverURL(t)
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
		a, err := sql.Open("pgx", base)
		if err == nil {
			a.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
			a.Close()
		}
	})
	u, _ := url.Parse(base)
	u.Path = "/" + name
	return u.String()
}

var _ = stdlib.GetDefaultDriver // registers "pgx" with database/sql

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, c *storetest.Clock) store.Backend {
		b, err := Create(context.Background(), newDatabase(t), Options{LockTimeout: 5 * time.Second, clock: func(time.Time) time.Time { return c.Now() }})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

// TestConformanceThroughPgBouncer: the suite again, through PgBouncer in transaction
// pooling mode: nothing the store does may rely on session state.
func TestConformanceThroughPgBouncer(t *testing.T) {
	bouncer := os.Getenv("SENDONCE_TEST_PGBOUNCER")
	if bouncer == "" {
		t.Fatal("no PgBouncer: testbed/postgres up starts one and sets SENDONCE_TEST_PGBOUNCER")
	}
	storetest.Run(t, func(t *testing.T, c *storetest.Clock) store.Backend {
		direct, _ := url.Parse(newDatabase(t))
		u, _ := url.Parse(bouncer)
		u.Path = direct.Path
		b, err := Create(context.Background(), u.String(), Options{LockTimeout: 5 * time.Second, clock: func(time.Time) time.Time { return c.Now() }})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

func TestURLWithPasswordRefused(t *testing.T) {
	for _, u := range []string{"postgres://me:secret@db.example.org/sendonce", "postgres://me@db.example.org/sendonce?password=secret"} {
		if err := CheckURL(u); !errors.Is(err, gate.ErrInvalid) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: %v; want bad input that does not repeat the password", Redacted(u), err)
		}
	}
	if err := CheckURL("postgres://me@db.example.org/sendonce?sslmode=verify-full"); err != nil {
		t.Errorf("a URL without a password: %v", err)
	}
	if got := Redacted("postgres://me@db.example.org:5433/sendonce?sslmode=verify-full"); strings.Contains(got, "secret") || !strings.Contains(got, "db.example.org:5433") {
		t.Errorf("redacted: %s", got)
	}
}

func TestSchemaVersions(t *testing.T) {
	ctx := context.Background()
	u := newDatabase(t)
	if _, err := Open(ctx, u, Options{}); !errors.Is(err, store.ErrNotInitialized) {
		t.Fatalf("open before init: %v; want not initialized", err)
	}
	b, err := Create(ctx, u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	again, err := Create(ctx, u, Options{}) // init twice: the same store, unchanged
	if err != nil {
		t.Fatalf("init again: %v", err)
	}
	again.Close()
	db, _ := sql.Open("pgx", u)
	defer db.Close()
	for _, tc := range []struct {
		version int
		want    error
	}{{SchemaVersion + 1, nil}, {SchemaVersion - 1, store.ErrUpgradeNeeded}} {
		if tc.version == 0 {
			tc.want = store.ErrNotInitialized // no older schema exists yet: 0 reads as none, refused all the same
		}
		if _, err := db.Exec("UPDATE sendonce.schema_version SET version = $1", tc.version); err != nil {
			t.Fatal(err)
		}
		_, err := Open(ctx, u, Options{})
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("schema %d under a binary of %d: %v; want it refused (%v)", tc.version, SchemaVersion, err, tc.want)
		}
	}
}

// TestPausedClaimsOfANewKey: two claims of a never-seen key, the first paused between
// reading the key's intents and binding them while the second commits: exactly one
// grant. The same test with READ COMMITTED gives two, so it can fail.
func TestPausedClaimsOfANewKey(t *testing.T) {
	for _, tc := range []struct {
		name      string
		isolation sql.IsolationLevel
		grants    int
	}{{"serializable", 0, 1}, {"read committed (control)", sql.LevelReadCommitted, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			grants := pausedRace(t, tc.isolation)
			if grants != tc.grants {
				t.Fatalf("%d grants; want %d", grants, tc.grants)
			}
		})
	}
}

func pausedRace(t *testing.T, isolation sql.IsolationLevel) int {
	ctx := context.Background()
	u := newDatabase(t)
	init, err := Create(ctx, u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	init.Close()
	paused, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	a, err := Open(ctx, u, Options{isolation: isolation, pause: func(point string) {
		if point == "after_intents_of" {
			once.Do(func() { close(paused); <-release })
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, u, Options{isolation: isolation})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	id, _ := gate.Title("Bob")
	key := gate.NewKey(id, gate.DigestOf([]byte("a never-seen file")))
	var first store.ClaimResult
	var firstErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		first, firstErr = store.New(a).Claim(ctx, store.ClaimRequest{Keys: []gate.Key{key}, Task: "A"})
	}()
	<-paused
	second, secondErr := store.New(b).Claim(ctx, store.ClaimRequest{Keys: []gate.Key{key}, Task: "B"})
	close(release)
	<-done
	grants := 0
	for _, r := range []struct {
		res store.ClaimResult
		err error
	}{{first, firstErr}, {second, secondErr}} {
		var refusal *gate.Refusal
		switch {
		case r.err == nil && r.res.Granted:
			grants++
		case errors.As(r.err, &refusal):
		default:
			t.Fatalf("a claim neither granted nor refused: %v", r.err)
		}
	}
	return grants
}

var _ = pgx.Serializable

package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/store/postgres/pgtest"
	"github.com/sendonce/sendonce/store/storetest"
)

// These tests need a real PostgreSQL: SENDONCE_TEST_POSTGRES names it (a URL without a
// password; PGPASSFILE holds it). scripts/test starts a throwaway cluster with
// testbed/postgres and sets both. Without one the tests fail: they never skip.

// newDatabase makes an empty database for one test and returns its URL.
func newDatabase(t *testing.T) string { return pgtest.Database(t) }

// initializedDatabase makes an empty database with the sendonce schema in it.
func initializedDatabase(t testing.TB) string {
	t.Helper()
	u := pgtest.Database(t)
	b, err := Create(context.Background(), u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	return u
}

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

// TestSchemaVersions: only init --upgrade migrates, under the lock; a schema older
// than the binary and one newer than it both fail closed until upgraded.
func TestSchemaVersions(t *testing.T) {
	ctx := context.Background()
	u := newDatabase(t)
	if _, err := Open(ctx, u, Options{}); !errors.Is(err, store.ErrNotInitialized) {
		t.Fatalf("open before init: %v; want not initialized", err)
	}
	old, err := Create(ctx, u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := store.New(old).Claim(ctx, store.ClaimRequest{Keys: []gate.Key{gate.NewKey(mustTitle(t), gate.DigestOf([]byte("old")))}, Task: "A"})
	if err != nil || !p.Granted {
		t.Fatalf("a claim: %v", err)
	}
	old.Close()
	downgrade(t, u)
	if _, err := Open(ctx, u, Options{}); !errors.Is(err, store.ErrUpgradeNeeded) {
		t.Fatalf("a schema older than the binary: %v; want upgrade needed (fail closed)", err)
	}
	if _, err := Create(ctx, u, Options{}); !errors.Is(err, store.ErrUpgradeNeeded) {
		t.Fatalf("init without --upgrade on an older schema: %v; want upgrade needed, nothing changed", err)
	}
	// Two upgrades at once: the lock lets one migrate; both end on the new schema.
	var wg sync.WaitGroup
	found := make([]int, 2)
	errs := make([]error, 2)
	for i := range found {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			b, f, err := Upgrade(ctx, u, Options{})
			found[i], errs[i] = f, err
			if err == nil {
				b.Close()
			}
		}(i)
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || found[0]+found[1] != SchemaVersion-1+SchemaVersion {
		t.Fatalf("two upgrades at once: found %v, errors %v; want one from %d and one already at %d", found, errs, SchemaVersion-1, SchemaVersion)
	}
	b, err := Open(ctx, u, Options{})
	if err != nil {
		t.Fatalf("open after the upgrade: %v", err)
	}
	st, err := store.New(b).Status(ctx, []gate.Key{gate.NewKey(mustTitle(t), gate.DigestOf([]byte("old")))})
	if err != nil || st[0].Status != gate.StatusHeld {
		t.Fatalf("the claim made before the upgrade: %v %v; want it kept (held)", st, err)
	}
	b.Close()
	db, _ := sql.Open("pgx", u)
	defer db.Close()
	if _, err := db.Exec("UPDATE sendonce.schema_version SET version = $1", SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, u, Options{}); err == nil || !strings.Contains(err.Error(), "newer than this sendonce") {
		t.Fatalf("a schema newer than the binary: %v; want it refused", err)
	}
	if _, _, err := Upgrade(ctx, u, Options{}); err == nil {
		t.Fatal("an upgrade of a newer schema by an older binary was accepted")
	}
}

// downgrade turns the schema at u into the one before SchemaVersion, as an older
// sendonce made it, keeping what the tables hold.
func downgrade(t *testing.T, u string) {
	t.Helper()
	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, st := range []string{
		"DROP TABLE sendonce.commits",
		"ALTER TABLE sendonce.keys ADD FOREIGN KEY (intent_id) REFERENCES sendonce.intents(id)",
		"ALTER TABLE sendonce.attempts ADD FOREIGN KEY (intent_id) REFERENCES sendonce.intents(id)",
		"ALTER TABLE sendonce.crossings ADD FOREIGN KEY (token) REFERENCES sendonce.attempts(token)",
		"ALTER TABLE sendonce.attempts DROP COLUMN workstation, DROP COLUMN file_name, DROP COLUMN size, DROP COLUMN copied_from, DROP COLUMN source_token",
		fmt.Sprintf("UPDATE sendonce.schema_version SET version = %d", SchemaVersion-1),
	} {
		if _, err := db.Exec(st); err != nil {
			t.Fatal(err)
		}
	}
}

func mustTitle(t *testing.T) gate.Identity {
	id, err := gate.Title("Bob")
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestPausedClaimsOfANewKey: two claims of a never-seen key, the first paused after its
// transaction began and before it wrote anything while the second commits: exactly one
// grant, whether the first binds the key without reading it first (the new-keys
// statement: the key's unique index decides, at any isolation) or reads it first. The
// read-first claims under READ COMMITTED give two, so the test can fail.
func TestPausedClaimsOfANewKey(t *testing.T) {
	for _, tc := range []struct {
		name      string
		isolation sql.IsolationLevel
		readFirst bool
		grants    int
	}{
		{"new-keys statement, serializable", 0, false, 1},
		{"new-keys statement, read committed", sql.LevelReadCommitted, false, 1},
		{"read first, serializable", 0, true, 1},
		{"read first, read committed (control)", sql.LevelReadCommitted, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			grants := pausedRace(t, tc.isolation, tc.readFirst)
			if grants != tc.grants {
				t.Fatalf("%d grants; want %d", grants, tc.grants)
			}
		})
	}
}

func pausedRace(t *testing.T, isolation sql.IsolationLevel, readFirst bool) int {
	ctx := context.Background()
	u := initializedDatabase(t)
	paused, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	point := "before_new_keys"
	if readFirst {
		point = "after_intents_of"
	}
	a, err := Open(ctx, u, Options{isolation: isolation, readKeysFirst: readFirst, pause: func(p string) {
		if p == point {
			once.Do(func() { close(paused); <-release })
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, u, Options{isolation: isolation, readKeysFirst: readFirst})
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

// TestTransactionSettingsAreTheStores: a database configured with synchronous_commit
// off, READ COMMITTED by default and another search_path does not weaken the store: each
// state-changing transaction runs SERIALIZABLE with synchronous_commit on, in the
// sendonce schema, because the store sets them on the transaction itself.
func TestTransactionSettingsAreTheStores(t *testing.T) {
	ctx := context.Background()
	u := newDatabase(t)
	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	name := strings.TrimPrefix(mustParse(t, u).Path, "/")
	for _, st := range []string{"synchronous_commit = off", "default_transaction_isolation = 'read committed'", "search_path = public"} {
		if _, err := db.Exec("ALTER DATABASE " + name + " SET " + st); err != nil {
			t.Fatal(err)
		}
	}
	b, err := Create(ctx, u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var sync, iso, path string
	err = b.Update(ctx, func(tx store.Tx) error {
		q := tx.(*pgTx).SQL
		return q.QueryRowContext(ctx, "SELECT current_setting('synchronous_commit'), current_setting('transaction_isolation'), current_setting('search_path')").Scan(&sync, &iso, &path)
	})
	if err != nil || sync != "on" || iso != "serializable" || path != "sendonce" {
		t.Fatalf("inside a store transaction: synchronous_commit %q, isolation %q, search_path %q (%v); want on, serializable, sendonce", sync, iso, path, err)
	}
	fresh, err := sql.Open("pgx", u) // a new session reads the database's settings
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	var outside string
	fresh.QueryRow("SELECT current_setting('synchronous_commit')").Scan(&outside)
	if outside != "off" {
		t.Fatalf("a new session of the database has synchronous_commit %q; the test must set it off to show anything", outside)
	}
}

func mustParse(t *testing.T, u string) *url.URL {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestClaimRoundTrips: a claim of a new key sends five statements, each one round trip:
// BEGIN; the transaction's settings, time and commit marker; the new intent, its first
// token and the key bound to it; the attempt and the claim's events; COMMIT. (A refused
// claim of the same key tries the new-keys statement, which writes nothing, reads the
// intent's state and records the refusal: the test logs how many it sends.)
func TestClaimRoundTrips(t *testing.T) {
	ctx := context.Background()
	prof := &statementProfile{by: map[string]*statementTime{}}
	b, err := Open(ctx, initializedDatabase(t), Options{tracer: prof})
	if err != nil {
		t.Fatal(err)
	}
	s := store.New(b)
	defer s.Close()
	key := gate.NewKey(mustTitle(t), gate.DigestOf([]byte("round trips")))
	sent := func() (n int, combined bool) {
		prof.mu.Lock()
		defer prof.mu.Unlock()
		for name, st := range prof.by {
			n += st.count
			combined = combined || strings.HasPrefix(name, "WITH w0 AS (INSERT INTO attempts") && strings.Contains(name, "INSERT INTO events")
		}
		return n, combined
	}
	prof.reset()
	if res, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{key}, Task: "A"}); err != nil || !res.Granted {
		t.Fatalf("claim: %+v %v", res, err)
	}
	if n, combined := sent(); n != 5 || !combined {
		t.Errorf("a granted claim of a new key sent %d statements (%v); want 5: its intent, token and key in one, its attempt and events in one", n, slices.Collect(maps.Keys(prof.by)))
	}
	prof.reset()
	var refusal *gate.Refusal
	if _, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{key}, Task: "B"}); !errors.As(err, &refusal) {
		t.Fatalf("a second claim of the key: %v; want a refusal", err)
	}
	n, _ := sent()
	t.Logf("a refused claim sent %d statements", n)
}

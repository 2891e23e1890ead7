package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
		b, err := Create(context.Background(), newDatabase(t), Options{LockTimeout: 5 * time.Second, PrepareStatements: true, clock: func(time.Time) time.Time { return c.Now() }})
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
		q := u.Query()
		q.Set("default_query_exec_mode", "exec") // PgBouncer 1.18 keeps no prepared statements
		u.RawQuery = q.Encode()
		b, err := Create(context.Background(), u.String(), Options{LockTimeout: 5 * time.Second, clock: func(time.Time) time.Time { return c.Now() }})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

// TestPoolerThatLosesPreparedStatements: the errors of a statement prepared on another
// server connection say what to change.
func TestPoolerThatLosesPreparedStatements(t *testing.T) {
	b := &Backend{display: "postgres://db.example.org/sendonce"}
	for _, code := range []string{"26000", "42P05"} {
		err := b.explainPooler(fmt.Errorf("claim: %w", &pgconn.PgError{Code: code, Message: `prepared statement "stmtcache_1" does not exist`}))
		var pe *pgconn.PgError
		if !strings.Contains(err.Error(), "add default_query_exec_mode=exec to the store URL") || !errors.As(err, &pe) {
			t.Errorf("%s: %v; want what to add to the URL, wrapping the server's error", code, err)
		}
	}
	other := &pgconn.PgError{Code: "40001"}
	if err := b.explainPooler(other); err != other {
		t.Errorf("a serialization failure became %v", err)
	}
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
	id, _ := gate.Title("Bob")
	digest := gate.DigestOf([]byte("a never-seen file"))
	one, every := []gate.Key{gate.NewKey(id, digest)}, gate.KeysFor(id, digest) // every: as the API claims
	if len(every) < 2 {
		t.Fatalf("KeysFor gave %d keys: the case of several is not tested", len(every))
	}
	for _, tc := range []struct {
		name      string
		isolation sql.IsolationLevel
		readFirst bool
		keys      []gate.Key
		grants    int
	}{
		{"new-keys statement, serializable", 0, false, one, 1},
		{"new-keys statement, every scheme's key, serializable", 0, false, every, 1},
		{"new-keys statement, read committed", sql.LevelReadCommitted, false, one, 1},
		{"new-keys statement, every scheme's key, read committed", sql.LevelReadCommitted, false, every, 1},
		{"read first, serializable", 0, true, one, 1},
		{"read first, read committed (control)", sql.LevelReadCommitted, true, one, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			grants := pausedRace(t, tc.isolation, tc.readFirst, tc.keys)
			if grants != tc.grants {
				t.Fatalf("%d grants; want %d", grants, tc.grants)
			}
		})
	}
}

func pausedRace(t *testing.T, isolation sql.IsolationLevel, readFirst bool, keys []gate.Key) int {
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
	var first store.ClaimResult
	var firstErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		first, firstErr = store.New(a).Claim(ctx, store.ClaimRequest{Keys: keys, Task: "A"})
	}()
	<-paused
	second, secondErr := store.New(b).Claim(ctx, store.ClaimRequest{Keys: keys, Task: "B"})
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

// TestAliasOfABoundKey: a claim of a new key and an alias already bound (the new-keys
// statement binds the new one, then deletes it again: not all went in) reaches the
// alias's intent, binds the new key to it, and leaves no key bound to an intent that
// does not exist.
func TestAliasOfABoundKey(t *testing.T) {
	ctx := context.Background()
	u := initializedDatabase(t)
	b, err := Open(ctx, u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := store.New(b)
	defer s.Close()
	digest := gate.DigestOf([]byte("report"))
	title := gate.NewKey(mustTitle(t), digest)
	dest, err := gate.ProviderID("xmpp:bob@localhost")
	if err != nil {
		t.Fatal(err)
	}
	strong := gate.NewKey(dest, digest)
	first, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{title}, Task: "A"})
	if err != nil || !first.Granted {
		t.Fatalf("first claim: %+v %v", first, err)
	}
	var refusal *gate.Refusal
	if _, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{strong, title}, Task: "B"}); !errors.As(err, &refusal) {
		t.Fatalf("a claim of a new key and the held one: %v; want a refusal", err)
	}
	if _, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{strong}, Task: "C"}); !errors.As(err, &refusal) {
		t.Fatalf("a claim of the new key alone: %v; want a refusal (it is bound to the held intent)", err)
	}
	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var dangling, intents int
	if err := db.QueryRow(`SELECT count(*) FROM sendonce.keys k WHERE NOT EXISTS (SELECT 1 FROM sendonce.intents i WHERE i.id = k.intent_id)`).Scan(&dangling); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM sendonce.intents`).Scan(&intents); err != nil {
		t.Fatal(err)
	}
	if dangling != 0 || intents != 1 {
		t.Errorf("%d keys bound to no intent, %d intents; want 0 and 1", dangling, intents)
	}
}

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

// TestClaimRoundTrips: a claim of a new key makes three round trips: BEGIN with the
// transaction's settings, time and commit marker; the new intent, its first token and
// the key bound to it; the attempt and the claim's events (one statement) with COMMIT.
// (A refused claim of the same key tries the new-keys statement, which writes nothing,
// reads the intent's state and records the refusal: the test logs what it sends.)
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
	trips := func() (names []string) {
		prof.mu.Lock()
		defer prof.mu.Unlock()
		for name, st := range prof.by {
			for range st.count {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		return names
	}
	prof.reset()
	if res, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{key}, Task: "A"}); err != nil || !res.Granted {
		t.Fatalf("claim: %+v %v", res, err)
	}
	got := trips()
	lastWrites := slices.ContainsFunc(got, func(name string) bool {
		return strings.HasPrefix(name, "WITH w0 AS (INSERT INTO attempts") && strings.Contains(name, "INSERT INTO events") && strings.HasSuffix(name, " + COMMIT")
	})
	begun := slices.ContainsFunc(got, func(name string) bool { return strings.HasPrefix(name, "BEGIN + WITH marker AS") })
	if len(got) != 3 || !lastWrites || !begun || prof.statements != 3 {
		t.Errorf("a granted claim of a new key made %d round trips of %d statements:\n%s\nwant 3 of 3: BEGIN with its settings; its intent, token and key; its attempt and events with COMMIT", len(got), prof.statements, strings.Join(got, "\n"))
	}
	prof.reset()
	var refusal *gate.Refusal
	if _, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{key}, Task: "B"}); !errors.As(err, &refusal) {
		t.Fatalf("a second claim of the key: %v; want a refusal", err)
	}
	t.Logf("a refused claim made %d round trips of %d statements", prof.roundTrips(), prof.statements)
}

// TestCommitAnsweredRollback: a transaction whose statement failed (its error dropped,
// as a bug in the store's own code would) ends in a COMMIT the server answers with
// ROLLBACK: Update fails, and nothing of it is kept.
func TestCommitAnsweredRollback(t *testing.T) {
	ctx := context.Background()
	b, err := Open(ctx, initializedDatabase(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = b.Update(ctx, func(tx store.Tx) error {
		pt := tx.(*pgTx)
		pt.SQL.ExecContext(pt.Context(), "INSERT INTO authorizers (name, public_key, added_at) VALUES ('x', '\\x00', 0)")
		pt.SQL.ExecContext(pt.Context(), "SELECT 1/0") // its error dropped: the transaction is aborted
		return nil
	})
	if !errors.Is(err, errCommitRolledBack) {
		t.Fatalf("Update after a failed statement: %v; want the COMMIT's ROLLBACK reported", err)
	}
	var n int
	if err := b.View(ctx, func(tx store.Tx) error { var err error; n, err = tx.AuthorizerCount(); return err }); err != nil || n != 0 {
		t.Fatalf("%d authorizers, %v; want none kept", n, err)
	}
}

// TestDefiniteErrors: only an ERROR the server answered, or a COMMIT answered with
// ROLLBACK, says the transaction did not land; a FATAL or PANIC (after which a COMMIT
// written to the log may yet land) and a lost connection do not.
func TestDefiniteErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Severity: "ERROR", Code: "40001"}, true},
		{&pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "23505"}, true},
		{errCommitRolledBack, true},
		{&pgconn.PgError{Severity: "PANIC", SeverityUnlocalized: "PANIC", Code: "58030"}, false},
		{&pgconn.PgError{Severity: "FATAL", Code: "57P01"}, false},
		{&pgconn.PgError{Severity: "ERROR", Code: "08006"}, false},
		{io.ErrUnexpectedEOF, false},
	} {
		if got := definite(tc.err); got != tc.want {
			t.Errorf("definite(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
}

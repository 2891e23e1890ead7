package main

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/store/postgres/pgtest"
)

// The tests that run on SQLite run on PostgreSQL too, from the same code: each takes its
// store from newStoreOf. SENDONCE_TEST_POSTGRES names the server (scripts/test starts a
// throwaway cluster with testbed/postgres; PGPASSFILE holds the password). Without it
// the PostgreSQL runs fail: they never skip.

// storeKinds are the backends the shared tests run on.
var storeKinds = []string{"sqlite", "postgres"}

// newStoreOf makes a fresh initialized store of kind and returns its location. A
// PostgreSQL store is a database of its own; the test's workstation state goes to a
// folder of its own (SENDONCE_STATE_DIR), since a shared store has none.
func newStoreOf(t *testing.T, kind string) string {
	t.Helper()
	if kind == "sqlite" {
		return newStore(t)
	}
	loc := newPostgresDatabase(t)
	t.Setenv("SENDONCE_STATE_DIR", t.TempDir())
	if out, code := cli(t, nil, "init", "--store", loc); code != 0 {
		t.Fatalf("init on PostgreSQL: %d %s", code, out)
	}
	return loc
}

// newPostgresDatabase makes an empty database, dropped when the test ends, and returns
// its URL (no password: PGPASSFILE).
func newPostgresDatabase(t testing.TB) string { return pgtest.Database(t) }

// privatePostgres starts a PostgreSQL cluster of the test's own (testbed/postgres, in
// a folder beside the shared test cluster's), for faults that would hit other tests'
// databases: it returns the server's URL and a restart. PGPASSFILE names its password
// for the rest of the test.
func privatePostgres(t *testing.T) (server string, restart func()) {
	t.Helper()
	main := filepath.Dir(os.Getenv("PGPASSFILE")) // the shared cluster's PG_DIR
	if os.Getenv("PGPASSFILE") == "" {
		t.Fatal("no PGPASSFILE: start the shared test cluster first (scripts/test does)")
	}
	dir := filepath.Join(filepath.Dir(main), fmt.Sprintf(".postgres-%s-%d", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), os.Getpid()))
	script := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command("../../testbed/postgres", args...)
		cmd.Env = append(os.Environ(), "PG_DIR="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("testbed/postgres %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	t.Cleanup(func() {
		cmd := exec.Command("../../testbed/postgres", "down")
		cmd.Env = append(os.Environ(), "PG_DIR="+dir)
		cmd.Run()
	})
	for _, line := range strings.Split(string(script("up")), "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "SENDONCE_TEST_POSTGRES":
			server = v
		case "PGPASSFILE":
			t.Setenv("PGPASSFILE", v)
		}
	}
	if server == "" {
		t.Fatal("testbed/postgres up printed no server")
	}
	return server, func() { script("restart") }
}

// corruptPostgres makes a shared store unreadable: its schema is renamed away.
func corruptPostgres(loc string) error {
	db, err := sql.Open("pgx", loc)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec("ALTER SCHEMA sendonce RENAME TO sendonce_broken")
	return err
}

// TestSharedStoreSchemaRule: on PostgreSQL as on SQLite, only 'init --upgrade' migrates:
// a schema older than the binary fails closed (5) naming the upgrade, init alone
// changes nothing, init --upgrade migrates and keeps what was decided; a schema newer
// than the binary fails closed too.
func TestSharedStoreSchemaRule(t *testing.T) {
	loc := newStoreOf(t, "postgres")
	sha, key := digest("before the upgrade"), titleKey("before the upgrade")
	if out, code := cli(t, nil, "gate", "claim", "--store", loc, "--to", "Bob", "--sha256", sha, "--task", "A"); code != 0 {
		t.Fatalf("claim: %d %s", code, out)
	}
	db, err := sql.Open("pgx", loc)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Schema 2 is schema 3 without the commit markers and the attempts' origins.
	if _, err := db.Exec("DROP TABLE sendonce.commits; ALTER TABLE sendonce.keys ADD FOREIGN KEY (intent_id) REFERENCES sendonce.intents(id); ALTER TABLE sendonce.attempts ADD FOREIGN KEY (intent_id) REFERENCES sendonce.intents(id); ALTER TABLE sendonce.crossings ADD FOREIGN KEY (token) REFERENCES sendonce.attempts(token); ALTER TABLE sendonce.attempts DROP COLUMN workstation, DROP COLUMN file_name, DROP COLUMN size, DROP COLUMN copied_from, DROP COLUMN source_token; UPDATE sendonce.schema_version SET version = 2"); err != nil {
		t.Fatal(err)
	}
	out, code := cli(t, nil, "--json", "status", "--store", loc, "--key", key)
	if code != exitFailClosed || !strings.Contains(out, "init --upgrade") {
		t.Fatalf("status on an older schema: %d %s; want 5 naming init --upgrade", code, out)
	}
	if out, code := cli(t, nil, "--json", "init", "--store", loc); code != 0 || !strings.Contains(out, `"upgrade_needed":true`) {
		t.Fatalf("init on an older schema: %d %s; want upgrade_needed, nothing changed", code, out)
	}
	if out, code := cli(t, nil, "--json", "init", "--upgrade", "--store", loc); code != 0 || !strings.Contains(out, `"upgraded":true`) {
		t.Fatalf("init --upgrade: %d %s", code, out)
	}
	if out, code := cli(t, nil, "gate", "claim", "--store", loc, "--to", "Bob", "--sha256", sha, "--task", "B"); code != exitHeld {
		t.Fatalf("a claim after the upgrade: %d %s; want 4 (A's claim kept)", code, out)
	}
	if _, err := db.Exec("UPDATE sendonce.schema_version SET version = 99"); err != nil {
		t.Fatal(err)
	}
	if out, code := cli(t, nil, "--json", "status", "--store", loc, "--key", key); code != exitFailClosed || !strings.Contains(out, "newer than this sendonce") {
		t.Fatalf("status on a newer schema: %d %s; want 5", code, out)
	}
	if out, _ := cli(t, nil, "--json", "status", "--store", loc, "--key", key); strings.Contains(out, os.Getenv("PGPASSFILE")) && os.Getenv("PGPASSFILE") != "" {
		t.Fatal("the answer names the password file")
	}
}

// TestRolledBackStoreFailsClosed: a store restored from a backup taken before some
// grants is behind this workstation's fencing floor: every claim fails closed (5) and
// names the rollback, on SQLite and on PostgreSQL.
func TestRolledBackStoreFailsClosed(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			loc := newStoreOf(t, kind)
			claim := func(content, task string) (string, int) {
				return cli(t, nil, "--json", "gate", "claim", "--store", loc, "--to", "Bob", "--sha256", digest(content), "--task", task)
			}
			if out, code := claim("one", "A"); code != 0 {
				t.Fatalf("claim: %d %s", code, out)
			}
			backup, restore := backupOf(t, kind, loc)
			backup()
			for _, c := range []string{"two", "three"} {
				if out, code := claim(c, "B"); code != 0 {
					t.Fatalf("claim %s: %d %s", c, code, out)
				}
			}
			restore()
			out, code := claim("four", "C")
			if code != exitFailClosed || !strings.Contains(out, "rolled back") {
				t.Fatalf("a claim on the restored store: %d %s; want 5, rolled back", code, out)
			}
			// The key "two" was granted before the restore: it must not be granted again.
			if _, code := claim("two", "D"); code != exitFailClosed {
				t.Fatalf("a key granted before the restore: exit %d; want 5", code)
			}
		})
	}
}

// backupOf returns a backup and a restore of a store: its files, or pg_dump/pg_restore.
func backupOf(t *testing.T, kind, loc string) (backup, restore func()) {
	t.Helper()
	dir := t.TempDir()
	if kind == "sqlite" {
		files := []string{"", "-wal", "-shm"}
		return func() {
				for _, f := range files {
					if b, err := os.ReadFile(loc + f); err == nil {
						os.WriteFile(filepath.Join(dir, "copy"+f), b, 0o600)
					}
				}
			}, func() {
				for _, f := range files {
					os.Remove(loc + f)
					if b, err := os.ReadFile(filepath.Join(dir, "copy"+f)); err == nil {
						os.WriteFile(loc+f, b, 0o600)
					}
				}
			}
	}
	bin := os.Getenv("PG_BIN")
	dump := filepath.Join(dir, "dump")
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(filepath.Join(bin, name), args...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	return func() { run("pg_dump", "-Fc", "-n", "sendonce", "-f", dump, "-d", loc) },
		func() { run("pg_restore", "--clean", "--if-exists", "-d", loc, dump) }
}

// TestSharedStoreClockSkew: two workstations whose clocks are 20 minutes apart (shifted
// by −10 and +10 minutes) share a store. Leases are measured by the database's clock, so
// the fast one is refused while the slow one's lease lives, takes over only after it,
// and the slow one is then fenced. The control, with leases measured by each
// workstation's own clock, lets the fast one take a live lease: the test can fail.
func TestSharedStoreClockSkew(t *testing.T) {
	for _, tc := range []struct {
		name         string
		onClock      bool
		wantTakeover int // the fast workstation's claim while the slow one's lease lives
	}{{"database clock", false, exitHeld}, {"workstation clocks (control)", true, exitOK}} {
		t.Run(tc.name, func(t *testing.T) {
			loc := newStoreOf(t, "postgres")
			slow, fast := []string{"SENDONCE_TEST_CLOCK_SHIFT=-10m"}, []string{"SENDONCE_TEST_CLOCK_SHIFT=10m"}
			if tc.onClock {
				slow, fast = append(slow, "SENDONCE_TEST_LEASES_ON_CLOCK=1"), append(fast, "SENDONCE_TEST_LEASES_ON_CLOCK=1")
			}
			sha, key := digest("skewed"), titleKey("skewed")
			if out, code := cli(t, slow, "gate", "claim", "--store", loc, "--to", "Bob", "--sha256", sha, "--task", "slow", "--lease", "2s"); code != 0 {
				t.Fatalf("the slow workstation's claim: %d %s", code, out)
			}
			out, code := cli(t, fast, "gate", "claim", "--store", loc, "--to", "Bob", "--sha256", sha, "--task", "fast")
			if code != tc.wantTakeover {
				t.Fatalf("the fast workstation's claim during the lease: exit %d (%s); want %d", code, out, tc.wantTakeover)
			}
			if tc.onClock {
				return
			}
			time.Sleep(2200 * time.Millisecond) // the lease runs out on the database's clock: semantics, not speed
			if out, code := cli(t, fast, "gate", "claim", "--store", loc, "--to", "Bob", "--sha256", sha, "--task", "fast"); code != 0 {
				t.Fatalf("the fast workstation after the lease: %d %s; want the takeover", code, out)
			}
			if out, code := cli(t, slow, "gate", "cross", "--store", loc, "--key", key, "--task", "slow", "--token", "1", "--boundary", "send"); code != exitStale {
				t.Fatalf("the slow workstation's cross after the takeover: %d %s; want 6 (fenced)", code, out)
			}
		})
	}
}

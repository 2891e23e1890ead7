package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, c *storetest.Clock) store.Backend {
		path := filepath.Join(t.TempDir(), "sendonce.db")
		b, err := Create(context.Background(), path, Options{Clock: c.Now})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

// newBackend is a new store in the test's folder, closed when the test ends.
func newBackend(t *testing.T) *Backend {
	t.Helper()
	b, err := Create(context.Background(), filepath.Join(t.TempDir(), "s.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func claimOne(t *testing.T, b store.Backend) error {
	t.Helper()
	id, _ := gate.Title("Bob")
	s := store.New(b)
	res, err := s.Claim(context.Background(), store.ClaimRequest{Keys: []gate.Key{gate.NewKey(id, gate.DigestOf([]byte("x")))}, Task: "A"})
	if err == nil || res.Granted {
		t.Fatalf("claim granted on a faulty store: %+v", res)
	}
	return err
}

func TestOpenFailsClosed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o600)
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, []byte("this is not a database, it is a grocery list, long enough to matter"), 0o600)
	foreign := filepath.Join(dir, "foreign.db")
	if fb, err := open(foreign, Options{}, "rwc"); err != nil {
		t.Fatal(err)
	} else {
		fb.db.Exec("CREATE TABLE t (x)")
		fb.Close()
	}
	newer := filepath.Join(dir, "newer.db")
	if nb, err := Create(ctx, newer, Options{}); err != nil {
		t.Fatal(err)
	} else {
		nb.db.Exec("PRAGMA user_version = 99")
		nb.Close()
	}
	for name, tc := range map[string]struct {
		path string
		want string
	}{
		"missing":   {filepath.Join(dir, "nope.db"), "does not exist"},
		"directory": {dir, "directory"},
		"empty":     {empty, "empty"},
		"garbage":   {garbage, "not a database"},
		"foreign":   {foreign, "no sendonce store"},
		"too new":   {newer, "newer than this sendonce"},
	} {
		b, err := Open(ctx, tc.path, Options{})
		if err == nil {
			b.Close()
			t.Errorf("%s: opened; want an error", name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want it to say %q", name, err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "nope.db")); !errors.Is(err, os.ErrNotExist) {
		t.Error("Open created a missing store")
	}
}

func TestLockedPastTimeoutFailsClosed(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	holder, err := Create(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	tx, err := holder.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	b, err := Open(ctx, path, Options{LockTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := claimOne(t, b); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("claim on a locked store: %v; want ErrUnavailable", err)
	}
}

func TestEventLogIsAppendOnly(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t)
	id, _ := gate.Title("Bob")
	if _, err := store.New(b).Claim(ctx, store.ClaimRequest{Keys: []gate.Key{gate.NewKey(id, gate.Digest{})}, Task: "A"}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"UPDATE events SET kind = 'x'", "DELETE FROM events", "UPDATE token_counter SET last = 0"} {
		if _, err := b.db.Exec(q); err == nil {
			t.Errorf("%s succeeded; the log and the token counter must refuse it", q)
		}
	}
}

// TestOnlyUpgradeMigrates: a store on an older schema is refused by Open (fail closed,
// naming init --upgrade) and migrated only by Upgrade.
func TestOnlyUpgradeMigrates(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	old, err := open(path, Options{}, "rwc")
	if err != nil {
		t.Fatal(err)
	}
	old.db.Exec("PRAGMA journal_mode=WAL")
	if _, err := old.db.Exec(migrations()[0]); err != nil {
		t.Fatal(err)
	}
	old.db.Exec("PRAGMA user_version = 1")
	old.Close()
	if b, err := Open(ctx, path, Options{}); !errors.Is(err, store.ErrUpgradeNeeded) || !strings.Contains(err.Error(), "init --upgrade") {
		if b != nil {
			b.Close()
		}
		t.Fatalf("open a schema-1 store: %v; want ErrUpgradeNeeded naming init --upgrade", err)
	}
	var v int
	probe, _ := open(path, Options{}, "rw")
	probe.db.QueryRow("PRAGMA user_version").Scan(&v)
	probe.Close()
	if v != 1 {
		t.Fatalf("schema %d after a refused open; Open must not migrate", v)
	}
	b, found, err := Upgrade(ctx, path, Options{})
	if err != nil || found != 1 {
		t.Fatalf("upgrade a schema-1 store: found %d, %v", found, err)
	}
	defer b.Close()
	b.db.QueryRow("PRAGMA user_version").Scan(&v)
	if v != SchemaVersion {
		t.Fatalf("schema %d after upgrade; want %d", v, SchemaVersion)
	}
	if _, err := store.New(b).AcquireDisplay(ctx, ":1", "A", time.Minute); err != nil {
		t.Fatalf("the migrated store lacks display leases: %v", err)
	}
}

// TestCreateNeverAdopts: Create makes a new file, 0600, and refuses one that exists
// (a link included).
func TestCreateNeverAdopts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	b, err := Create(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("store mode %04o; want 0600", fi.Mode().Perm())
	}
	if _, err := Create(ctx, path, Options{}); err == nil {
		t.Fatal("Create over an existing store succeeded")
	}
	link := filepath.Join(dir, "link.db")
	os.Symlink(filepath.Join(dir, "elsewhere.db"), link)
	if _, err := Create(ctx, link, Options{}); err == nil {
		t.Fatal("Create through a planted symbolic link succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "elsewhere.db")); err == nil {
		t.Fatal("Create followed the link")
	}
}

// TestReplacedFileFailsClosed: a long-lived process whose store file was moved away and
// replaced (a restore from a backup, say) stops deciding, naming what to do, rather
// than go on with a file nobody else reads.
func TestReplacedFileFailsClosed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	b, err := Create(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.View(ctx, func(store.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, filepath.Join(dir, "moved.db")); err != nil {
		t.Fatal(err)
	}
	other, err := Create(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	other.Close()
	err = claimOne(t, b)
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "restart this process") {
		t.Fatalf("claim on a replaced store file: %v; want ErrUnavailable naming the restart", err)
	}
}

// TestEndedTransactionsLeaveTheConnectionClean: the backend begins and ends its
// transactions itself on one connection, so every way a transaction can end without
// committing must roll it back and leave that connection outside any transaction:
// a wait for the write lock cut short by ctx, fn failing, fn panicking, ctx ending
// during fn (of a write, and of a read). Nothing of any of them is kept, and the next
// claim is granted. (A BEGIN that took effect though it reported ctx's end is rolled
// back by the same deferred ROLLBACK; no test here makes the driver do that.)
func TestEndedTransactionsLeaveTheConnectionClean(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	b, err := Create(ctx, path, Options{LockTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s := store.New(b)
	id, _ := gate.Title("Bob")
	key := func(name string) []gate.Key { return []gate.Key{gate.NewKey(id, gate.DigestOf([]byte(name)))} }
	insertIntent := func(tx store.Tx) error { _, err := tx.NewIntent(tx.Now()); return err }

	// Another connection holds the write lock; the claim's BEGIN IMMEDIATE waits until
	// its ctx ends (well before the 10 s lock timeout).
	holder, err := sql.Open("sqlite", dataSource(b.path, "rw", time.Second, "FULL"))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	hold, err := holder.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = s.Claim(short, store.ClaimRequest{Keys: key("waited"), Task: "A"})
	cancel()
	hold.Rollback()
	if err == nil || !strings.Contains(err.Error(), context.DeadlineExceeded.Error()) {
		t.Fatalf("a claim whose ctx ended while it waited for the write lock: %v; want it to end with its ctx (not at the 10 s lock timeout), nothing granted", err)
	}

	if err := b.Update(ctx, func(tx store.Tx) error {
		if err := insertIntent(tx); err != nil {
			return err
		}
		return errors.New("fn fails")
	}); err == nil || err.Error() != "fn fails" {
		t.Fatalf("Update with a failing fn: %v", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not reach the caller")
			}
		}()
		b.Update(ctx, func(tx store.Tx) error {
			insertIntent(tx)
			panic("fn panics")
		})
	}()
	gone, cancelGone := context.WithCancel(ctx)
	if err := b.Update(gone, func(tx store.Tx) error {
		cancelGone()
		return insertIntent(tx)
	}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Update whose ctx ended during fn: %v; want context.Canceled, nothing committed", err)
	}

	readGone, cancelRead := context.WithCancel(ctx)
	var statementErr error
	if err := b.View(readGone, func(tx store.Tx) error {
		cancelRead()
		_, statementErr = tx.IntentsOf([]string{"k"})
		return nil
	}); !errors.Is(err, context.Canceled) || !errors.Is(statementErr, context.Canceled) {
		t.Fatalf("View whose ctx ended during fn: %v, its statement after the end: %v; want context.Canceled for both", err, statementErr)
	}

	var intents int
	if err := holder.QueryRow("SELECT count(*) FROM intents").Scan(&intents); err != nil || intents != 0 {
		t.Fatalf("%d intents kept (%v): none of the ended transactions may keep anything", intents, err)
	}
	if res, err := s.Claim(ctx, store.ClaimRequest{Keys: key("after"), Task: "A"}); err != nil || !res.Granted {
		t.Fatalf("a claim after the ended transactions: %+v %v; the connection must be clean", res, err)
	}
	if res, err := s.Claim(ctx, store.ClaimRequest{Keys: key("waited"), Task: "B"}); err != nil || !res.Granted || res.Previous != gate.StatusFree {
		t.Fatalf("the key whose claim was cut short: %+v %v; want it granted as never claimed", res, err)
	}
}

// TestWaitingForTheConnectionEndsWithCtx: one transaction at a time runs on the
// backend's connection; a caller waiting for its turn gives up when its ctx ends, not
// when the transaction ahead of it does.
func TestWaitingForTheConnectionEndsWithCtx(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t)
	inside, release := make(chan struct{}), make(chan struct{})
	go b.Update(ctx, func(store.Tx) error {
		close(inside)
		<-release
		return nil
	})
	<-inside
	stop := time.AfterFunc(10*time.Second, func() { close(release) }) // never hang the test
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err := b.View(short, func(store.Tx) error { return nil })
	waited := !stop.Stop() // the transaction ahead was let go first: the View waited for it
	if !waited {
		close(release)
	}
	if waited || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a View waiting behind a running transaction: %v, returned only after it ended: %v; want it to end with its ctx, at once", err, waited)
	}
}

// TestCloseDuringATransaction: Close waits for a transaction running in another
// goroutine, whose commit may wake the checkpointer as Close stops it, and every
// transaction after Close fails closed, saying so.
func TestCloseDuringATransaction(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t)
	b.checkpoints.commits.Store(b.checkpoints.every - 1) // this commit wakes it
	inside, release, committed := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		committed <- b.Update(ctx, func(tx store.Tx) error {
			close(inside)
			<-release
			_, err := tx.NewIntent(tx.Now())
			return err
		})
	}()
	<-inside
	closed := make(chan error)
	go func() { closed <- b.Close() }()
	time.Sleep(50 * time.Millisecond) // let Close stop the checkpointer and wait for the turn
	close(release)
	if err := <-committed; err != nil {
		t.Fatalf("the transaction Close waited for: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := b.View(ctx, func(store.Tx) error { return nil }); !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("a View after Close: %v; want ErrUnavailable saying the store was closed", err)
	}
}

// TestARollbackThatFailsClosesTheStore: if a transaction cannot be rolled back it may
// still hold the write lock against every process, so the backend closes its
// connection and refuses every later transaction, naming what to do.
func TestARollbackThatFailsClosesTheStore(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t)
	err := b.Update(ctx, func(tx store.Tx) error {
		b.conn.Close() // what a broken connection looks like to ROLLBACK
		return errors.New("fn fails")
	})
	if err == nil {
		t.Fatal("the transaction succeeded")
	}
	err = b.Update(ctx, func(store.Tx) error { return nil })
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "could not be rolled back") || !strings.Contains(err.Error(), "restart") {
		t.Fatalf("the next transaction: %v; want ErrUnavailable naming the failed rollback and a restart", err)
	}
}

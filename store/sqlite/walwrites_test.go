package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/store/internal/sqltx"
)

// gatheringAndPlain opens one new store twice, closed when the test ends: once
// gathering its WAL writes, once writing each frame as SQLite does.
func gatheringAndPlain(t *testing.T) (path string, gathering, plain *Backend) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "s.db")
	gathering, err := Create(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gathering.Close() })
	plain, err = Open(context.Background(), path, Options{writeEachFrame: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })
	return path, gathering, plain
}

// A store whose WAL writes are gathered (walwrites.go) is still a plain SQLite file that
// a process writing each frame itself (an older sendonce, the sqlite3 shell) can share:
// each sees every commit of the other as soon as it is answered, and a transaction too
// big to gather in memory (a migration, a copy) lands whole.
func TestGatheredAndPlainWritersShareAStore(t *testing.T) {
	ctx := context.Background()
	path, gathering, plain := gatheringAndPlain(t)
	stores := []*store.Store{store.New(gathering), store.New(plain)}

	id, _ := gate.Title("Bob")
	for i := range 200 {
		k := gate.NewKey(id, gate.DigestOf(fmt.Appendf(nil, "file %d", i)))
		mine, other := stores[i%2], stores[(i+1)%2]
		if res, err := mine.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{k}, Task: "A"}); err != nil || !res.Granted {
			t.Fatalf("claim %d: %v %+v", i, err, res)
		}
		res, err := other.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{k}, Task: "B"})
		if !errors.Is(err, gate.ErrHeld) || res.Granted || res.Refusal == nil || res.Refusal.Holder != "A" {
			t.Fatalf("claim %d again through the other writer: %v %+v; want a refusal naming task A as the holder", i, err, res)
		}
	}

	// 1.2 MiB in one transaction: more than walGatherMax, so its commit is written out in
	// 64 KiB runs.
	err := gathering.transaction(ctx, true, func(tx *sqltx.Tx) error {
		if _, err := tx.SQL.ExecContext(ctx, "CREATE TABLE big (b BLOB NOT NULL)"); err != nil {
			return err
		}
		for i := range 300 {
			if _, err := tx.SQL.ExecContext(ctx, "INSERT INTO big VALUES (?)", make([]byte, 4096+i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	reader, err := sql.Open("sqlite", "file:"+path+"?mode=ro") // SQLite's own VFS
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	var check string
	var keys, bytes int
	if err := reader.QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check: %q %v", check, err)
	}
	if err := reader.QueryRow("SELECT count(*) FROM keys").Scan(&keys); err != nil || keys != 200 {
		t.Fatalf("%d keys (%v); want 200", keys, err)
	}
	if err := reader.QueryRow("SELECT sum(length(b)) FROM big").Scan(&bytes); err != nil || bytes != 300*4096+299*300/2 {
		t.Fatalf("%d bytes in the big transaction (%v); want %d", bytes, err, 300*4096+299*300/2)
	}
}

// A transaction bigger than the connection's page cache writes pages to the WAL before
// its commit. If it then rolls back, the writes held for it must not reach the file
// after the write lock is released: another writer's commit takes those offsets, and
// a late write would overwrite it (found by review: a fresh reader then saw a row lost
// and "Rowid 32 out of order").
func TestARolledBackSpillNeverOverwritesAnotherCommit(t *testing.T) {
	ctx := context.Background()
	path, gathering, plain := gatheringAndPlain(t)
	if _, err := gathering.conn.ExecContext(ctx, "PRAGMA cache_size=10"); err != nil {
		t.Fatal(err)
	}
	err := plain.transaction(ctx, true, func(tx *sqltx.Tx) error {
		_, err := tx.SQL.ExecContext(ctx, "CREATE TABLE spilled (b BLOB); CREATE TABLE kept (b BLOB)")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every page in the database file, none in the WAL: the rollback reads nothing from
	// the WAL, which would write out what was held.
	if _, err := plain.conn.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}

	held := func() (n int64) {
		theGatherVFS.mu.Lock()
		defer theGatherVFS.mu.Unlock()
		for _, h := range theGatherVFS.wals {
			if h.path == path+"-wal" {
				n += h.n
			}
		}
		return n
	}
	rolledBack := errors.New("rolled back on purpose")
	err = gathering.transaction(ctx, true, func(tx *sqltx.Tx) error {
		for range 40 {
			if _, err := tx.SQL.ExecContext(ctx, "INSERT INTO spilled VALUES (randomblob(3000))"); err != nil {
				return err
			}
		}
		if held() == 0 {
			t.Fatal("nothing spilled to the WAL and held: the case is not tested")
		}
		return rolledBack
	})
	if !errors.Is(err, rolledBack) {
		t.Fatal(err)
	}
	if n := held(); n != 0 {
		t.Fatalf("%d bytes still held for the WAL after the rollback released the write lock", n)
	}
	for range 60 {
		err := plain.transaction(ctx, true, func(tx *sqltx.Tx) error {
			_, err := tx.SQL.ExecContext(ctx, "INSERT INTO kept VALUES (zeroblob(3000))")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var n int
	err = gathering.transaction(ctx, false, func(tx *sqltx.Tx) error { // reads the WAL
		return tx.SQL.QueryRowContext(ctx, "SELECT count(*) FROM kept").Scan(&n)
	})
	if err != nil || n != 60 {
		t.Fatalf("the gathering connection reads %d rows (%v); want 60", n, err)
	}

	reader, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	var check string
	if err := reader.QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check: %q %v", check, err)
	}
	if err := reader.QueryRow("SELECT count(*) FROM kept WHERE b = zeroblob(3000)").Scan(&n); err != nil || n != 60 {
		t.Fatalf("%d of the other writer's 60 rows intact (%v)", n, err)
	}
	if err := reader.QueryRow("SELECT count(*) FROM spilled").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rolled-back rows (%v)", n, err)
	}
}

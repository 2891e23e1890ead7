package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

// TestCheckpointsRunOffTheClaimPath: the store's connection never checkpoints inside a
// commit (wal_autocheckpoint is 0), and the checkpointer still copies the WAL into the
// database file once enough claims have committed (without it the file would keep its
// first size, every page in the WAL). Statements prepared once are reused meanwhile, and
// every claim is still there afterwards, read back through a new process's view.
func TestCheckpointsRunOffTheClaimPath(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	b, err := Create(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var auto int
	if err := b.conn.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&auto); err != nil || auto != 0 {
		t.Fatalf("the store's connection has wal_autocheckpoint %d (%v); want 0: checkpoints belong to the checkpointer", auto, err)
	}
	first := fileSize(t, path)
	s := store.New(b)
	id, _ := gate.Title("Bob")
	const claims = 600
	for i := range claims {
		k := gate.NewKey(id, gate.DigestOf([]byte(fmt.Sprint(i))))
		if res, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{k}, Task: "A"}); err != nil || !res.Granted {
			t.Fatalf("claim %d: %+v %v", i, res, err)
		}
	}
	if b.statements.Len() == 0 {
		t.Error("no statement was prepared for reuse")
	}
	deadline := time.Now().Add(20 * time.Second) // a wait for a background event, not a speed limit
	for fileSize(t, path) == first {
		if time.Now().After(deadline) {
			t.Fatalf("%d claims later the database file still has its first size %d: nothing checkpointed the WAL", claims, first)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	ids := 0
	if err := again.View(ctx, func(tx store.Tx) error {
		for i := range claims {
			k := gate.NewKey(id, gate.DigestOf([]byte(fmt.Sprint(i))))
			bound, err := tx.IntentsOf([]string{k.String()})
			if err != nil {
				return err
			}
			ids += len(bound)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if ids != claims {
		t.Fatalf("%d of %d claimed keys read back after the checkpoints", ids, claims)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestCloseTwice(t *testing.T) {
	b, err := Create(context.Background(), filepath.Join(t.TempDir(), "s.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

// TestTheWALIsReusedUnderBackToBackClaims: claims that follow each other with no pause
// still let the restart checkpoint through, so the WAL starts again from its beginning
// and stays about the size that the commits between two checkpoints need. (Waiting on
// SQLite's busy handler alone, the restart lost the write lock to the next claim and the
// WAL grew by every claim's frames: five times the size after 1,500 claims.)
func TestTheWALIsReusedUnderBackToBackClaims(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	b, err := Create(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := store.New(b)
	defer s.Close()
	id, _ := gate.Title("Bob")
	var first int64
	for i := range 1500 {
		k := gate.NewKey(id, gate.DigestOf([]byte(fmt.Sprint(i))))
		if res, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{k}, Task: "A"}); err != nil || !res.Granted {
			t.Fatalf("claim %d: %+v %v", i, res, err)
		}
		if i == 299 {
			first = fileSize(t, path+"-wal")
		}
	}
	if last := fileSize(t, path+"-wal"); last > first*8/5 {
		t.Fatalf("the WAL grew from %d KiB after 300 claims to %d KiB after 1,500: the restart checkpoint never got through", first/1024, last/1024)
	}
}

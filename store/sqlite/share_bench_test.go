//go:build unix

package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/store/internal/sqltx"
)

// BenchmarkClaimShare runs, round by round in one folder so that all of them see the same
// machine at the same moments, 100 of each of these, and reports each one's rate as a
// share of the fsyncs':
//
//   - claims: durable claims of new keys through the store;
//   - floor: the cheapest durable commit this backend makes, one row into a table of its
//     own through the same transaction path (BEGIN IMMEDIATE, a prepared insert, a
//     synchronous FULL commit, the checkpointer): no claim could do better here;
//   - lean5 and lean4: sketches of the leanest claim a schema could make, for deciding
//     whether one is worth building. Not the store's code: raw prepared statements on
//     tables of their own, with no rules run. lean5 writes the key (WITHOUT ROWID), the
//     intent, the attempt with its dispatch id's unique index and the claim's three
//     events (no AUTOINCREMENT, no index by intent: each intent would chain its own),
//     taking the fencing token as the attempts' greatest plus one; lean4 keeps one event
//     and drops the dispatch id's index; lean2 writes only the key (WITHOUT ROWID) and
//     one appended record holding the intent, the attempt and the three events as one
//     JSON document, whose row id is the fencing token;
//   - fsyncs: a 4 KiB write and an fsync, the anchor.
func BenchmarkClaimShare(b *testing.B) {
	dir := diskFolder(b)
	b.Logf("in %s (%s)", dir, filesystem(b, dir))
	contenders := []struct {
		name string
		op   func(i int) error
		took time.Duration
	}{
		{name: "claims", op: claimsOp(b, dir, Options{})},
		{name: "floor", op: floorOp(b, dir)},
		{name: "lean5", op: leanOp(b, dir, true)},
		{name: "lean4", op: leanOp(b, dir, false)},
		{name: "lean2", op: lean2Op(b, dir)},
		{name: "fsyncs", op: fsyncOp(b, dir)},
	}
	const each = 100
	rounds := 0
	for b.Loop() {
		for c := range contenders {
			start := time.Now()
			for i := range each {
				if err := contenders[c].op(rounds*each + i); err != nil {
					b.Fatalf("%s: %v", contenders[c].name, err)
				}
			}
			contenders[c].took += time.Since(start)
		}
		rounds++
	}
	fsyncs := contenders[len(contenders)-1].took
	for _, c := range contenders {
		b.ReportMetric(float64(rounds*each)/c.took.Seconds(), c.name+"/s")
		if c.took != fsyncs {
			b.ReportMetric(100*fsyncs.Seconds()/c.took.Seconds(), c.name+"-%-of-fsyncs")
		}
	}
	b.ReportMetric(0, "ns/op") // a round is 600 operations of six kinds: its time means nothing
}

// claimsOp claims key i through a new store in dir.
func claimsOp(b *testing.B, dir string, opt Options) func(int) error {
	ctx := context.Background()
	be, err := Create(ctx, filepath.Join(dir, "claims.db"), opt)
	if err != nil {
		b.Fatal(err)
	}
	s := store.New(be)
	b.Cleanup(func() { s.Close() })
	id, _ := gate.Title("Bob")
	return func(i int) error {
		k := gate.NewKey(id, gate.DigestOf([]byte(fmt.Sprint(i))))
		_, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{k}, Task: "bench"})
		return err
	}
}

// floorOp commits one 32-byte row through the backend's transaction path.
func floorOp(b *testing.B, dir string) func(int) error {
	be, prepare := sketchStore(b, filepath.Join(dir, "floor.db"), "CREATE TABLE floor (id INTEGER PRIMARY KEY, v BLOB NOT NULL)")
	insert := prepare("INSERT INTO floor (v) VALUES (?)")
	row := make([]byte, 32)
	return func(int) error {
		return be.transaction(context.Background(), true, func(*sqltx.Tx) error {
			_, err := insert.Exec(row)
			return err
		})
	}
}

// leanOp is a sketch of a lean claim of key i: see BenchmarkClaimShare.
func leanOp(b *testing.B, dir string, threeEventsAndDispatchIndex bool) func(int) error {
	unique, name := "", "lean4.db"
	if threeEventsAndDispatchIndex {
		unique, name = "UNIQUE", "lean5.db"
	}
	be, prepare := sketchStore(b, filepath.Join(dir, name), `
CREATE TABLE lean_keys (key TEXT PRIMARY KEY, intent_id INTEGER NOT NULL, version TEXT NOT NULL, strength TEXT NOT NULL, bound_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE lean_intents (id INTEGER PRIMARY KEY, created_at INTEGER NOT NULL, revision INTEGER NOT NULL DEFAULT 0, latest_token INTEGER NOT NULL, keys TEXT NOT NULL);
CREATE TABLE lean_attempts (token INTEGER PRIMARY KEY, intent_id INTEGER NOT NULL, previous_token INTEGER NOT NULL DEFAULT 0, revision INTEGER NOT NULL, task TEXT NOT NULL,
	dispatch_id TEXT NOT NULL `+unique+`, claimed_at INTEGER NOT NULL, lease_expires_at INTEGER NOT NULL, delivery TEXT, acceptance TEXT, ended_at INTEGER,
	evidence TEXT NOT NULL DEFAULT '', chain_head TEXT NOT NULL DEFAULT '', workstation TEXT NOT NULL DEFAULT '', file_name TEXT NOT NULL DEFAULT '', size INTEGER NOT NULL DEFAULT 0);
CREATE TABLE lean_events (seq INTEGER PRIMARY KEY, previous_seq INTEGER NOT NULL DEFAULT 0, at INTEGER NOT NULL, intent_id INTEGER NOT NULL, kind TEXT NOT NULL,
	key TEXT NOT NULL DEFAULT '', task TEXT NOT NULL DEFAULT '', token INTEGER NOT NULL DEFAULT 0, dispatch_id TEXT NOT NULL DEFAULT '', revision INTEGER NOT NULL DEFAULT 0, detail TEXT NOT NULL DEFAULT '{}');`)
	bound := prepare("SELECT intent_id FROM lean_keys WHERE key = ?")
	lastToken := prepare("SELECT COALESCE(max(token), 0) FROM lean_attempts")
	newIntent := prepare("INSERT INTO lean_intents (created_at, latest_token, keys) VALUES (?, ?, ?) RETURNING id")
	bind := prepare("INSERT INTO lean_keys (key, intent_id, version, strength, bound_at) VALUES (?, ?, ?, ?, ?)")
	attempt := prepare("INSERT INTO lean_attempts (token, intent_id, revision, task, dispatch_id, claimed_at, lease_expires_at) VALUES (?, ?, 0, ?, ?, ?, ?)")
	granted := prepare("INSERT INTO lean_events (at, intent_id, kind, key, task, token, dispatch_id, detail) VALUES (?, ?, 'claim_granted', ?, ?, ?, ?, ?)")
	created := prepare("INSERT INTO lean_events (at, intent_id, kind, key, task) VALUES (?, ?, 'intent_created', ?, ?), (?, ?, 'key_bound', ?, ?)")
	return func(i int) error {
		key, dispatch := sketchClaim(i)
		return be.transaction(context.Background(), true, func(*sqltx.Tx) error {
			now := time.Now()
			at := now.UnixNano()
			var intent, token int64
			if err := bound.QueryRow(key).Scan(&intent); err != sql.ErrNoRows {
				return fmt.Errorf("key %s is bound already (%v)", key, err)
			}
			if err := lastToken.QueryRow().Scan(&token); err != nil {
				return err
			}
			token++
			if err := newIntent.QueryRow(at, token, key).Scan(&intent); err != nil {
				return err
			}
			if _, err := bind.Exec(key, intent, "v2", "weak", at); err != nil {
				return err
			}
			if _, err := attempt.Exec(token, intent, "bench", dispatch, at, now.Add(store.DefaultLease).UnixNano()); err != nil {
				return err
			}
			if threeEventsAndDispatchIndex {
				if _, err := created.Exec(at, intent, key, "bench", at, intent, key, "bench"); err != nil {
					return err
				}
			}
			detail := fmt.Sprintf(`{"lease_expires_at":%q,"previous_status":"free","reason":"no earlier attempt: granted"}`, now.Add(store.DefaultLease).UTC().Format(time.RFC3339Nano))
			_, err := granted.Exec(at, intent, key, "bench", token, dispatch, detail)
			return err
		})
	}
}

// lean2Op is a sketch of a claim of key i that writes two b-trees: see BenchmarkClaimShare.
func lean2Op(b *testing.B, dir string) func(int) error {
	be, prepare := sketchStore(b, filepath.Join(dir, "lean2.db"), `
CREATE TABLE lean_keys (key TEXT PRIMARY KEY, record INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE lean_records (token INTEGER PRIMARY KEY, doc TEXT NOT NULL);`)
	bound := prepare("SELECT record FROM lean_keys WHERE key = ?")
	record := prepare("INSERT INTO lean_records (doc) VALUES (?) RETURNING token")
	bind := prepare("INSERT INTO lean_keys (key, record) VALUES (?, ?)")
	return func(i int) error {
		key, dispatch := sketchClaim(i)
		return be.transaction(context.Background(), true, func(*sqltx.Tx) error {
			now := time.Now()
			var token int64
			if err := bound.QueryRow(key).Scan(&token); err != sql.ErrNoRows {
				return fmt.Errorf("key %s is bound already (%v)", key, err)
			}
			doc, err := json.Marshal(map[string]any{
				"created_at": now, "revision": 0, "keys": []string{key},
				"attempt": map[string]any{"task": "bench", "dispatch_id": dispatch, "claimed_at": now, "lease_expires_at": now.Add(store.DefaultLease)},
				"events": []map[string]any{
					{"at": now, "kind": "intent_created", "key": key, "task": "bench"},
					{"at": now, "kind": "key_bound", "key": key, "task": "bench", "detail": map[string]string{"identity_strength": "weak"}},
					{"at": now, "kind": "claim_granted", "key": key, "task": "bench", "dispatch_id": dispatch,
						"detail": map[string]string{"lease_expires_at": now.Add(store.DefaultLease).UTC().Format(time.RFC3339Nano), "previous_status": "free", "reason": "no earlier attempt: granted"}},
				},
			})
			if err != nil {
				return err
			}
			if err := record.QueryRow(string(doc)).Scan(&token); err != nil {
				return err
			}
			_, err = bind.Exec(key, token)
			return err
		})
	}
}

// sketchClaim is the key a sketch claims i-th, and a new dispatch id.
func sketchClaim(i int) (key, dispatch string) {
	id, _ := gate.Title("Bob")
	var r [16]byte
	rand.Read(r[:])
	return gate.NewKey(id, gate.DigestOf([]byte(fmt.Sprint(i)))).String(), hex.EncodeToString(r[:])
}

// sketchStore is a new store at path with schema added, and a way to prepare statements
// on its connection.
func sketchStore(b *testing.B, path, schema string) (*Backend, func(string) *sql.Stmt) {
	ctx := context.Background()
	be, err := Create(ctx, path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Close() })
	if _, err := be.conn.ExecContext(ctx, schema); err != nil {
		b.Fatal(err)
	}
	return be, func(q string) *sql.Stmt {
		st, err := be.conn.PrepareContext(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		return st
	}
}

// fsyncOp writes 4 KiB in place (one of 256 pages, in turn) and fsyncs it.
func fsyncOp(b *testing.B, dir string) func(int) error {
	f, err := os.Create(filepath.Join(dir, "fsync"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	page := make([]byte, 4096)
	return func(i int) error {
		if _, err := f.WriteAt(page, int64(i%256)*4096); err != nil {
			return err
		}
		return f.Sync()
	}
}

package postgres

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/store/postgres/pgtest"
)

// TestAmbiguousCommits: the connection lost while COMMIT is in flight, through a TCP
// proxy that drops it before the COMMIT reaches the server, drops the server's answer
// to it, or holds it while the server cannot be reached. The store learns through the
// commit's tombstone whether it landed before answering: a claim is granted once, with
// the token the database holds; a crossing whose fate cannot be learnt is refused (so
// it is not acted on), and a claim that cannot be confirmed is never granted.
func TestAmbiguousCommits(t *testing.T) {
	// Unprepared, the proxy sees each COMMIT's text; prepared, only the first time a
	// connection prepares it, and the Bind that runs it after.
	for _, prepared := range []bool{false, true} {
		t.Run(map[bool]string{false: "unprepared", true: "prepared"}[prepared], func(t *testing.T) { ambiguousCommits(t, prepared) })
	}
}

func ambiguousCommits(t *testing.T, prepared bool) {
	ctx := context.Background()
	u := initializedDatabase(t)
	proxy, through := pgtest.NewProxy(t, u)
	b, err := Open(ctx, through, Options{LockTimeout: time.Second, PrepareStatements: prepared})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s := store.New(b)
	db, err := sql.Open("pgx", u) // the test's own view, not through the proxy
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := db.QueryRow(q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	claim := func(file string) (store.ClaimResult, error) {
		id, _ := gate.Title("Bob")
		return s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{gate.NewKey(id, gate.DigestOf([]byte(file)))}, Task: "A"})
	}

	t.Run("claim, COMMIT dropped before the server", func(t *testing.T) {
		proxy.Arm(pgtest.DropBeforeCommit)
		hits := proxy.Hits()
		res, err := claim("dropped before")
		if err != nil || !res.Granted {
			t.Fatalf("%+v, %v; want granted (the claim did not land, and was made again)", res, err)
		}
		if proxy.Hits() != hits+1 {
			t.Fatal("the fault was not applied")
		}
		if n := count("SELECT count(*) FROM sendonce.attempts"); n != 1 {
			t.Fatalf("%d attempts; want 1", n)
		}
		if n := count("SELECT count(*) FROM sendonce.commits WHERE tombstone"); n != 1 {
			t.Fatalf("%d tombstones; want 1 (the lost commit's)", n)
		}
	})

	t.Run("claim, COMMIT's answer lost", func(t *testing.T) {
		proxy.Arm(pgtest.DropAnswer)
		hits := proxy.Hits()
		res, err := claim("answer lost")
		if err != nil || !res.Granted {
			t.Fatalf("%+v, %v; want granted (the claim landed)", res, err)
		}
		if proxy.Hits() != hits+1 {
			t.Fatal("the fault was not applied")
		}
		if n := count("SELECT count(*) FROM sendonce.attempts WHERE token = $1", res.Permit.Token()); n != 1 {
			t.Fatalf("the granted token %d is held by %d attempts; want 1", res.Permit.Token(), n)
		}
		if n := count("SELECT count(*) FROM sendonce.attempts"); n != 2 {
			t.Fatalf("%d attempts; want 2 (one per claim: none made twice)", n)
		}
	})

	res, err := claim("crossed")
	if err != nil || !res.Granted {
		t.Fatal(res, err)
	}
	p := res.Permit
	t.Run("cross, COMMIT's answer lost", func(t *testing.T) {
		proxy.Arm(pgtest.DropAnswer)
		pass, err := s.Cross(ctx, p, gate.Send, "")
		if err != nil || pass == nil {
			t.Fatalf("%v; want the pass (the crossing landed)", err)
		}
		if n := count("SELECT count(*) FROM sendonce.crossings WHERE token = $1", p.Token()); n != 1 {
			t.Fatalf("%d crossings; want 1", n)
		}
	})

	res, err = claim("stalled")
	if err != nil || !res.Granted {
		t.Fatal(res, err)
	}
	t.Run("cross, COMMIT held and the server unreachable", func(t *testing.T) {
		proxy.Arm(pgtest.Stall)
		// The caller gives up after a second; the store still asks, on its own, for as
		// long as the lost session could live on the server, and the proxy is released
		// only once it has given up.
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		pass, err := s.Cross(short, res.Permit, gate.Send, "")
		proxy.Release()
		if pass != nil || err == nil {
			t.Fatalf("pass %v, %v; want no pass and an error (nothing may act on a crossing nobody can confirm)", pass, err)
		}
		if n := count("SELECT count(*) FROM sendonce.crossings WHERE token = $1", res.Permit.Token()); n != 0 {
			t.Fatalf("%d crossings; want none (the COMMIT never reached the server)", n)
		}
	})

	t.Run("claim, COMMIT held and the server unreachable", func(t *testing.T) {
		proxy.Arm(pgtest.Stall)
		got, err := claim("never confirmed")
		proxy.Release()
		if got.Granted || !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("%+v, %v; want no grant, the store unavailable", got, err)
		}
	})
}

// Running a transaction: Update and View, run's round trips (BEGIN with the
// transaction's settings, fn's statements, the deferred writes with COMMIT), and which
// failures are run again from the start.

package postgres

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sendonce/sendonce/internal/clock"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/store/internal/sqltx"
)

// retryable says whether a transaction failed only because another one won a race (a
// serialization failure or a deadlock) or met a statement prepared before the schema
// changed. It is then run again from the start.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	// 0A000 "cached plan must not change result type": a statement prepared before the
	// schema changed under it; pgx has forgotten it, and the next try prepares it again.
	return pe.Code == "40001" || pe.Code == "40P01" || (pe.Code == "0A000" && strings.Contains(pe.Message, "cached plan"))
}

// lostBeforeCommit says whether err is a lost or closed connection found before the
// transaction's COMMIT was sent: the server rolled it back, so it may run again on a
// new connection. A failure during COMMIT is not this: it is ambiguous.
func lostBeforeCommit(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "57P01" || strings.HasPrefix(pe.Code, "08") // admin shutdown, connection exception
	}
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err)
}

// Update implements store.Backend.
func (b *Backend) Update(ctx context.Context, fn func(store.Tx) error) error {
	return b.retry(ctx, fn, false)
}

// View implements store.Backend.
func (b *Backend) View(ctx context.Context, fn func(store.Tx) error) error {
	return b.retry(ctx, fn, true)
}

// retry runs a transaction until it is decided: again from the start after a
// serialization failure or a deadlock (another transaction won a race), for at most the
// lock timeout, and after a connection lost before its COMMIT or a COMMIT that resolve
// showed did not land (a few times: nothing of it is kept).
func (b *Backend) retry(ctx context.Context, fn func(store.Tx) error, readOnly bool) error {
	return b.explainPooler(b.retryRaces(ctx, fn, readOnly))
}

func (b *Backend) retryRaces(ctx context.Context, fn func(store.Tx) error, readOnly bool) error {
	lost, stale := 0, 0
	until := clock.System().Add(b.opt.LockTimeout) // races are retried for as long as a lock is waited for
	for attempt := 0; ; attempt++ {
		err := b.run(ctx, fn, readOnly)
		var beforeCommit *notCommitted
		if errors.As(err, &beforeCommit) {
			err = beforeCommit.err
			switch {
			case ctx.Err() != nil:
			case beforeCommit.atBegin && lostBeforeCommit(err) && stale <= poolSize:
				// A pooled connection the server had closed (each is dropped once
				// found): another, up to a new one.
				stale++
				continue
			case (beforeCommit.resolved || lostBeforeCommit(err)) && lost < 3:
				lost++
				continue
			}
		}
		if !retryable(err) || clock.System().After(until) {
			return err
		}
		// Back off for a random time that grows with each try, so that the losers of a
		// race do not meet again at once.
		wait := time.Duration(mathrand.Int64N(int64(time.Millisecond) << min(attempt, 7)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// run runs fn in one transaction on a connection of its own, in three round trips for a
// claim of a new key: BEGIN and the transaction's settings together; the statements fn
// waits on; the deferred writes and COMMIT together (pipelined: pgx sends a batch's
// statements at once and reads their answers in order). With prepared statements a
// connection prepares each statement the first time it sends it, one round trip more.
func (b *Backend) run(ctx context.Context, fn func(store.Tx) error, readOnly bool) (err error) {
	txCtx, cancel := context.WithTimeout(ctx, b.idleTimeout())
	defer cancel()
	conn, err := b.db.Conn(txCtx)
	if err != nil {
		return &notCommitted{err: err, atBegin: true}
	}
	ended := false // committed, or rolled back by the server: the connection is clean
	defer func() {
		if !ended {
			abandon(conn)
		}
		conn.Close()
	}()
	// Each transaction says what it needs (set_config(..., true) is SET LOCAL), in the
	// round trip that reads its time; nothing is left to the session. A state-changing
	// one also leaves its id in commits, for resolve.
	var id string
	marker := "SELECT "
	args := []any{fmt.Sprint(b.opt.LockTimeout.Milliseconds()), fmt.Sprint(b.idleTimeout().Milliseconds())}
	if !readOnly {
		var raw [16]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return err
		}
		id = hex.EncodeToString(raw[:])
		marker = `WITH marker AS (INSERT INTO sendonce.commits (id, at) VALUES ($3, (extract(epoch FROM now()) * 1e9)::bigint) RETURNING 1)
		SELECT `
		args = append(args, id)
	}
	var now time.Time
	err = pipeline(txCtx, conn, func(batch *pgx.Batch) {
		batch.Queue(b.beginStatement(readOnly))
		batch.Queue(marker+`now(), set_config('search_path', 'sendonce', true), set_config('synchronous_commit', 'on', true),
		set_config('lock_timeout', $1, true), set_config('idle_in_transaction_session_timeout', $2, true)`+map[bool]string{true: "", false: " FROM marker"}[readOnly],
			args...).QueryRow(func(row pgx.Row) error { return row.Scan(&now, new(string), new(string), new(string), new(string)) })
	}, nil)
	if err != nil {
		if lostBeforeCommit(err) {
			return &notCommitted{err: err, atBegin: true}
		}
		return err
	}
	now = now.UTC()
	if b.opt.clock != nil {
		now = b.opt.clock(now)
	}
	if b.opt.WorkstationClock != nil {
		now = b.opt.WorkstationClock().UTC()
	}
	t := &pgTx{Tx: sqltx.Tx{SQL: conn, Ctx: txCtx, Bounded: true, At: now, Dialect: sqltx.PostgreSQL, DeferEvents: true},
		pause: b.opt.pause, readKeysFirst: b.opt.readKeysFirst}
	err = fn(t)
	var writes string
	var writeArgs []any
	if err == nil {
		writes, writeArgs, err = t.Deferred()
	}
	if err != nil {
		if lostBeforeCommit(err) {
			return &notCommitted{err: err} // the server rolled it back: nothing of it is kept
		}
		return err
	}
	var inTx bool
	err = pipeline(txCtx, conn, func(batch *pgx.Batch) {
		if writes != "" {
			batch.Queue(writes, writeArgs...)
		}
		batch.Queue("COMMIT").Exec(func(tag pgconn.CommandTag) error {
			if tag.String() != "COMMIT" {
				return errCommitRolledBack
			}
			return nil
		})
	}, &inTx)
	switch {
	case err == nil:
		ended = true
		return nil
	case readOnly || definite(err):
		return err
	case pgconn.SafeToRetry(err), inTx:
		// Nothing was sent, or the connection is still in the transaction: its COMMIT
		// did not run (abandon rolls it back).
		return &notCommitted{err: err}
	}
	// The COMMIT may have been sent and no answer came back: it may have landed or
	// not. Ask.
	landed, rerr := b.resolve(ctx, id)
	switch {
	case rerr != nil:
		return fmt.Errorf("the connection to %s was lost while a COMMIT was in flight (%v), and whether it landed could not be learnt: %w", b.display, err, rerr)
	case landed:
		return nil
	default:
		return &notCommitted{err: err, resolved: true}
	}
}

// beginStatement begins a transaction at the store's isolation.
func (b *Backend) beginStatement(readOnly bool) string {
	level := map[sql.IsolationLevel]string{
		sql.LevelSerializable:   "SERIALIZABLE",
		sql.LevelRepeatableRead: "REPEATABLE READ",
		sql.LevelReadCommitted:  "READ COMMITTED",
	}[b.opt.isolation]
	if readOnly {
		return "BEGIN ISOLATION LEVEL " + level + " READ ONLY"
	}
	return "BEGIN ISOLATION LEVEL " + level
}

// pipeline sends the statements queue queues in one round trip, on the connection
// under conn, and reads their answers in order: the first error stops it (the server
// skips the statements after a failed one). After an error, inTx (when given) says
// whether the connection is open and still in a transaction (so a COMMIT among them
// did not run).
func pipeline(ctx context.Context, conn *sql.Conn, queue func(*pgx.Batch), inTx *bool) error {
	return conn.Raw(func(driverConn any) error {
		batch := &pgx.Batch{}
		queue(batch)
		pc := driverConn.(*stdlib.Conn).Conn()
		err := pc.SendBatch(ctx, batch).Close()
		switch {
		case err == nil:
		case pc.IsClosed():
			return fmt.Errorf("%w (%w)", err, driver.ErrBadConn) // database/sql drops the connection
		case inTx != nil:
			status := pc.PgConn().TxStatus()
			*inTx = status == 'T' || status == 'E'
		}
		return err
	})
}

// abandon ends a transaction that did not commit: ROLLBACK, or, when that cannot be
// sent, the connection is closed rather than put back in the pool.
func abandon(conn *sql.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		conn.Raw(func(any) error { return driver.ErrBadConn }) // database/sql drops it
	}
}

// explainPooler says what to do when a prepared statement went missing, or was there
// already, on the server: a pooler in transaction mode handed the transaction another
// server connection than the one the statement was prepared on.
func (b *Backend) explainPooler(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || (pe.Code != "26000" && pe.Code != "42P05") {
		return err
	}
	return fmt.Errorf("%s is behind a connection pooler in transaction mode that does not keep prepared statements (PgBouncer before 1.21, or with max_prepared_statements = 0): add default_query_exec_mode=exec to the store URL, or set max_prepared_statements in the pooler: %w", b.display, err)
}

// idleTimeout bounds a transaction: the server ends a session idle in one for longer
// (so a transaction whose client went away cannot commit later), and the client gives
// up waiting for it.
func (b *Backend) idleTimeout() time.Duration { return b.opt.LockTimeout + 5*time.Second }

// notCommitted is an error after which nothing of the transaction is kept: found
// before COMMIT was sent, or (resolved) a COMMIT that resolve showed did not land.
type notCommitted struct {
	err      error
	resolved bool
	atBegin  bool // found before the transaction began: on taking a connection, or at BEGIN
}

func (e *notCommitted) Error() string { return e.err.Error() }
func (e *notCommitted) Unwrap() error { return e.err }

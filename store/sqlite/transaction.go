package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/store/internal/sqltx"
)

// The backend runs its transactions itself, on the one connection it holds: BEGIN,
// the statements, COMMIT or ROLLBACK. database/sql's Tx would start a goroutine for
// every transaction, and the driver one more for its BEGIN and COMMIT under the
// transaction's context; waking a thread for each cost a claim about a tenth of its
// time (docs/benchmarks-history.md, issue 15 in one sitting, 2026-12-02 night).

// turn is this process's one transaction at a time on the connection: a channel of one,
// so that a wait for it ends when the waiter's ctx does. A restart checkpoint takes it too.
type turn chan struct{}

func (t turn) take(ctx context.Context) error {
	select {
	case t <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t turn) give() { <-t }

var errClosed = fmt.Errorf("%w: the store was closed", store.ErrUnavailable)

// Update implements store.Backend.
func (b *Backend) Update(ctx context.Context, fn func(store.Tx) error) error {
	err := b.transaction(ctx, true, func(t *sqltx.Tx) error {
		t.DeferEvents = true // one statement for a transaction's events
		if err := fn(t); err != nil {
			return err
		}
		return t.Flush()
	})
	if err != nil && strings.Contains(err.Error(), "readonly database") { // SQLite's own names no file
		return fmt.Errorf("the store %s cannot be written: %w%s", b.path, err, accessHint(b.path))
	}
	return err
}

// View implements store.Backend.
func (b *Backend) View(ctx context.Context, fn func(store.Tx) error) error {
	return b.transaction(ctx, false, func(t *sqltx.Tx) error { return fn(t) })
}

// transaction runs fn in a transaction on the backend's connection and, if it writes
// and fn succeeded, commits it. A writing one begins IMMEDIATE: it takes the write lock
// at once, waiting for it up to the lock timeout or until ctx is done. Once ctx is done
// every statement fails, and nothing is committed.
func (b *Backend) transaction(ctx context.Context, write bool, fn func(*sqltx.Tx) error) error {
	if err := b.stillOpened(); err != nil {
		return err
	}
	if err := b.turn.take(ctx); err != nil {
		return err
	}
	defer b.turn.give()
	if b.unusable != nil {
		return b.unusable
	}
	committed := false
	defer func() {
		// fn failed or panicked, ctx ended, the BEGIN failed (it may have begun all the
		// same if ctx ended as it did), or this was a read: nothing of it is kept, and
		// the connection is left outside any transaction for the next one.
		if !committed {
			b.rollback()
		}
	}()
	begin := "BEGIN"
	if write {
		begin = "BEGIN IMMEDIATE"
	}
	if err := b.statements.Exec(ctx, begin); err != nil {
		return err
	}
	t := &sqltx.Tx{SQL: b.conn, Ctx: ctx, At: b.clock(), Dialect: sqltx.SQLite, Statements: b.statements}
	if err := b.checkRetired(t); err != nil {
		return err
	}
	if err := fn(t); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil || !write {
		return err // a caller that gave up gets nothing, not even a read
	}
	// Not under ctx: a COMMIT the driver interrupted halfway would leave the caller not
	// knowing whether it landed.
	if err := b.statements.Exec(context.Background(), "COMMIT"); err != nil {
		return err
	}
	committed = true
	b.checkpoints.committed()
	return nil
}

// rollback ends the connection's transaction, if it has one ("no transaction is
// active" otherwise, which is fine). If the ROLLBACK fails otherwise, the transaction
// may still be open, holding the write lock against every process on the machine: the
// connection is closed (SQLite rolls back what it had as it closes) and the backend
// fails closed from then on.
func (b *Backend) rollback() {
	err := b.statements.Exec(context.Background(), "ROLLBACK")
	if err == nil || strings.Contains(err.Error(), "no transaction is active") || errors.Is(b.unusable, errClosed) {
		return
	}
	b.unusable = fmt.Errorf("%w: %s: a transaction could not be rolled back (%v), so this process closed its connection to the store: restart it", store.ErrUnavailable, b.path, err)
	b.statements.Close()
	b.conn.Close()
}

// A COMMIT whose answer was lost: definite tells the server's own rollback from a lost
// answer, and resolve learns with a tombstone whether the transaction landed.

package postgres

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// definite says whether the error of the last writes and COMMIT is the server's own
// answer that it rolled the transaction back (an ERROR: a serialization failure, a
// constraint; or COMMIT answered ROLLBACK), rather than a connection lost with the
// COMMIT in flight or a FATAL or PANIC, after which a COMMIT may yet have landed.
func definite(err error) bool {
	if errors.Is(err, errCommitRolledBack) {
		return true
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && cmp.Or(pe.SeverityUnlocalized, pe.Severity) == "ERROR" && pe.Code != "57P01" && !strings.HasPrefix(pe.Code, "08")
}

// errCommitRolledBack is a COMMIT the server answered with ROLLBACK: the transaction
// had failed, and nothing of it is kept.
var errCommitRolledBack = errors.New("the server rolled the transaction back at COMMIT")

// resolve learns whether the transaction that inserted id into commits landed, after
// its COMMIT went unanswered. It inserts a tombstone of the same id first: that insert
// waits for the transaction if the server still holds it, and once the tombstone is in,
// the transaction can never commit (its own row would collide). So: the tombstone
// goes in, the transaction did not land; the row is there and is no tombstone, it did.
// It asks on new connections (the caller's context may be what ended the COMMIT) for as
// long as a session of the lost transaction can live on the server.
func (b *Backend) resolve(ctx context.Context, id string) (landed bool, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.idleTimeout()+b.opt.LockTimeout)
	defer cancel()
	for {
		landed, err = b.tombstone(ctx, id)
		if err == nil || ctx.Err() != nil {
			return landed, err
		}
		select {
		case <-ctx.Done():
			return false, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (b *Backend) tombstone(ctx context.Context, id string) (landed bool, err error) {
	tx, err := b.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT set_config('synchronous_commit', 'on', true), set_config('lock_timeout', $1, true)", fmt.Sprint(b.opt.LockTimeout.Milliseconds())); err != nil {
		return false, err
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO sendonce.commits (id, at, tombstone) VALUES ($1, (extract(epoch FROM now()) * 1e9)::bigint, true)
		ON CONFLICT (id) DO NOTHING`, id)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		if err == nil {
			err = tx.Commit()
		}
		return false, err
	}
	// A row is there: the transaction's, or a tombstone of an earlier try whose COMMIT
	// went unanswered too (read in a statement of its own, which sees what committed).
	var tomb bool
	if err := tx.QueryRowContext(ctx, "SELECT tombstone FROM sendonce.commits WHERE id = $1", id).Scan(&tomb); err != nil {
		return false, err
	}
	if tomb {
		return false, nil
	}
	// It landed on this server. A COMMIT whose wait for a synchronous standby was cut
	// short (its session ended) stays committed here without the standby having it:
	// this transaction takes a transaction id and commits, and its COMMIT waits for the
	// standby to have everything written before it, that one included. Only then did
	// it land for good.
	if _, err := tx.ExecContext(ctx, "SELECT pg_current_xact_id()"); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"
)

// checkpointer copies the WAL back into the database file on its own connection, in the
// background, so that no claim does the copying: SQLite's automatic checkpoint runs
// inside the commit that crosses its threshold, making that one claim several times
// slower than the others (the p99 in docs/benchmarks-history.md, the gate store's cost
// per claim, 2026-12-01). The store's own connection has
// automatic checkpoints off.
//
// Every so many commits it runs a passive checkpoint, which copies pages without
// blocking anyone, and then a restart checkpoint, which copies the few frames committed
// meanwhile and lets the next writer start the WAL from its beginning (a WAL that keeps
// growing makes every commit's fsync dearer: a sync that must also record the file's
// new size costs half as much again; docs/benchmarks-history.md, issue 15 in one
// sitting, 2026-12-02 night). The restart takes this process's
// turn on the store first: SQLite's busy handler polls, and a process claiming back to
// back would take the write lock again before every poll, the restart failing for as
// long as the claims went on. So this process's next transaction waits for those few
// frames' copy (one claim in every so many); other processes' writers wait at most
// restartWait, after which, or with a reader in the way, the restart gives up until
// next time. Neither changes what a committed transaction made durable.
type checkpointer struct {
	db      *sql.DB
	turn    turn  // the backend's: held by each transaction of this process
	every   int64 // wake after this many commits
	commits atomic.Int64
	wake    chan struct{} // never closed: a commit may still wake it during close
	stop    chan struct{}
	stopped sync.WaitGroup
	closing sync.Once
}

// restartWait is the longest a restart checkpoint holds writers back: its connection's
// busy timeout.
const restartWait = 20 * time.Millisecond

// startCheckpointer checkpoints the file that dsn opens; dsn's busy timeout should be
// restartWait.
func startCheckpointer(dsn string, every int64, turn turn) (*checkpointer, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	c := &checkpointer{db: db, turn: turn, every: every, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	c.stopped.Add(1)
	go c.run()
	return c, nil
}

// committed counts a commit and wakes the checkpointer every so often; it never waits.
func (c *checkpointer) committed() {
	if c.commits.Add(1)%c.every == 0 {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

func (c *checkpointer) run() {
	defer c.stopped.Done()
	ctx := context.Background()
	for {
		select {
		case <-c.stop:
			return
		case <-c.wake:
		}
		// Errors (busy: a reader in the way) leave the WAL for the next try: a
		// checkpoint is never needed for correctness.
		if _, err := c.db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)"); err == nil {
			c.turn.take(ctx)
			c.db.ExecContext(ctx, "PRAGMA wal_checkpoint(RESTART)")
			c.turn.give()
		}
	}
}

// close stops the checkpointer and closes its connection; closing again does nothing.
func (c *checkpointer) close() {
	c.closing.Do(func() {
		close(c.stop)
		c.stopped.Wait()
		c.db.Close()
	})
}

package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"
)

// checkpointer copies the WAL back into the database file on its own connection, in the
// background, so that no claim waits for it: SQLite's automatic checkpoint runs inside
// the commit that crosses its threshold, making that one claim several times slower
// than the others (the p99 in BENCHMARKS.md). The store's own connection has automatic
// checkpoints off.
//
// Every so many commits it runs a passive checkpoint, which copies pages without
// blocking anyone, and then a restart checkpoint, which copies the few frames committed
// meanwhile and lets the next writer start the WAL from its beginning (a WAL that keeps
// growing makes every commit's fsync dearer: a sync that must also record the file's
// new size costs half as much again, BENCHMARKS.md). The restart blocks writers for as
// long as it takes, at most restartWait: with a reader in the way it gives up and tries
// again later. It takes this process's turn on the store first: SQLite's busy handler
// polls, and a process claiming back to back would take the write lock again before
// every poll, the restart failing for as long as the claims went on. Neither changes
// what a committed transaction made durable.
type checkpointer struct {
	db      *sql.DB
	turn    *sync.Mutex // the backend's: held by each transaction of this process
	every   int64       // wake after this many commits
	commits atomic.Int64
	wake    chan struct{}
	stopped sync.WaitGroup
	closing sync.Once
}

// restartWait is the longest a restart checkpoint holds writers back: its connection's
// busy timeout.
const restartWait = 20 * time.Millisecond

// startCheckpointer checkpoints the file that dsn opens; dsn's busy timeout should be
// restartWait.
func startCheckpointer(dsn string, every int64, turn *sync.Mutex) (*checkpointer, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	c := &checkpointer{db: db, turn: turn, every: every, wake: make(chan struct{}, 1)}
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
	for range c.wake {
		// Errors (busy: a reader in the way) leave the WAL for the next try: a
		// checkpoint is never needed for correctness.
		if _, err := c.db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)"); err == nil {
			c.turn.Lock()
			c.db.ExecContext(ctx, "PRAGMA wal_checkpoint(RESTART)")
			c.turn.Unlock()
		}
	}
}

// close stops the checkpointer and closes its connection; closing again does nothing.
func (c *checkpointer) close() {
	c.closing.Do(func() {
		close(c.wake)
		c.stopped.Wait()
		c.db.Close()
	})
}

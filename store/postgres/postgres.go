// Package postgres is the store.Backend a fleet of workstations shares: one PostgreSQL
// database that every workstation's sendonce asks, so that sibling tasks on different
// machines see one history.
//
// Every state-changing transaction runs SERIALIZABLE and with synchronous_commit on,
// both set by the store on the transaction itself (never left to the database's or the
// session's defaults), and is run again from the start only on a serialization failure
// or a deadlock (SQLSTATE 40001, 40P01). Times come from the database's clock (now() in
// the transaction). Nothing relies on session state: no session-level SET, no advisory
// lock outside a transaction, no server-side prepared statement a pooler could lose; the
// tables live in the schema "sendonce", named by each transaction's SET LOCAL
// search_path.
package postgres

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/sendonce/sendonce/internal/clock"
	"io"
	mathrand "math/rand/v2"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/store/internal/sqltx"
)

// SchemaVersion is the newest PostgreSQL schema this program knows.
const SchemaVersion = 3

// Options tune a backend. The zero value is what the CLI uses.
type Options struct {
	// LockTimeout bounds each wait for a lock, and each transaction's connection to the
	// database: past it the store fails closed. Default 10s.
	LockTimeout time.Duration

	// PrepareStatements prepares each statement on first use on a connection and keeps
	// its plan: for a long-lived process (a service), whose statements run many times.
	// Without it each statement is sent unprepared, in one round trip where preparing
	// costs two the first time: for a short-lived one (a command). A store URL that
	// names default_query_exec_mode decides instead.
	PrepareStatements bool

	// WorkstationClock, when set, replaces the database's clock with this workstation's:
	// only the clock-skew test's control sets it (through a test build), to show that
	// workstations whose clocks disagree then stop fencing each other.
	WorkstationClock func() time.Time

	// The seams below are set by this package's tests only.

	// clock turns the database's time into the store's: store/storetest's settable
	// clock. Nil keeps the database's.
	clock func(db time.Time) time.Time
	// isolation replaces SERIALIZABLE: the control that shows the isolation test can fail.
	isolation sql.IsolationLevel
	// pause is called at named points of a transaction (after_intents_of).
	pause func(point string)
	// tracer sees every statement sent, BEGIN and COMMIT included (the claim profile).
	tracer pgx.QueryTracer
	// readKeysFirst turns the new-keys statement off: a claim reads its keys first.
	readKeysFirst bool
}

// poolSize is how many connections a process keeps open to the database at most.
const poolSize = 8

// Backend is a PostgreSQL store.Backend.
type Backend struct {
	db           *sql.DB
	display      string // the URL without secrets
	opt          Options
	foundVersion int
}

// CheckURL refuses a store URL that carries a password: a command line is readable by
// every local user. The password belongs in PGPASSFILE (~/.pgpass) or a pg_service file.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return gate.Invalidf("store URL: %v", err)
	}
	if _, has := u.User.Password(); has {
		return gate.Invalidf("the store URL carries a password, and command lines are readable by every local user: put it in PGPASSFILE (~/.pgpass, 0600) or a pg_service file, and give the URL without it")
	}
	for name := range u.Query() {
		if strings.EqualFold(name, "password") {
			return gate.Invalidf("the store URL carries a password parameter, and command lines are readable by every local user: put it in PGPASSFILE (~/.pgpass, 0600) or a pg_service file")
		}
	}
	return nil
}

// Redacted is the URL as it may be printed: no password, no query values that could
// hold one.
func Redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "postgres://(unreadable)"
	}
	u.User = url.User(u.User.Username())
	if u.User.Username() == "" {
		u.User = nil
	}
	return u.Redacted()
}

func open(raw string, opt Options) (*Backend, error) {
	if err := CheckURL(raw); err != nil {
		return nil, err
	}
	if opt.LockTimeout <= 0 {
		opt.LockTimeout = 10 * time.Second
	}
	if opt.isolation == 0 {
		opt.isolation = sql.LevelSerializable
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, gate.Invalidf("store URL %s: %v", Redacted(raw), err)
	}
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		return nil, gate.Invalidf("store URL %s: %v", Redacted(raw), err)
	}
	// A long-lived process prepares each statement once per connection and keeps its
	// plan (pgx's statement cache); a short-lived one sends each unprepared. The URL's
	// default_query_exec_mode, when named, decides: a pooler in transaction mode that
	// does not keep prepared statements (PgBouncer before 1.21, or without
	// max_prepared_statements) needs "exec" there, and the error says so (explainPooler).
	if _, named := u.Query()["default_query_exec_mode"]; !named {
		cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
		if opt.PrepareStatements {
			cfg.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
		}
	}
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > opt.LockTimeout {
		cfg.ConnectTimeout = opt.LockTimeout
	}
	cfg.Tracer = opt.tracer
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(poolSize)
	db.SetMaxIdleConns(poolSize) // kept open: a connection's prepared statements live with it
	return &Backend{db: db, display: Redacted(raw), opt: opt}, nil
}

// Create makes the sendonce schema in the database at raw, under a transaction-scoped
// lock (two inits at once make one schema). A sendonce schema of this version is left
// as it is (Found says which); an older one is store.ErrUpgradeNeeded (Upgrade migrates).
func Create(ctx context.Context, raw string, opt Options) (*Backend, error) {
	b, err := open(raw, opt)
	if err != nil {
		return nil, err
	}
	if err := b.migrate(ctx, true); err != nil {
		b.db.Close()
		return nil, err
	}
	return b, nil
}

// Open opens an existing store: no sendonce schema is store.ErrNotInitialized, an
// older one store.ErrUpgradeNeeded, a newer one an error (upgrade sendonce).
func Open(ctx context.Context, raw string, opt Options) (*Backend, error) {
	b, err := open(raw, opt)
	if err != nil {
		return nil, err
	}
	v, err := b.version(ctx)
	if err == nil {
		b.foundVersion = v
		err = check(v, b.display)
	}
	if err != nil {
		b.db.Close()
		return nil, err
	}
	return b, nil
}

// Upgrade opens an existing store and migrates it to this program's schema, under the
// same lock as Create; it reports the schema it found.
func Upgrade(ctx context.Context, raw string, opt Options) (*Backend, int, error) {
	b, err := open(raw, opt)
	if err != nil {
		return nil, 0, err
	}
	if err := b.migrate(ctx, false); err != nil {
		b.db.Close()
		return nil, 0, err
	}
	return b, b.foundVersion, nil
}

func check(v int, where string) error {
	switch {
	case v == 0:
		return fmt.Errorf("%s has no sendonce schema: %w", where, store.ErrNotInitialized)
	case v < SchemaVersion:
		return fmt.Errorf("%s has schema %d, older than this sendonce's %d: %w", where, v, SchemaVersion, store.ErrUpgradeNeeded)
	case v > SchemaVersion:
		return fmt.Errorf("%s has schema %d, newer than this sendonce knows (%d): upgrade sendonce", where, v, SchemaVersion)
	}
	return nil
}

// version reads the schema version: 0 when there is no sendonce schema.
func (b *Backend) version(ctx context.Context) (int, error) {
	v, err := schemaVersion(ctx, b.db)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", b.display, err)
	}
	return v, nil
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// schemaVersion reads the sendonce schema's version: 0 when there is none.
func schemaVersion(ctx context.Context, q querier) (int, error) {
	var exists bool
	if err := q.QueryRowContext(ctx, "SELECT to_regclass('sendonce.schema_version') IS NOT NULL").Scan(&exists); err != nil || !exists {
		return 0, err
	}
	var v int
	err := q.QueryRowContext(ctx, "SELECT version FROM sendonce.schema_version WHERE id = 1").Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// migrationLock is the key of the transaction-scoped advisory lock init and upgrade
// take (a transaction lock: released at commit, safe behind a pooler).
const migrationLock = 0x73656e646f6e6365 // "sendonce"

// migrate creates (create) or upgrades the schema, under the migration lock.
func (b *Backend) migrate(ctx context.Context, create bool) error {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", b.display, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrationLock)); err != nil {
		return err
	}
	v, err := schemaVersion(ctx, tx)
	if err != nil {
		return err
	}
	b.foundVersion = v
	switch {
	case v > SchemaVersion:
		return check(v, b.display)
	case v == SchemaVersion:
		return nil
	case v == 0 && !create:
		return check(v, b.display)
	case v > 0 && create:
		return fmt.Errorf("%s has schema %d, older than this sendonce's %d: %w", b.display, v, SchemaVersion, store.ErrUpgradeNeeded)
	}
	ms := migrations()
	for ; v < SchemaVersion; v++ {
		if v > 0 || b.foundVersion > 0 {
			if _, err := tx.ExecContext(ctx, "SELECT set_config('search_path', 'sendonce', true)"); err != nil {
				return err
			}
		}
		for i, st := range ms[v] {
			if _, err := tx.ExecContext(ctx, st); err != nil {
				return fmt.Errorf("migrating %s to schema %d (statement %d): %w", b.display, v+1, i+1, err)
			}
			if v == 0 && i == 0 { // CREATE SCHEMA: the rest goes in it
				if _, err := tx.ExecContext(ctx, "SELECT set_config('search_path', 'sendonce', true)"); err != nil {
					return err
				}
			}
		}
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return err
	}
	if b.foundVersion == 0 {
		if _, err := tx.ExecContext(ctx, "INSERT INTO sendonce.store_meta (id, store_id) VALUES (1, $1)", hex.EncodeToString(id[:])); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO sendonce.schema_version (id, version) VALUES (1, $1)
		ON CONFLICT (id) DO UPDATE SET version = excluded.version`, SchemaVersion); err != nil {
		return err
	}
	return tx.Commit()
}

// migrations[i] moves the schema from version i to i+1, one statement at a time (no
// statement holds two: the extended protocol takes one). Tables are named in the
// sendonce schema through the transaction's search_path.
func migrations() [][]string {
	return [][]string{{
		`CREATE SCHEMA sendonce`,
		`CREATE TABLE schema_version (id INT PRIMARY KEY CHECK (id = 1), version INT NOT NULL)`,
		`CREATE TABLE store_meta (id INT PRIMARY KEY CHECK (id = 1), store_id TEXT NOT NULL)`,
		`CREATE TABLE intents (
	id         BIGSERIAL PRIMARY KEY,
	created_at BIGINT NOT NULL,
	revision   INT NOT NULL DEFAULT 0
)`,
		`CREATE TABLE keys (
	key       TEXT PRIMARY KEY,
	intent_id BIGINT NOT NULL REFERENCES intents(id),
	version   TEXT NOT NULL,
	strength  TEXT NOT NULL CHECK (strength IN ('strong', 'weak')),
	bound_at  BIGINT NOT NULL
)`,
		`CREATE INDEX keys_intent ON keys(intent_id)`,
		// Fencing tokens come from a sequence: it only increases, and unlike a counter row
		// it never makes two concurrent claims conflict.
		`CREATE SEQUENCE fencing_tokens AS BIGINT MINVALUE 1 NO CYCLE`,
		`CREATE TABLE attempts (
	token            BIGINT PRIMARY KEY,
	intent_id        BIGINT NOT NULL REFERENCES intents(id),
	revision         INT NOT NULL,
	task             TEXT NOT NULL,
	dispatch_id      TEXT NOT NULL UNIQUE,
	claimed_at       BIGINT NOT NULL,
	lease_expires_at BIGINT NOT NULL,
	delivery         TEXT CHECK (delivery IN ('pending', 'confirmed', 'failed')),
	acceptance       TEXT CHECK (acceptance IN ('pending', 'accepted', 'rejected')),
	ended_at         BIGINT,
	evidence         TEXT NOT NULL DEFAULT '',
	chain_head       TEXT NOT NULL DEFAULT ''
)`,
		`CREATE INDEX attempts_intent ON attempts(intent_id, token)`,
		`CREATE TABLE crossings (
	seq        BIGSERIAL,
	token      BIGINT NOT NULL REFERENCES attempts(token),
	boundary   TEXT NOT NULL,
	at         BIGINT NOT NULL,
	chain_head TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (token, boundary)
)`,
		`CREATE TABLE authorizers (name TEXT PRIMARY KEY, public_key BYTEA NOT NULL, added_at BIGINT NOT NULL, revoked_at BIGINT)`,
		`CREATE TABLE used_nonces (nonce TEXT PRIMARY KEY, used_at BIGINT NOT NULL)`,
		`CREATE TABLE events (
	seq         BIGSERIAL PRIMARY KEY,
	at          BIGINT NOT NULL,
	intent_id   BIGINT NOT NULL,
	kind        TEXT NOT NULL,
	key         TEXT NOT NULL DEFAULT '',
	task        TEXT NOT NULL DEFAULT '',
	token       BIGINT NOT NULL DEFAULT 0,
	dispatch_id TEXT NOT NULL DEFAULT '',
	revision    INT NOT NULL DEFAULT 0,
	detail      TEXT NOT NULL DEFAULT '{}'
)`,
		`CREATE INDEX events_intent ON events(intent_id, seq)`,
		`CREATE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION '%', TG_ARGV[0]; END $$`,
		`CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
	FOR EACH STATEMENT EXECUTE FUNCTION refuse_change('the event log is append-only')`,
		`CREATE TABLE display_leases (
	display          TEXT PRIMARY KEY,
	task             TEXT NOT NULL,
	token            BIGINT NOT NULL,
	lease_expires_at BIGINT NOT NULL,
	released         INT NOT NULL DEFAULT 0
)`,
		`CREATE TABLE provider_objects (object_id TEXT PRIMARY KEY, dispatch_id TEXT NOT NULL, bound_at BIGINT NOT NULL)`,
		`CREATE TABLE workstations (id TEXT PRIMARY KEY, public_key BYTEA NOT NULL, registered_at BIGINT NOT NULL)`,
	}, {
		`CREATE TABLE requests (
	scope       TEXT NOT NULL,
	id          TEXT NOT NULL,
	fingerprint TEXT NOT NULL,
	response    BYTEA NOT NULL,
	at          BIGINT NOT NULL,
	PRIMARY KEY (scope, id)
)`,
	}, {
		// One row per state-changing transaction, inserted by its first statement: when
		// the connection is lost while COMMIT is in flight, a tombstone of the same id
		// tells whether it landed (see resolve).
		`CREATE TABLE commits (
	id        TEXT PRIMARY KEY,
	at        BIGINT NOT NULL,
	tombstone BOOLEAN NOT NULL DEFAULT false
)`,
		`CREATE INDEX commits_at ON commits(at)`,
		// Where an attempt runs and what it delivers: reconcile on another workstation
		// works from these.
		`ALTER TABLE attempts ADD COLUMN workstation TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE attempts ADD COLUMN file_name TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE attempts ADD COLUMN size BIGINT NOT NULL DEFAULT 0`,
		// An attempt copied from another store (store copy): that store's id and the
		// token it had there, which its evidence bundle names.
		`ALTER TABLE attempts ADD COLUMN copied_from TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE attempts ADD COLUMN source_token BIGINT NOT NULL DEFAULT 0`,
		// No foreign keys: a foreign key's check reads the referenced index page, and the
		// newest intent (or attempt) is always on the last page, where every concurrent
		// claim inserts its own: under serializable isolation each two claims of distinct
		// keys then read what the other writes, and one of them is aborted. The rows they
		// guarded are written together, in one transaction, by the store's own code.
		`ALTER TABLE keys DROP CONSTRAINT keys_intent_id_fkey`,
		`ALTER TABLE attempts DROP CONSTRAINT attempts_intent_id_fkey`,
		`ALTER TABLE crossings DROP CONSTRAINT crossings_token_fkey`,
	}}
}

// Found is the schema version the store had when it was opened (0: it was just made).
func (b *Backend) Found() int { return b.foundVersion }

// Display is the store as printed: its URL without secrets.
func (b *Backend) Display() string { return b.display }

// Close closes the connections.
func (b *Backend) Close() error { return b.db.Close() }

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

// idleTimeout bounds a transaction: the server ends a session idle in one for longer
// (so a transaction whose client went away cannot commit later), and the client gives
// up waiting for it.
func (b *Backend) idleTimeout() time.Duration { return b.opt.LockTimeout + 5*time.Second }

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
	return !tomb, nil
}

// notCommitted is an error after which nothing of the transaction is kept: found
// before COMMIT was sent, or (resolved) a COMMIT that resolve showed did not land.
type notCommitted struct {
	err      error
	resolved bool
	atBegin  bool // found before the transaction began: on taking a connection, or at BEGIN
}

func (e *notCommitted) Error() string { return e.err.Error() }
func (e *notCommitted) Unwrap() error { return e.err }

// pgTx is the shared SQL Tx with this package's round trips saved and test points.
type pgTx struct {
	sqltx.Tx
	pause         func(string)
	readKeysFirst bool
	token         uint64 // a fencing token NewIntent or BindNewKeys took, not yet handed out
}

// NewIntent makes an intent and, in the same round trip, takes the fencing token its
// first attempt will hold (NextToken hands it out): a new intent's claim is granted.
// A token taken and never handed out is a gap in the sequence, which fencing allows.
// It writes only intents and reads only the sequence: the deferred writes (sqltx) may
// go after it.
func (t *pgTx) NewIntent(at time.Time) (int64, error) {
	var id int64
	var token uint64
	err := t.SQL.QueryRowContext(t.Context(), "INSERT INTO intents (created_at) VALUES ($1) RETURNING id, nextval('fencing_tokens')",
		sqltx.Nanos(at)).Scan(&id, &token)
	if err == nil {
		t.token = token
	}
	return id, err
}

// BindNewKeys binds a claim's keys, if no one bound any of them, to a new intent, and
// takes the intent's first fencing token, in one statement, without reading the keys
// first (store.NewKeysBinder): under SERIALIZABLE, a read of the keys' index locks the
// page it reads, and every claim that writes into that page then conflicts with it, so
// that concurrent claims of distinct new keys fail each other. The keys go in first (in
// order, so that two claims of the same keys never wait on each other crosswise), and
// the intent, with its fencing token, only if all of them did. When none did (they are
// bound: the claim reads them) nothing is written; when some did (an alias of a bound
// key), they are deleted again, in a second statement, and the claim reads. Either way
// an intent number is skipped, never a fencing token: a refused claim must not move the
// counter a workstation checks for a rolled-back store (Claim's MinToken). An insert
// that finds a key bound by a transaction not yet committed waits for it; once that
// committed, it fails with a serialization failure under SERIALIZABLE (the claim runs
// again and finds the key bound), and inserts nothing under READ COMMITTED.
func (t *pgTx) BindNewKeys(keys []store.KeyRecord, at time.Time) (int64, error) {
	if t.readKeysFirst {
		return 0, nil
	}
	if t.pause != nil {
		t.pause("before_new_keys")
	}
	names, versions, strengths := make([]string, len(keys)), make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		names[i], versions[i], strengths[i] = k.Key, k.Version, string(k.Strength)
	}
	var id int64
	var token sql.NullInt64
	var inserted int
	err := t.SQL.QueryRowContext(t.Context(), `WITH ids AS (SELECT nextval('intents_id_seq') AS id),
		k AS (INSERT INTO keys (key, intent_id, version, strength, bound_at)
			SELECT n.key, ids.id, n.version, n.strength, $1 FROM ids, unnest($2::text[], $3::text[], $4::text[]) AS n(key, version, strength)
			ORDER BY n.key
			ON CONFLICT (key) DO NOTHING RETURNING key),
		i AS (INSERT INTO intents (id, created_at) SELECT id, $1 FROM ids WHERE (SELECT count(*) FROM k) = $5
			RETURNING id, nextval('fencing_tokens') AS token)
		SELECT ids.id, (SELECT token FROM i), (SELECT count(*) FROM k) FROM ids`,
		sqltx.Nanos(at), names, versions, strengths, len(keys)).Scan(&id, &token, &inserted)
	switch {
	case err != nil:
		return 0, err
	case inserted == len(keys) && token.Valid:
		t.token = uint64(token.Int64)
		return id, nil
	case inserted > 0:
		_, err = t.SQL.ExecContext(t.Context(), "DELETE FROM keys WHERE key = ANY($1) AND intent_id = $2", names, id)
	}
	return 0, err
}

// NextToken takes the next fencing token from the sequence (or the one NewIntent took).
func (t *pgTx) NextToken() (uint64, error) {
	if n := t.token; n != 0 {
		t.token = 0
		return n, nil
	}
	var n uint64
	err := t.SQL.QueryRowContext(t.Context(), "SELECT nextval('fencing_tokens')").Scan(&n)
	return n, err
}

// LastToken is the sequence's last value (0 before the first token).
func (t *pgTx) LastToken() (uint64, error) {
	var n uint64
	err := t.SQL.QueryRowContext(t.Context(), "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM fencing_tokens").Scan(&n)
	return n, err
}

func (t *pgTx) IntentsOf(keys []string) (map[string]int64, error) {
	m, err := t.Tx.IntentsOf(keys)
	if err == nil && t.pause != nil {
		t.pause("after_intents_of")
	}
	return m, err
}

// ForgetRequests forgets the stored answers before before, and the commit markers of
// the same age (a marker is needed only while a lost COMMIT's session may live).
func (t *pgTx) ForgetRequests(before time.Time) (int, error) {
	n, err := t.Tx.ForgetRequests(before)
	if err == nil {
		_, err = t.SQL.ExecContext(t.Context(), "DELETE FROM commits WHERE at < $1", sqltx.Nanos(before))
	}
	return n, err
}

// AdvanceTokens raises the fencing sequence to at least n (store copy).
func (t *pgTx) AdvanceTokens(n uint64) error {
	t.token = 0 // taken before the advance: never handed out after it
	last, err := t.LastToken()
	if err != nil || n <= last {
		return err
	}
	_, err = t.SQL.ExecContext(t.Context(), "SELECT setval('fencing_tokens', $1)", int64(n))
	return err
}

// RetiredTo: a PostgreSQL store is a copy's target, never its source.
func (t *pgTx) RetiredTo() (string, error) { return "", nil }

// Retire refuses: a PostgreSQL store is not the source of a copy.
func (t *pgTx) Retire(string) error {
	return gate.Invalidf("a PostgreSQL store is not the source of a copy")
}

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
	"context"
	"database/sql"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sendonce/sendonce/gate"
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
	acceptAsync  bool        // the URL accepts asynchronous standbys (AcceptAsyncParam)
	repl         Replication // what the server said at open
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
	display := Redacted(raw)
	acceptAsync, raw, err := acceptsAsync(raw)
	if err != nil {
		return nil, err
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
	return &Backend{db: db, display: display, opt: opt, acceptAsync: acceptAsync}, nil
}

// Create makes the sendonce schema in the database at raw, under a transaction-scoped
// lock (two inits at once make one schema). A sendonce schema of this version is left
// as it is (Found says which); an older one is store.ErrUpgradeNeeded (Upgrade migrates).
func Create(ctx context.Context, raw string, opt Options) (*Backend, error) {
	b, err := open(raw, opt)
	if err != nil {
		return nil, err
	}
	if err := b.checkReplication(ctx); err != nil {
		b.db.Close()
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
	err = b.checkReplication(ctx)
	if err == nil {
		var v int
		v, err = b.version(ctx)
		b.foundVersion = v
		if err == nil {
			err = check(v, b.display)
		}
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
	if err := b.checkReplication(ctx); err != nil {
		b.db.Close()
		return nil, 0, err
	}
	if err := b.migrate(ctx, false); err != nil {
		b.db.Close()
		return nil, 0, err
	}
	return b, b.foundVersion, nil
}

// Found is the schema version the store had when it was opened (0: it was just made).
func (b *Backend) Found() int { return b.foundVersion }

// Display is the store as printed: its URL without secrets.
func (b *Backend) Display() string { return b.display }

// Close closes the connections.
func (b *Backend) Close() error { return b.db.Close() }

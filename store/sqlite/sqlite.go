// Package sqlite is the store.Backend for one workstation: a SQLite file in WAL mode
// with synchronous FULL, shared by every process on the machine. Claims run in
// BEGIN IMMEDIATE transactions, so of many processes claiming at once exactly one
// commits first.
package sqlite

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Options tune a backend. The zero value is what the CLI uses.
type Options struct {
	// LockTimeout is how long to wait for another process's transaction before failing
	// closed. Default 10s.
	LockTimeout time.Duration
	// Clock is the one clock every lease is measured by. Default time.Now.
	Clock func() time.Time
}

// Backend is a SQLite store.Backend.
type Backend struct {
	db           *sql.DB
	clock        func() time.Time
	path         string
	foundVersion int // the schema found when opened, before any migration
}

// Create makes a new store at path (its folder must exist): the file is created
// exclusively, mode 0600, without following a link, so a file someone else put there is
// never adopted. Only 'sendonce init' calls it: every other command opens with Open, so
// a typo in a path never silently makes a second store.
func Create(ctx context.Context, path string, opt Options) (*Backend, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", path, err)
	}
	f.Close()
	b, err := open(path, opt, "rw")
	if err == nil {
		if err = b.migrate(ctx, migrateCreate); err != nil {
			b.db.Close()
		}
	}
	if err != nil {
		os.Remove(path) // ours, just made: a failed init leaves nothing to refuse later
		os.Remove(path + "-wal")
		os.Remove(path + "-shm")
		return nil, err
	}
	return b, nil
}

// Open opens an existing store. A missing, empty or foreign file is ErrNotInitialized;
// a schema older than this program's is store.ErrUpgradeNeeded (only Upgrade migrates),
// and one newer than it knows is an error too.
func Open(ctx context.Context, path string, opt Options) (*Backend, error) {
	return openExisting(ctx, path, opt, migrateNone)
}

// Upgrade opens an existing store and migrates it to this program's schema; it reports
// the schema it found.
func Upgrade(ctx context.Context, path string, opt Options) (*Backend, int, error) {
	b, err := openExisting(ctx, path, opt, migrateUpgrade)
	if err != nil {
		return nil, 0, err
	}
	return b, b.foundVersion, nil
}

// migration modes: what migrate may do with the schema it finds.
type migration int

const (
	migrateNone    migration = iota // open: only this program's schema
	migrateCreate                   // a new file: create the whole schema
	migrateUpgrade                  // an older sendonce schema: migrate it (never a file that is not a store)
)

func openExisting(ctx context.Context, path string, opt Options, mode migration) (*Backend, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%s does not exist: %w", path, store.ErrNotInitialized)
	case err != nil:
		return nil, err
	case fi.IsDir():
		return nil, fmt.Errorf("%s is a directory: %w", path, store.ErrNotInitialized)
	case fi.Size() == 0:
		return nil, fmt.Errorf("%s is empty: %w", path, store.ErrNotInitialized)
	}
	b, err := open(path, opt, "rw")
	if err != nil {
		return nil, err
	}
	if err := b.migrate(ctx, mode); err != nil {
		b.db.Close()
		return nil, err
	}
	return b, nil
}

func open(path string, opt Options, mode string) (*Backend, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	lock := opt.LockTimeout
	if lock <= 0 {
		lock = 10 * time.Second
	}
	q := url.Values{}
	q.Set("mode", mode)
	q.Set("_txlock", "immediate")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", lock.Milliseconds()))
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(1)")
	dsn := (&url.URL{Scheme: "file", Path: abs, RawQuery: q.Encode()}).String()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1) // one connection: transactions in this process queue here, not in SQLite
	clock := opt.Clock
	if clock == nil {
		clock = time.Now
	}
	return &Backend{db: db, clock: clock, path: abs}, nil
}

// Path is the store's absolute path.
func (b *Backend) Path() string { return b.path }

// Close closes the database.
func (b *Backend) Close() error { return b.db.Close() }

// SchemaVersion is the newest schema this program knows.
const SchemaVersion = 6

// migrations[i] moves the schema from version i to i+1.
func migrations() []string {
	return []string{`
CREATE TABLE intents (
	id         INTEGER PRIMARY KEY,
	created_at INTEGER NOT NULL,
	revision   INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE keys (
	key       TEXT PRIMARY KEY,
	intent_id INTEGER NOT NULL REFERENCES intents(id),
	version   TEXT NOT NULL,
	strength  TEXT NOT NULL CHECK (strength IN ('strong', 'weak')),
	bound_at  INTEGER NOT NULL
);
CREATE INDEX keys_intent ON keys(intent_id);
CREATE TABLE token_counter (id INTEGER PRIMARY KEY CHECK (id = 1), last INTEGER NOT NULL);
INSERT INTO token_counter VALUES (1, 0);
CREATE TABLE attempts (
	token            INTEGER PRIMARY KEY,
	intent_id        INTEGER NOT NULL REFERENCES intents(id),
	revision         INTEGER NOT NULL,
	task             TEXT NOT NULL,
	dispatch_id      TEXT NOT NULL UNIQUE,
	claimed_at       INTEGER NOT NULL,
	lease_expires_at INTEGER NOT NULL,
	delivery         TEXT CHECK (delivery IN ('pending', 'confirmed', 'failed')),
	acceptance       TEXT CHECK (acceptance IN ('pending', 'accepted', 'rejected')),
	ended_at         INTEGER,
	evidence         TEXT NOT NULL DEFAULT '',
	chain_head       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX attempts_intent ON attempts(intent_id, token);
CREATE TABLE crossings (
	token      INTEGER NOT NULL REFERENCES attempts(token),
	boundary   TEXT NOT NULL,
	at         INTEGER NOT NULL,
	chain_head TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (token, boundary)
);
CREATE TABLE authorizers (name TEXT PRIMARY KEY, public_key BLOB NOT NULL, added_at INTEGER NOT NULL);
CREATE TABLE used_nonces (nonce TEXT PRIMARY KEY, used_at INTEGER NOT NULL);
CREATE TABLE events (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	at          INTEGER NOT NULL,
	intent_id   INTEGER NOT NULL,
	kind        TEXT NOT NULL,
	key         TEXT NOT NULL DEFAULT '',
	task        TEXT NOT NULL DEFAULT '',
	token       INTEGER NOT NULL DEFAULT 0,
	dispatch_id TEXT NOT NULL DEFAULT '',
	revision    INTEGER NOT NULL DEFAULT 0,
	detail      TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX events_intent ON events(intent_id, seq);
CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
CREATE TRIGGER tokens_only_increase BEFORE UPDATE ON token_counter WHEN NEW.last <= OLD.last BEGIN SELECT RAISE(ABORT, 'fencing tokens only increase'); END;
`, `
CREATE TABLE display_leases (
	display          TEXT PRIMARY KEY,
	task             TEXT NOT NULL,
	token            INTEGER NOT NULL,
	lease_expires_at INTEGER NOT NULL,
	released         INTEGER NOT NULL DEFAULT 0
);
`, `
CREATE TABLE provider_objects (
	object_id   TEXT PRIMARY KEY,
	dispatch_id TEXT NOT NULL,
	bound_at    INTEGER NOT NULL
);
`, `
CREATE TABLE store_meta (id INTEGER PRIMARY KEY CHECK (id = 1), store_id TEXT NOT NULL);
ALTER TABLE authorizers ADD COLUMN revoked_at INTEGER;
`, `
CREATE TABLE workstations (id TEXT PRIMARY KEY, public_key BLOB NOT NULL, registered_at INTEGER NOT NULL);
`, `
CREATE TABLE requests (
	scope       TEXT NOT NULL,
	id          TEXT NOT NULL,
	fingerprint TEXT NOT NULL,
	response    BLOB NOT NULL,
	at          INTEGER NOT NULL,
	PRIMARY KEY (scope, id)
);
`}
}

// afterMigration[v] runs in the same transaction right after the schema reaches v:
// the steps SQL alone cannot do.
var afterMigration = map[int]func(ctx context.Context, tx *sql.Tx) error{
	4: func(ctx context.Context, tx *sql.Tx) error {
		// A random id names this store in every signed statement, so one signature is
		// never accepted by two stores.
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO store_meta (id, store_id) VALUES (1, ?)", hex.EncodeToString(id[:])); err != nil {
			return err
		}
		return bindCurrentKeys(ctx, tx)
	},
}

// bindCurrentKeys binds, beside every key of an older scheme, the current scheme's key
// of the same destination and bytes to the same intent: after an upgrade every spelling
// that reached a consumed intent still reaches it.
func bindCurrentKeys(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, "SELECT key, intent_id, strength, bound_at FROM keys WHERE version != ?", gate.KeyVersion)
	if err != nil {
		return err
	}
	type row struct {
		key, strength string
		intent, at    int64
	}
	var old []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.key, &r.intent, &r.strength, &r.at); err != nil {
			rows.Close()
			return err
		}
		old = append(old, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, r := range old {
		k, err := gate.ParseKey(r.key)
		if err != nil {
			return fmt.Errorf("the stored key %q does not parse: %w", r.key, err)
		}
		up, err := k.Upgrade()
		if err != nil {
			continue // the current scheme refuses the identity: no current key can name it
		}
		var bound int64
		err = tx.QueryRowContext(ctx, "SELECT intent_id FROM keys WHERE key = ?", up.String()).Scan(&bound)
		switch {
		case err == nil && bound != r.intent:
			// Two spellings v1 kept apart are one destination now. Which intent the key
			// belongs to is for a person to decide: stop, and name them.
			return fmt.Errorf("the v1 keys of intents %d and %d name one destination under %s (%s): the store cannot be upgraded until a person settles which delivery it is; nothing was changed", bound, r.intent, gate.KeyVersion, up)
		case err == nil:
			continue
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO keys (key, intent_id, version, strength, bound_at) VALUES (?, ?, ?, ?, ?)",
			up.String(), r.intent, up.Version(), r.strength, r.at); err != nil {
			return err
		}
	}
	return nil
}

func (b *Backend) migrate(ctx context.Context, mode migration) error {
	var version int
	if err := b.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("reading %s: %w", b.path, err)
	}
	b.foundVersion = version
	ms := migrations()
	switch {
	case version > len(ms):
		return fmt.Errorf("%s has schema version %d, newer than this sendonce knows (%d): upgrade sendonce", b.path, version, len(ms))
	case version == len(ms):
		return nil
	case version == 0 && mode != migrateCreate:
		return fmt.Errorf("%s: %w", b.path, store.ErrNotInitialized)
	case mode == migrateNone:
		return fmt.Errorf("%s has schema %d, older than this sendonce's %d: %w", b.path, version, len(ms), store.ErrUpgradeNeeded)
	}
	if version == 0 {
		// journal_mode is a property of the file; it cannot change inside a transaction.
		if _, err := b.db.ExecContext(ctx, "PRAGMA journal_mode=WAL"); err != nil {
			return err
		}
	}
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// Read the version again under the write lock: another init may have won.
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return err
	}
	for ; version < len(ms); version++ {
		if _, err := tx.ExecContext(ctx, ms[version]); err != nil {
			return fmt.Errorf("migrating %s to schema %d: %w", b.path, version+1, err)
		}
		if after := afterMigration[version+1]; after != nil {
			if err := after(ctx, tx); err != nil {
				return fmt.Errorf("migrating %s to schema %d: %w", b.path, version+1, err)
			}
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", version+1)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Update implements store.Backend.
func (b *Backend) Update(ctx context.Context, fn func(store.Tx) error) error {
	tx, err := b.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: _txlock in the DSN
	if err != nil {
		return err
	}
	if err := fn(&sqlTx{tx: tx, now: b.clock()}); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// View implements store.Backend.
func (b *Backend) View(ctx context.Context, fn func(store.Tx) error) error {
	tx, err := b.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(&sqlTx{tx: tx, now: b.clock()})
}

type sqlTx struct {
	tx  *sql.Tx
	now time.Time
}

func (t *sqlTx) Now() time.Time { return t.now }

func nanos(t time.Time) int64 { return t.UnixNano() }
func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func (t *sqlTx) IntentsOf(keys []string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, k := range keys {
		var id int64
		err := t.tx.QueryRow("SELECT intent_id FROM keys WHERE key = ?", k).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[k] = id
	}
	return out, nil
}

func (t *sqlTx) NewIntent(at time.Time) (int64, error) {
	r, err := t.tx.Exec("INSERT INTO intents (created_at) VALUES (?)", nanos(at))
	if err != nil {
		return 0, err
	}
	return r.LastInsertId()
}

func (t *sqlTx) Bind(intent int64, keys []store.KeyRecord, at time.Time) error {
	for _, k := range keys {
		_, err := t.tx.Exec(`INSERT INTO keys (key, intent_id, version, strength, bound_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET intent_id = excluded.intent_id, bound_at = excluded.bound_at`,
			k.Key, intent, k.Version, string(k.Strength), nanos(at))
		if err != nil {
			return err
		}
	}
	return nil
}

func (t *sqlTx) KeysOf(intent int64) ([]store.KeyRecord, error) {
	rows, err := t.tx.Query("SELECT key, version, strength FROM keys WHERE intent_id = ? ORDER BY bound_at, strength, key", intent)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.KeyRecord
	for rows.Next() {
		var k store.KeyRecord
		var s string
		if err := rows.Scan(&k.Key, &k.Version, &s); err != nil {
			return nil, err
		}
		k.Strength = gate.Strength(s)
		out = append(out, k)
	}
	return out, rows.Err()
}

func (t *sqlTx) Intent(intent int64) (gate.Intent, error) {
	var in gate.Intent
	if err := t.tx.QueryRow("SELECT revision FROM intents WHERE id = ?", intent).Scan(&in.Revision); err != nil {
		return in, fmt.Errorf("intent %d: %w", intent, err)
	}
	as, err := t.attempts(intent, true)
	if err != nil || len(as) == 0 {
		return in, err
	}
	in.Latest = &as[0].Attempt
	return in, nil
}

func (t *sqlTx) SetRevision(intent int64, revision int) error {
	_, err := t.tx.Exec("UPDATE intents SET revision = ? WHERE id = ?", revision, intent)
	return err
}

func (t *sqlTx) NextToken() (uint64, error) {
	var n uint64
	err := t.tx.QueryRow("UPDATE token_counter SET last = last + 1 WHERE id = 1 RETURNING last").Scan(&n)
	return n, err
}

func (t *sqlTx) InsertAttempt(intent int64, a gate.Attempt, at time.Time) error {
	_, err := t.tx.Exec(`INSERT INTO attempts (token, intent_id, revision, task, dispatch_id, claimed_at, lease_expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, a.Token, intent, a.Revision, a.Task, a.DispatchID, nanos(at), nanos(a.LeaseExpires))
	return err
}

func (t *sqlTx) AddCrossing(token uint64, b gate.Boundary, chainHead string, at time.Time) error {
	_, err := t.tx.Exec("INSERT INTO crossings (token, boundary, at, chain_head) VALUES (?, ?, ?, ?)", token, string(b), nanos(at), chainHead)
	return err
}

func (t *sqlTx) SetLease(token uint64, expires time.Time) error {
	return t.exactlyOne("UPDATE attempts SET lease_expires_at = ? WHERE token = ? AND ended_at IS NULL", nanos(expires), token)
}

func (t *sqlTx) SetOutcome(token uint64, axes gate.Axes, evidence, chainHead string, at time.Time) error {
	return t.exactlyOne(`UPDATE attempts SET delivery = ?, acceptance = ?, evidence = ?, chain_head = ?, ended_at = ?
		WHERE token = ? AND ended_at IS NULL`, string(axes.Delivery), string(axes.Acceptance), evidence, chainHead, nanos(at), token)
}

func (t *sqlTx) exactlyOne(q string, args ...any) error {
	r, err := t.tx.Exec(q, args...)
	if err != nil {
		return err
	}
	if n, err := r.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("expected to change one attempt, changed %d (%v)", n, err)
	}
	return nil
}

func (t *sqlTx) Attempts(intent int64) ([]store.AttemptRecord, error) {
	return t.attempts(intent, false)
}

func (t *sqlTx) AttemptByDispatch(dispatchID string) (*store.AttemptRecord, error) {
	as, err := t.queryAttempts("dispatch_id = ?", dispatchID)
	if err != nil || len(as) == 0 {
		return nil, err
	}
	return &as[0], nil
}

// attempts lists an intent's attempts oldest first, or only the latest.
func (t *sqlTx) attempts(intent int64, latestOnly bool) ([]store.AttemptRecord, error) {
	where := "intent_id = ? ORDER BY token"
	if latestOnly {
		where += " DESC LIMIT 1"
	}
	out, err := t.queryAttempts(where, intent)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Superseded = !latestOnly && i < len(out)-1 && !out[i].Recorded
	}
	return out, nil
}

// queryAttempts reads attempts and their crossings.
func (t *sqlTx) queryAttempts(where string, args ...any) ([]store.AttemptRecord, error) {
	q := `SELECT token, intent_id, revision, task, dispatch_id, claimed_at, lease_expires_at,
		COALESCE(delivery, ''), COALESCE(acceptance, ''), COALESCE(ended_at, 0), evidence, chain_head
		FROM attempts WHERE ` + where
	rows, err := t.tx.Query(q, args...)
	if err != nil {
		return nil, err
	}
	var out []store.AttemptRecord
	for rows.Next() {
		var a store.AttemptRecord
		var claimed, lease, ended int64
		var delivery, acceptance string
		if err := rows.Scan(&a.Token, &a.IntentID, &a.Revision, &a.Task, &a.DispatchID, &claimed, &lease, &delivery, &acceptance, &ended, &a.Evidence, &a.ChainHead); err != nil {
			rows.Close()
			return nil, err
		}
		a.ClaimedAt, a.LeaseExpires, a.EndedAt = fromNanos(claimed), fromNanos(lease), fromNanos(ended)
		if ended != 0 {
			a.Recorded, a.Axes = true, gate.Axes{Delivery: gate.Delivery(delivery), Acceptance: gate.Acceptance(acceptance)}
		}
		out = append(out, a)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Crossings, err = t.crossings(out[i].Token); err != nil {
			return nil, err
		}
		for _, c := range out[i].Crossings {
			out[i].Crossed = append(out[i].Crossed, c.Boundary)
		}
	}
	return out, nil
}

func (t *sqlTx) crossings(token uint64) ([]store.Crossing, error) {
	rows, err := t.tx.Query("SELECT boundary, at, chain_head FROM crossings WHERE token = ? ORDER BY at, rowid", token)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Crossing
	for rows.Next() {
		var c store.Crossing
		var b string
		var at int64
		if err := rows.Scan(&b, &at, &c.ChainHead); err != nil {
			return nil, err
		}
		c.Boundary, c.At = gate.Boundary(b), fromNanos(at)
		out = append(out, c)
	}
	return out, rows.Err()
}

func (t *sqlTx) NonceUsed(nonce string) (bool, error) {
	var n int
	err := t.tx.QueryRow("SELECT count(*) FROM used_nonces WHERE nonce = ?", nonce).Scan(&n)
	return n > 0, err
}

func (t *sqlTx) UseNonce(nonce string, at time.Time) error {
	_, err := t.tx.Exec("INSERT INTO used_nonces (nonce, used_at) VALUES (?, ?)", nonce, nanos(at))
	return err
}

func (t *sqlTx) AddAuthorizer(name string, pub ed25519.PublicKey, at time.Time) error {
	_, err := t.tx.Exec("INSERT INTO authorizers (name, public_key, added_at) VALUES (?, ?, ?)", name, []byte(pub), nanos(at))
	return err
}

func (t *sqlTx) AuthorizerNamed(name string) (bool, error) {
	var n int
	err := t.tx.QueryRow("SELECT count(*) FROM authorizers WHERE name = ?", name).Scan(&n)
	return n > 0, err
}

func (t *sqlTx) AuthorizerCount() (int, error) {
	var n int
	err := t.tx.QueryRow("SELECT count(*) FROM authorizers").Scan(&n)
	return n, err
}

func (t *sqlTx) RevokeAuthorizer(name string, at time.Time) error {
	_, err := t.tx.Exec("UPDATE authorizers SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL", nanos(at), name)
	return err
}

func (t *sqlTx) StoreID() (string, error) {
	var id string
	err := t.tx.QueryRow("SELECT store_id FROM store_meta WHERE id = 1").Scan(&id)
	return id, err
}

func (t *sqlTx) AddWorkstation(id string, pub ed25519.PublicKey, at time.Time) error {
	_, err := t.tx.Exec("INSERT INTO workstations (id, public_key, registered_at) VALUES (?, ?, ?)", id, []byte(pub), nanos(at))
	return err
}

func (t *sqlTx) Workstation(id string) (ed25519.PublicKey, error) {
	var pub []byte
	err := t.tx.QueryRow("SELECT public_key FROM workstations WHERE id = ?", id).Scan(&pub)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return ed25519.PublicKey(pub), err
}

func (t *sqlTx) Request(scope, id string) (*store.StoredRequest, error) {
	r := store.StoredRequest{Scope: scope, ID: id}
	var at int64
	err := t.tx.QueryRow("SELECT fingerprint, response, at FROM requests WHERE scope = ? AND id = ?", scope, id).Scan(&r.Fingerprint, &r.Response, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	r.At = fromNanos(at)
	return &r, err
}

func (t *sqlTx) ForgetRequests(before time.Time) (int, error) {
	res, err := t.tx.Exec("DELETE FROM requests WHERE at < ?", nanos(before))
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

func (t *sqlTx) StoreRequest(r store.StoredRequest) error {
	_, err := t.tx.Exec("INSERT INTO requests (scope, id, fingerprint, response, at) VALUES (?, ?, ?, ?, ?)", r.Scope, r.ID, r.Fingerprint, r.Response, nanos(r.At))
	return err
}

func (t *sqlTx) Authorizer(name string) (ed25519.PublicKey, error) {
	var pub []byte
	err := t.tx.QueryRow("SELECT public_key FROM authorizers WHERE name = ? AND revoked_at IS NULL", name).Scan(&pub)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return ed25519.PublicKey(pub), err
}

func (t *sqlTx) Append(e store.Event) error {
	detail, err := json.Marshal(e.Detail)
	if err != nil {
		return err
	}
	if e.Detail == nil {
		detail = []byte("{}")
	}
	_, err = t.tx.Exec(`INSERT INTO events (at, intent_id, kind, key, task, token, dispatch_id, revision, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, nanos(e.At), e.Intent, string(e.Kind), e.Key, e.Task, e.Token, e.DispatchID, e.Revision, string(detail))
	return err
}

func (t *sqlTx) Events(intent int64) ([]store.Event, error) {
	rows, err := t.tx.Query(`SELECT seq, at, intent_id, kind, key, task, token, dispatch_id, revision, detail
		FROM events WHERE intent_id = ? ORDER BY seq`, intent)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var e store.Event
		var at int64
		var kind, detail string
		if err := rows.Scan(&e.Seq, &at, &e.Intent, &kind, &e.Key, &e.Task, &e.Token, &e.DispatchID, &e.Revision, &detail); err != nil {
			return nil, err
		}
		e.At, e.Kind = fromNanos(at), store.EventKind(kind)
		if err := json.NewDecoder(strings.NewReader(detail)).Decode(&e.Detail); err != nil {
			return nil, fmt.Errorf("event %d: unreadable detail: %w", e.Seq, err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func (t *sqlTx) DisplayLease(display string) (*store.DisplayRecord, error) {
	var d store.DisplayRecord
	var exp, released int64
	err := t.tx.QueryRow("SELECT task, token, lease_expires_at, released FROM display_leases WHERE display = ?", display).Scan(&d.Task, &d.Token, &exp, &released)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	d.Display, d.LeaseExpires, d.Released = display, fromNanos(exp), released != 0
	return &d, nil
}

func (t *sqlTx) SetDisplayLease(d store.DisplayRecord) error {
	released := 0
	if d.Released {
		released = 1
	}
	_, err := t.tx.Exec(`INSERT INTO display_leases (display, task, token, lease_expires_at, released) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (display) DO UPDATE SET task = excluded.task, token = excluded.token, lease_expires_at = excluded.lease_expires_at, released = excluded.released`,
		d.Display, d.Task, d.Token, nanos(d.LeaseExpires), released)
	return err
}

func (t *sqlTx) ObjectDispatch(objectID string) (string, error) {
	var d string
	err := t.tx.QueryRow("SELECT dispatch_id FROM provider_objects WHERE object_id = ?", objectID).Scan(&d)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return d, err
}

func (t *sqlTx) BindObject(objectID, dispatchID string, at time.Time) error {
	_, err := t.tx.Exec("INSERT INTO provider_objects (object_id, dispatch_id, bound_at) VALUES (?, ?, ?)", objectID, dispatchID, nanos(at))
	return err
}

func (t *sqlTx) ResolveOutcome(token uint64, axes gate.Axes, at time.Time) error {
	return t.exactlyOne(`UPDATE attempts SET delivery = ?, acceptance = ?, ended_at = COALESCE(ended_at, ?) WHERE token = ?`,
		string(axes.Delivery), string(axes.Acceptance), nanos(at), token)
}

func (t *sqlTx) UnresolvedAttempts(now time.Time) ([]store.AttemptRecord, error) {
	return t.queryAttempts(`(delivery = 'pending' AND acceptance = 'pending')
		OR (ended_at IS NULL AND lease_expires_at <= ? AND token IN (SELECT token FROM crossings))
		ORDER BY token`, nanos(now))
}

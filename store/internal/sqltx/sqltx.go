// Package sqltx is the store.Tx that the SQL backends share: the same statements on
// SQLite (store/sqlite) and PostgreSQL (store/postgres), through database/sql.
package sqltx

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

// Tx is a store.Tx over a database/sql transaction: SQLite's and PostgreSQL's (through
// pgx's database/sql driver) run the same statements, written with ? placeholders.
type Tx struct {
	SQL Querier
	// Ctx, if set, is the caller's: once it is done every statement fails with its
	// error. (A *sql.Tx ends with its own context; the SQLite backend's transactions
	// have none.) Statements do not run under it otherwise: the SQLite driver starts a
	// goroutine for each statement run under a context that can end.
	Ctx context.Context
	// Bounded runs every statement under Ctx, so that one still running when Ctx ends
	// is cancelled (PostgreSQL, whose transactions run on a connection of their own).
	Bounded bool
	At      time.Time // the transaction's time on the store's one clock
	Dialect *Dialect
	// DeferEvents keeps appended events and writes them all in one statement at Flush,
	// which the backend calls before its COMMIT (and Events before it reads): one round
	// trip for a transaction's events where each costs one. On a dialect that
	// CombinesWrites (PostgreSQL), the writes nothing waits on (an attempt inserted, a
	// key bound) wait too, and go out in the same statement, before any other statement
	// of the transaction: so a claim sends its attempt, its keys and its events in one
	// round trip.
	DeferEvents bool
	// Statements, if set, reuses prepared statements across transactions (SQLite).
	Statements *Statements
	pending    []store.Event
	writes     []write
}

// write is a statement deferred until Flush: its text (with ? placeholders), its
// arguments and the row it writes (two writes of one row are never combined).
type write struct {
	q    string
	args []any
	row  string
}

// Querier is what a Tx runs its statements on: a *sql.Tx (PostgreSQL), or the *sql.Conn
// on which the backend began the transaction itself (SQLite: database/sql's own
// transactions start a goroutine each, a large part of a claim's cost there).
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Dialect is what differs between the engines for these statements.
type Dialect struct {
	// Numbered placeholders ($1, $2, ...) instead of ?: PostgreSQL.
	Numbered bool
	// CrossingOrder orders one attempt's crossings: by time, then insertion.
	CrossingOrder string
	// CombinesWrites: a statement may hold inserts in its WITH clause (PostgreSQL).
	CombinesWrites bool
	// BytewiseText: text compares byte by byte (SQLite's BINARY), so a prefix is a
	// range of an index; otherwise a prefix is matched with starts_with (PostgreSQL).
	BytewiseText bool
}

// SQLite is SQLite's dialect.
var SQLite = &Dialect{CrossingOrder: "at, rowid", BytewiseText: true}

// PostgreSQL is PostgreSQL's dialect.
var PostgreSQL = &Dialect{Numbered: true, CrossingOrder: "at, seq", CombinesWrites: true}

func (d *Dialect) bind(q string) string {
	if !d.Numbered {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// exec, query and queryRow run a statement, after the deferred writes.
func (t *Tx) exec(q string, args ...any) (sql.Result, error) {
	if err := t.flushWrites(); err != nil {
		return nil, err
	}
	return t.run(q, args...)
}

// run runs a statement at once.
func (t *Tx) run(q string, args ...any) (sql.Result, error) {
	q = t.Dialect.bind(q)
	if st := t.stmt(q); st != nil {
		return st.ExecContext(t.ctx(), args...)
	}
	return t.SQL.ExecContext(t.ctx(), q, args...)
}

func (t *Tx) query(q string, args ...any) (*sql.Rows, error) {
	if err := t.flushWrites(); err != nil {
		return nil, err
	}
	q = t.Dialect.bind(q)
	if st := t.stmt(q); st != nil {
		return st.QueryContext(t.ctx(), args...)
	}
	return t.SQL.QueryContext(t.ctx(), q, args...)
}

// row is a *sql.Row, or the error of the deferred writes sent before it.
type row struct {
	*sql.Row
	err error
}

func (r row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	return r.Row.Scan(dest...)
}

func (t *Tx) queryRow(q string, args ...any) row {
	if err := t.flushWrites(); err != nil {
		return row{err: err}
	}
	q = t.Dialect.bind(q)
	if st := t.stmt(q); st != nil {
		return row{Row: st.QueryRowContext(t.ctx(), args...)}
	}
	return row{Row: t.SQL.QueryRowContext(t.ctx(), q, args...)}
}

// write runs a statement whose answer nothing waits for, or defers it to Flush (see
// DeferEvents). row names the row it writes: a second write of a row already waiting
// sends what waits first.
func (t *Tx) write(row, q string, args ...any) error {
	if !t.DeferEvents || !t.Dialect.CombinesWrites {
		_, err := t.exec(q, args...)
		return err
	}
	if slices.ContainsFunc(t.writes, func(w write) bool { return w.row == row }) {
		if err := t.Flush(); err != nil {
			return err
		}
	}
	t.writes = append(t.writes, write{q: q, args: args, row: row})
	return nil
}

// flushWrites sends the deferred writes, with the events appended so far, if any wait.
func (t *Tx) flushWrites() error {
	if len(t.writes) == 0 {
		return nil
	}
	return t.Flush()
}

// ctx is the context statements run under: Ctx once it is done (so they fail at
// once), else one that never ends.
func (t *Tx) ctx() context.Context {
	if t.Ctx != nil && (t.Bounded || t.Ctx.Err() != nil) {
		return t.Ctx
	}
	return context.Background()
}

// Context is what a backend's own statements in the transaction run under.
func (t *Tx) Context() context.Context { return t.ctx() }

// Now implements store.Tx.
func (t *Tx) Now() time.Time { return t.At }

// Nanos is a time as the schema stores it: nanoseconds since 1970 (0 for none).
func Nanos(t time.Time) int64 { return t.UnixNano() }

// FromNanos reads a stored time.
func FromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func (t *Tx) IntentsOf(keys []string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, k := range keys {
		var id int64
		err := t.queryRow("SELECT intent_id FROM keys WHERE key = ?", k).Scan(&id)
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

func (t *Tx) NewIntent(at time.Time) (int64, error) {
	var id int64
	err := t.queryRow("INSERT INTO intents (created_at) VALUES (?) RETURNING id", Nanos(at)).Scan(&id)
	return id, err
}

func (t *Tx) Bind(intent int64, keys []store.KeyRecord, at time.Time) error {
	for _, k := range keys {
		err := t.write("keys "+k.Key, `INSERT INTO keys (key, intent_id, version, strength, bound_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET intent_id = excluded.intent_id, bound_at = excluded.bound_at`,
			k.Key, intent, k.Version, string(k.Strength), Nanos(at))
		if err != nil {
			return err
		}
	}
	return nil
}

func (t *Tx) KeysOf(intent int64) ([]store.KeyRecord, error) {
	rows, err := t.query("SELECT key, version, strength FROM keys WHERE intent_id = ? ORDER BY bound_at, strength, key", intent)
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

func (t *Tx) Intent(intent int64) (gate.Intent, error) {
	var in gate.Intent
	if err := t.queryRow("SELECT revision FROM intents WHERE id = ?", intent).Scan(&in.Revision); err != nil {
		return in, fmt.Errorf("intent %d: %w", intent, err)
	}
	as, err := t.attempts(intent, true)
	if err != nil || len(as) == 0 {
		return in, err
	}
	in.Latest = &as[0].Attempt
	return in, nil
}

func (t *Tx) SetRevision(intent int64, revision int) error {
	_, err := t.exec("UPDATE intents SET revision = ? WHERE id = ?", revision, intent)
	return err
}

func (t *Tx) NextToken() (uint64, error) {
	var n uint64
	err := t.queryRow("UPDATE token_counter SET last = last + 1 WHERE id = 1 RETURNING last").Scan(&n)
	return n, err
}

func (t *Tx) LastToken() (uint64, error) {
	var n uint64
	err := t.queryRow("SELECT last FROM token_counter WHERE id = 1").Scan(&n)
	return n, err
}

func (t *Tx) InsertAttempt(intent int64, a gate.Attempt, o store.Origin, evidence string, at time.Time) error {
	return t.write(fmt.Sprint("attempts ", a.Token), `INSERT INTO attempts (token, intent_id, revision, task, dispatch_id, claimed_at, lease_expires_at, workstation, file_name, size, evidence, copied_from, source_token)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, a.Token, intent, a.Revision, a.Task, a.DispatchID, Nanos(at), Nanos(a.LeaseExpires), o.Workstation, o.FileName, o.Size, evidence, o.CopiedFrom, o.SourceToken)
}

func (t *Tx) AddCrossing(token uint64, b gate.Boundary, chainHead string, at time.Time) error {
	_, err := t.exec("INSERT INTO crossings (token, boundary, at, chain_head) VALUES (?, ?, ?, ?)", token, string(b), Nanos(at), chainHead)
	return err
}

func (t *Tx) SetLease(token uint64, expires time.Time) error {
	return t.exactlyOne("UPDATE attempts SET lease_expires_at = ? WHERE token = ? AND ended_at IS NULL", Nanos(expires), token)
}

func (t *Tx) SetOutcome(token uint64, axes gate.Axes, evidence, chainHead string, at time.Time) error {
	return t.exactlyOne(`UPDATE attempts SET delivery = ?, acceptance = ?, evidence = ?, chain_head = ?, ended_at = ?
		WHERE token = ? AND ended_at IS NULL`, string(axes.Delivery), string(axes.Acceptance), evidence, chainHead, Nanos(at), token)
}

func (t *Tx) exactlyOne(q string, args ...any) error {
	r, err := t.exec(q, args...)
	if err != nil {
		return err
	}
	if n, err := r.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("expected to change one row, changed %d (%v)", n, err)
	}
	return nil
}

func (t *Tx) Attempts(intent int64) ([]store.AttemptRecord, error) {
	return t.attempts(intent, false)
}

func (t *Tx) AttemptByDispatch(dispatchID string) (*store.AttemptRecord, error) {
	as, err := t.queryAttempts("dispatch_id = ?", dispatchID)
	if err != nil || len(as) == 0 {
		return nil, err
	}
	return &as[0], nil
}

// attempts lists an intent's attempts oldest first, or only the latest.
func (t *Tx) attempts(intent int64, latestOnly bool) ([]store.AttemptRecord, error) {
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
func (t *Tx) queryAttempts(where string, args ...any) ([]store.AttemptRecord, error) {
	q := `SELECT token, intent_id, revision, task, dispatch_id, claimed_at, lease_expires_at,
		COALESCE(delivery, ''), COALESCE(acceptance, ''), COALESCE(ended_at, 0), evidence, chain_head, workstation, file_name, size, copied_from, source_token
		FROM attempts WHERE ` + where
	rows, err := t.query(q, args...)
	if err != nil {
		return nil, err
	}
	var out []store.AttemptRecord
	for rows.Next() {
		var a store.AttemptRecord
		var claimed, lease, ended int64
		var delivery, acceptance string
		if err := rows.Scan(&a.Token, &a.IntentID, &a.Revision, &a.Task, &a.DispatchID, &claimed, &lease, &delivery, &acceptance, &ended, &a.Evidence, &a.ChainHead, &a.Workstation, &a.FileName, &a.Size, &a.CopiedFrom, &a.SourceToken); err != nil {
			rows.Close()
			return nil, err
		}
		a.ClaimedAt, a.LeaseExpires, a.EndedAt = FromNanos(claimed), FromNanos(lease), FromNanos(ended)
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

func (t *Tx) crossings(token uint64) ([]store.Crossing, error) {
	rows, err := t.query("SELECT boundary, at, chain_head FROM crossings WHERE token = ? ORDER BY "+t.Dialect.CrossingOrder, token)
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
		c.Boundary, c.At = gate.Boundary(b), FromNanos(at)
		out = append(out, c)
	}
	return out, rows.Err()
}

func (t *Tx) NonceUsed(nonce string) (bool, error) {
	var n int
	err := t.queryRow("SELECT count(*) FROM used_nonces WHERE nonce = ?", nonce).Scan(&n)
	return n > 0, err
}

func (t *Tx) UseNonce(nonce string, at time.Time) error {
	_, err := t.exec("INSERT INTO used_nonces (nonce, used_at) VALUES (?, ?)", nonce, Nanos(at))
	return err
}

func (t *Tx) AddAuthorizer(name string, pub ed25519.PublicKey, at time.Time) error {
	_, err := t.exec("INSERT INTO authorizers (name, public_key, added_at) VALUES (?, ?, ?)", name, []byte(pub), Nanos(at))
	return err
}

func (t *Tx) AuthorizerNamed(name string) (bool, error) {
	var n int
	err := t.queryRow("SELECT count(*) FROM authorizers WHERE name = ?", name).Scan(&n)
	return n > 0, err
}

func (t *Tx) AuthorizerCount() (int, error) {
	var n int
	err := t.queryRow("SELECT count(*) FROM authorizers").Scan(&n)
	return n, err
}

func (t *Tx) RevokeAuthorizer(name string, at time.Time) error {
	_, err := t.exec("UPDATE authorizers SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL", Nanos(at), name)
	return err
}

func (t *Tx) StoreID() (string, error) {
	var id string
	err := t.queryRow("SELECT store_id FROM store_meta WHERE id = 1").Scan(&id)
	return id, err
}

func (t *Tx) AddWorkstation(id string, pub ed25519.PublicKey, at time.Time) error {
	_, err := t.exec("INSERT INTO workstations (id, public_key, registered_at) VALUES (?, ?, ?)", id, []byte(pub), Nanos(at))
	return err
}

func (t *Tx) Workstation(id string) (ed25519.PublicKey, error) {
	var pub []byte
	err := t.queryRow("SELECT public_key FROM workstations WHERE id = ?", id).Scan(&pub)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return ed25519.PublicKey(pub), err
}

func (t *Tx) Request(scope, id string) (*store.StoredRequest, error) {
	r := store.StoredRequest{Scope: scope, ID: id}
	var at int64
	err := t.queryRow("SELECT fingerprint, response, at FROM requests WHERE scope = ? AND id = ?", scope, id).Scan(&r.Fingerprint, &r.Response, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	r.At = FromNanos(at)
	return &r, err
}

func (t *Tx) ForgetRequests(before time.Time) (int, error) {
	res, err := t.exec("DELETE FROM requests WHERE at < ?", Nanos(before))
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

func (t *Tx) StoreRequest(r store.StoredRequest) error {
	_, err := t.exec("INSERT INTO requests (scope, id, fingerprint, response, at) VALUES (?, ?, ?, ?, ?)", r.Scope, r.ID, r.Fingerprint, r.Response, Nanos(r.At))
	return err
}

func (t *Tx) Authorizer(name string) (ed25519.PublicKey, error) {
	var pub []byte
	err := t.queryRow("SELECT public_key FROM authorizers WHERE name = ? AND revoked_at IS NULL", name).Scan(&pub)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return ed25519.PublicKey(pub), err
}

func (t *Tx) Append(e store.Event) error {
	t.pending = append(t.pending, e)
	if t.DeferEvents {
		return nil
	}
	return t.Flush()
}

// Flush writes the deferred writes and the appended events not yet written, in one
// statement: the writes in its WITH clause, the events last. PostgreSQL runs a WITH
// clause's inserts in no set order, on one snapshot: none of them may need another's
// row (write never puts two writes of one row in a statement; foreign keys are checked
// once the statement ends).
func (t *Tx) Flush() error {
	q, args, err := t.Deferred()
	if err != nil || q == "" {
		return err
	}
	_, err = t.run(q, args...) // binding again changes nothing: no ? is left
	return err
}

// Deferred takes the deferred writes and events as one statement (its placeholders
// bound for the dialect), for the backend to send: "" when there are none. A backend
// that sends it with its COMMIT, in one round trip, saves one.
func (t *Tx) Deferred() (q string, args []any, err error) {
	if len(t.pending) == 0 && len(t.writes) == 0 {
		return "", nil, nil
	}
	parts := make([]string, 0, len(t.writes)+1)
	for _, w := range t.writes {
		parts, args = append(parts, w.q), append(args, w.args...)
	}
	if len(t.pending) > 0 {
		var q strings.Builder
		q.WriteString("INSERT INTO events (at, intent_id, kind, key, task, token, dispatch_id, revision, detail) VALUES ")
		for i, e := range t.pending {
			detail, err := json.Marshal(e.Detail)
			if err != nil {
				return "", nil, err
			}
			if e.Detail == nil {
				detail = []byte("{}")
			}
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
			args = append(args, Nanos(e.At), e.Intent, string(e.Kind), e.Key, e.Task, e.Token, e.DispatchID, e.Revision, string(detail))
		}
		parts = append(parts, q.String())
	}
	t.pending, t.writes = t.pending[:0], t.writes[:0]
	return t.Dialect.bind(combined(parts)), args, nil
}

// combined is one statement of several: all but the last in its WITH clause.
func combined(parts []string) string {
	if len(parts) == 1 {
		return parts[0]
	}
	var q strings.Builder
	q.WriteString("WITH ")
	for i, p := range parts[:len(parts)-1] {
		if i > 0 {
			q.WriteString(", ")
		}
		fmt.Fprintf(&q, "w%d AS (%s)", i, p)
	}
	q.WriteString(" ")
	q.WriteString(parts[len(parts)-1])
	return q.String()
}

func (t *Tx) Events(intent int64) ([]store.Event, error) {
	if err := t.Flush(); err != nil {
		return nil, err
	}
	rows, err := t.query(`SELECT seq, at, intent_id, kind, key, task, token, dispatch_id, revision, detail
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
		e.At, e.Kind = FromNanos(at), store.EventKind(kind)
		if err := json.NewDecoder(strings.NewReader(detail)).Decode(&e.Detail); err != nil {
			return nil, fmt.Errorf("event %d: unreadable detail: %w", e.Seq, err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func (t *Tx) DisplayLease(display string) (*store.DisplayRecord, error) {
	var d store.DisplayRecord
	var exp, released int64
	err := t.queryRow("SELECT task, token, lease_expires_at, released FROM display_leases WHERE display = ?", display).Scan(&d.Task, &d.Token, &exp, &released)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	d.Display, d.LeaseExpires, d.Released = display, FromNanos(exp), released != 0
	return &d, nil
}

func (t *Tx) SetDisplayLease(d store.DisplayRecord) error {
	released := 0
	if d.Released {
		released = 1
	}
	_, err := t.exec(`INSERT INTO display_leases (display, task, token, lease_expires_at, released) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (display) DO UPDATE SET task = excluded.task, token = excluded.token, lease_expires_at = excluded.lease_expires_at, released = excluded.released`,
		d.Display, d.Task, d.Token, Nanos(d.LeaseExpires), released)
	return err
}

func (t *Tx) ObjectDispatch(objectID string) (string, error) {
	var d string
	err := t.queryRow("SELECT dispatch_id FROM provider_objects WHERE object_id = ?", objectID).Scan(&d)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return d, err
}

func (t *Tx) BindObject(objectID, dispatchID string, at time.Time) error {
	_, err := t.exec("INSERT INTO provider_objects (object_id, dispatch_id, bound_at) VALUES (?, ?, ?)", objectID, dispatchID, Nanos(at))
	return err
}

func (t *Tx) ResolveOutcome(token uint64, axes gate.Axes, at time.Time) error {
	return t.exactlyOne(`UPDATE attempts SET delivery = ?, acceptance = ?, ended_at = COALESCE(ended_at, ?) WHERE token = ?`,
		string(axes.Delivery), string(axes.Acceptance), Nanos(at), token)
}

func (t *Tx) UnresolvedAttempts(now time.Time) ([]store.AttemptRecord, error) {
	return t.queryAttempts(`(delivery = 'pending' AND acceptance = 'pending')
		OR (ended_at IS NULL AND lease_expires_at <= ? AND token IN (SELECT token FROM crossings))
		ORDER BY token`, Nanos(now))
}

// CrossedOf maps each of the dispatch ids that names an attempt to the boundaries it
// crossed (none: an empty list), in one statement.
func (t *Tx) CrossedOf(dispatchIDs []string) (map[string][]gate.Boundary, error) {
	out := make(map[string][]gate.Boundary, len(dispatchIDs))
	if len(dispatchIDs) == 0 {
		return out, nil
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(dispatchIDs)), ", ")
	args := make([]any, len(dispatchIDs))
	for i, d := range dispatchIDs {
		args[i] = d
	}
	rows, err := t.query(`SELECT a.dispatch_id, COALESCE(c.boundary, '') FROM attempts a LEFT JOIN crossings c ON c.token = a.token
		WHERE a.dispatch_id IN (`+marks+`)`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var d, b string
		if err := rows.Scan(&d, &b); err != nil {
			return nil, err
		}
		if _, ok := out[d]; !ok {
			out[d] = []gate.Boundary{}
		}
		if b != "" {
			out[d] = append(out[d], gate.Boundary(b))
		}
	}
	return out, rows.Err()
}

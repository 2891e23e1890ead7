package sqltx

import (
	"crypto/ed25519"
	"database/sql"
	"errors"
	"time"

	"github.com/sendonce/sendonce/store"
)

// The whole-history reads and writes of store copy (store.History).

// all reads every row of a query with scan.
func all[T any](rows *sql.Rows, err error, scan func(*sql.Rows) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func (t *Tx) IntentIDs() ([]int64, error) {
	rows, err := t.query("SELECT id FROM intents ORDER BY id")
	return all(rows, err, func(r *sql.Rows) (id int64, err error) { return id, r.Scan(&id) })
}

func (t *Tx) UsedNonces() ([]store.UsedNonce, error) {
	rows, err := t.query("SELECT nonce, used_at FROM used_nonces ORDER BY used_at, nonce")
	return all(rows, err, func(r *sql.Rows) (n store.UsedNonce, err error) {
		var at int64
		err = r.Scan(&n.Nonce, &at)
		n.At = FromNanos(at)
		return n, err
	})
}

func (t *Tx) Requests() ([]store.StoredRequest, error) {
	rows, err := t.query("SELECT scope, id, fingerprint, response, at FROM requests ORDER BY at, scope, id")
	return all(rows, err, func(r *sql.Rows) (q store.StoredRequest, err error) {
		var at int64
		err = r.Scan(&q.Scope, &q.ID, &q.Fingerprint, &q.Response, &at)
		q.At = FromNanos(at)
		return q, err
	})
}

func (t *Tx) Workstations() ([]store.RegisteredWorkstation, error) {
	rows, err := t.query("SELECT id, public_key, registered_at FROM workstations ORDER BY registered_at, id")
	return all(rows, err, func(r *sql.Rows) (w store.RegisteredWorkstation, err error) {
		var pub []byte
		var at int64
		err = r.Scan(&w.ID, &pub, &at)
		w.PublicKey, w.At = ed25519.PublicKey(pub), FromNanos(at)
		return w, err
	})
}

func (t *Tx) Objects() ([]store.ObjectBinding, error) {
	rows, err := t.query("SELECT object_id, dispatch_id, bound_at FROM provider_objects ORDER BY bound_at, object_id")
	return all(rows, err, func(r *sql.Rows) (o store.ObjectBinding, err error) {
		var at int64
		err = r.Scan(&o.ObjectID, &o.DispatchID, &at)
		o.At = FromNanos(at)
		return o, err
	})
}

// AdvanceTokens raises the fencing counter to at least n (SQLite's counter row;
// PostgreSQL's sequence overrides this).
func (t *Tx) AdvanceTokens(n uint64) error {
	_, err := t.exec("UPDATE token_counter SET last = ? WHERE id = 1 AND last < ?", n, n)
	return err
}

// RetiredTo is the store a retired store was copied into, or "" (SQLite only).
func (t *Tx) RetiredTo() (string, error) {
	to, _, err := t.Retired()
	return to, err
}

// Retired is the store a retired store was copied into and when, or "" (SQLite only).
func (t *Tx) Retired() (string, time.Time, error) {
	var to string
	var at int64
	err := t.queryRow("SELECT retired_to, retired_at FROM store_meta WHERE id = 1").Scan(&to, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return "", time.Time{}, nil
	}
	return to, FromNanos(at), err
}

// Retire marks the store retired, copied into target (SQLite only).
func (t *Tx) Retire(target string) error {
	return t.exactlyOne("UPDATE store_meta SET retired_to = ?, retired_at = ? WHERE id = 1", target, Nanos(t.At))
}

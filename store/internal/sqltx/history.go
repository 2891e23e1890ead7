package sqltx

import (
	"crypto/ed25519"
	"database/sql"
	"errors"
	"time"

	"github.com/sendonce/sendonce/store"
)

// The whole-history reads and writes of store copy (store.History).

func (t *Tx) IntentIDs() ([]int64, error) {
	rows, err := t.query("SELECT id FROM intents ORDER BY id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func (t *Tx) UsedNonces() ([]store.UsedNonce, error) {
	rows, err := t.query("SELECT nonce, used_at FROM used_nonces ORDER BY used_at, nonce")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.UsedNonce
	for rows.Next() {
		var n store.UsedNonce
		var at int64
		if err := rows.Scan(&n.Nonce, &at); err != nil {
			return nil, err
		}
		n.At = FromNanos(at)
		out = append(out, n)
	}
	return out, rows.Err()
}

func (t *Tx) Requests() ([]store.StoredRequest, error) {
	rows, err := t.query("SELECT scope, id, fingerprint, response, at FROM requests ORDER BY at, scope, id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.StoredRequest
	for rows.Next() {
		var r store.StoredRequest
		var at int64
		if err := rows.Scan(&r.Scope, &r.ID, &r.Fingerprint, &r.Response, &at); err != nil {
			return nil, err
		}
		r.At = FromNanos(at)
		out = append(out, r)
	}
	return out, rows.Err()
}

func (t *Tx) Workstations() ([]store.RegisteredWorkstation, error) {
	rows, err := t.query("SELECT id, public_key, registered_at FROM workstations ORDER BY registered_at, id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.RegisteredWorkstation
	for rows.Next() {
		var w store.RegisteredWorkstation
		var pub []byte
		var at int64
		if err := rows.Scan(&w.ID, &pub, &at); err != nil {
			return nil, err
		}
		w.PublicKey, w.At = ed25519.PublicKey(pub), FromNanos(at)
		out = append(out, w)
	}
	return out, rows.Err()
}

func (t *Tx) Objects() ([]store.ObjectBinding, error) {
	rows, err := t.query("SELECT object_id, dispatch_id, bound_at FROM provider_objects ORDER BY bound_at, object_id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.ObjectBinding
	for rows.Next() {
		var o store.ObjectBinding
		var at int64
		if err := rows.Scan(&o.ObjectID, &o.DispatchID, &at); err != nil {
			return nil, err
		}
		o.At = FromNanos(at)
		out = append(out, o)
	}
	return out, rows.Err()
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

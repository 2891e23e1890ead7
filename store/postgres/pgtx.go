// The Tx implementation: the shared SQL Tx (store/internal/sqltx) with this package's
// round trips saved (a new intent and its fencing token in one statement) and test points.

package postgres

import (
	"database/sql"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/store/internal/sqltx"
)

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

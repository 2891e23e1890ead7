// The schema: its version, the check every open makes of it, and the migrations init and
// upgrade run under a transaction-scoped lock.

package postgres

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/sendonce/sendonce/store"
)

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

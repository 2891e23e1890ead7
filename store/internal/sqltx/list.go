package sqltx

import (
	"fmt"
	"strings"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

// ListAttempts implements store.Tx: newest first, at most q.Limit.
func (t *Tx) ListAttempts(q store.AttemptQuery) ([]store.AttemptRecord, error) {
	var where []string
	var args []any
	if q.Before > 0 {
		where, args = append(where, "token < ?"), append(args, q.Before)
	}
	switch {
	case q.KeyPrefix != "" && t.Dialect.BytewiseText:
		// A range of the keys' index: every key that starts with the prefix (which ends
		// with ':', before the digest) sorts at or after it and before the prefix with
		// ';', the next byte, in its place.
		where = append(where, "intent_id IN (SELECT intent_id FROM keys WHERE key >= ? AND key < ?)")
		last := len(q.KeyPrefix) - 1
		args = append(args, q.KeyPrefix, q.KeyPrefix[:last]+string([]byte{q.KeyPrefix[last] + 1}))
	case q.KeyPrefix != "":
		// starts_with, not a range: PostgreSQL's text order is its collation's, not bytes'.
		where, args = append(where, "intent_id IN (SELECT intent_id FROM keys WHERE starts_with(key, ?))"), append(args, q.KeyPrefix)
	}
	if q.Workstation != "" {
		where, args = append(where, "workstation = ?"), append(args, q.Workstation)
	}
	if !q.From.IsZero() {
		where, args = append(where, "claimed_at >= ?"), append(args, Nanos(q.From))
	}
	if !q.To.IsZero() {
		where, args = append(where, "claimed_at < ?"), append(args, Nanos(q.To))
	}
	if q.State != "" {
		cond, n := stateCondition(q.State)
		if cond == "" {
			return nil, fmt.Errorf("%w: no attempt state %q", gate.ErrInvalid, q.State)
		}
		where = append(where, cond)
		for range n {
			args = append(args, Nanos(t.At))
		}
	}
	if len(where) == 0 {
		where = []string{"1 = 1"}
	}
	return t.queryAttempts(strings.Join(where, " AND ")+" ORDER BY token DESC LIMIT ?", append(args, q.Limit)...)
}

// stateCondition is the condition that selects attempts in a state (store.AttemptState),
// and how many times it names now.
func stateCondition(s store.AttemptState) (string, int) {
	switch s {
	case store.StateVerified:
		return "delivery = 'confirmed' AND acceptance = 'accepted'", 0
	case store.StateRejected:
		return "delivery = 'confirmed' AND acceptance = 'rejected'", 0
	case store.StateNotSent:
		return "delivery = 'failed'", 0
	case store.StateUnknown:
		return "(delivery = 'pending' OR (delivery = 'confirmed' AND acceptance = 'pending') OR (ended_at IS NULL AND lease_expires_at <= ? AND token IN (SELECT token FROM crossings)))", 1
	case store.StateHeld:
		return "ended_at IS NULL AND lease_expires_at > ?", 1
	case store.StateLapsed:
		return "ended_at IS NULL AND lease_expires_at <= ? AND token NOT IN (SELECT token FROM crossings)", 1
	}
	return "", 0
}

// NeedsPerson implements store.Tx: the attempts of the intents' current revisions whose
// result is unknown or rejected, oldest first, after the token after.
func (t *Tx) NeedsPerson(after uint64, limit int) ([]store.AttemptRecord, error) {
	unknown, _ := stateCondition(store.StateUnknown)
	rejected, _ := stateCondition(store.StateRejected)
	return t.queryAttempts(`token > ? AND (`+unknown+` OR (`+rejected+`))
		AND revision = (SELECT revision FROM intents WHERE intents.id = attempts.intent_id)
		ORDER BY token LIMIT ?`, after, Nanos(t.At), limit)
}

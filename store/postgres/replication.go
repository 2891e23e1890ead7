// What the store's server says of how its commits are kept, read at open: a fleet store
// whose primary acknowledges commits that a standby may not have is refused, unless the
// operator accepted that risk in the store URL.

package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/sendonce/sendonce/gate"
)

// AcceptAsyncParam is the store URL's parameter by which an operator accepts a primary
// with asynchronous standbys ("sendonce_async_standby=accept_risk"): a failover to one
// can lose commits the primary acknowledged. It is sendonce's own; the URL reaches the
// server without it.
const AcceptAsyncParam = "sendonce_async_standby"

// acceptAsyncValue is the one value AcceptAsyncParam takes.
const acceptAsyncValue = "accept_risk"

// ErrAsyncStandby: the store's primary acknowledges commits without a synchronous
// standby while standbys stream from it, and the store URL does not accept the risk.
var ErrAsyncStandby = errors.New("the store's primary has asynchronous standbys")

// ErrStandby: the store URL reached a server in recovery (a standby), which takes no
// writes.
var ErrStandby = errors.New("the store URL reaches a standby")

// Replication is what the server said, when the store was opened, of where its commits
// go: the answer of one query on the connection that opened the store.
type Replication struct {
	// InRecovery: the server is a standby.
	InRecovery bool `json:"in_recovery"`
	// SynchronousStandbyNames and SynchronousCommit are the server's settings (every
	// transaction of the store sets synchronous_commit on for itself).
	SynchronousStandbyNames string `json:"synchronous_standby_names"`
	SynchronousCommit       string `json:"synchronous_commit"`
	// Standbys is pg_stat_replication's physical WAL senders (a logical one, of a
	// subscription or a change-data consumer, is connected to a database and left out;
	// so is a base backup's). Without the pg_read_all_stats role only the count is known
	// (names and states read "", and a base backup then counts).
	Standbys []Standby `json:"standbys"`
	// PhysicalSlots counts permanent physical replication slots: reported, not decided
	// on (a WAL archiver such as barman or pg_receivewal keeps one too).
	PhysicalSlots int `json:"physical_slots"`
	// AsyncAccepted: the store URL accepts asynchronous standbys (AcceptAsyncParam).
	AsyncAccepted bool `json:"async_accepted"`
}

// Standby is one row of pg_stat_replication.
type Standby struct {
	Name      string        `json:"name"`
	State     string        `json:"state"`
	SyncState string        `json:"sync_state"`
	ReplayLag time.Duration `json:"replay_lag"`
}

// Mode says, in a word, what the set-up is: "single" (no standby streams, none is
// expected), "synchronous" (a COMMIT waits for a synchronous standby), "asynchronous"
// (standbys stream, and the primary acknowledges a COMMIT alone), "standby".
func (r Replication) Mode() string {
	switch {
	case r.InRecovery:
		return "standby"
	case strings.TrimSpace(r.SynchronousStandbyNames) != "":
		return "synchronous"
	case len(r.Standbys) > 0:
		return "asynchronous"
	}
	return "single"
}

// Check refuses what a fleet must not write to: a standby, and a primary with
// asynchronous standbys unless AsyncAccepted.
func (r Replication) Check(display string) error {
	switch r.Mode() {
	case "standby":
		return fmt.Errorf("%w: %s is in recovery and takes no writes: list every server in the URL with target_session_attrs=read-write (postgres://u@a,b/db?target_session_attrs=read-write), or point it at the primary", ErrStandby, display)
	case "asynchronous":
		if !r.AsyncAccepted {
			return fmt.Errorf("%w: %s acknowledges a COMMIT before any standby has it (synchronous_standby_names is empty; %s), so a failover to a standby can lose crossings it acknowledged and hand a sent file's key out again: make a standby synchronous (synchronous_standby_names; docs/fleet.md), or accept the risk with %s=%s in the store URL",
				ErrAsyncStandby, display, r.streaming(), AcceptAsyncParam, acceptAsyncValue)
		}
	}
	return nil
}

// Describe is the set-up in a sentence, for doctor.
func (r Replication) Describe() string {
	switch r.Mode() {
	case "standby":
		return "a standby (in recovery): it takes no writes"
	case "single":
		d := "a single server: no standby streams from it"
		if r.PhysicalSlots > 0 {
			d += fmt.Sprintf(" (%d physical replication slot(s): if a standby uses one, it is asynchronous and refused once it streams)", r.PhysicalSlots)
		}
		return d
	case "synchronous":
		sync := 0
		for _, s := range r.Standbys {
			if s.State == "streaming" && (s.SyncState == "sync" || s.SyncState == "quorum") {
				sync++
			}
		}
		d := fmt.Sprintf("synchronous: a COMMIT waits for a standby of synchronous_standby_names '%s'; %s", r.SynchronousStandbyNames, r.streaming())
		for _, st := range r.Standbys {
			if st.SyncState == "async" || st.SyncState == "potential" {
				d += fmt.Sprintf("; %s is %s: a failover must promote a synchronous one, never it", st.Name, st.SyncState)
			}
		}
		if sync == 0 {
			d += "; no synchronous standby streams now, so every COMMIT waits until one does (or it is unreadable without pg_read_all_stats)"
		}
		return d
	}
	d := "asynchronous: the primary acknowledges a COMMIT before any standby has it; " + r.streaming()
	if r.AsyncAccepted {
		d += fmt.Sprintf("; the risk is accepted (%s=%s): a workstation that finds a crossing it was acknowledged missing after a failover stops its keys and raises the rolled-back alarm", AcceptAsyncParam, acceptAsyncValue)
	}
	return d
}

func (r Replication) streaming() string {
	if len(r.Standbys) == 0 {
		return "pg_stat_replication has no standby streaming"
	}
	var parts []string
	for _, s := range r.Standbys {
		if s.Name == "" && s.State == "" {
			parts = append(parts, "(a standby; its details need pg_read_all_stats)")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s %s, replay lag %v", s.Name, s.State, s.SyncState, s.ReplayLag))
	}
	return "pg_stat_replication: " + strings.Join(parts, "; ")
}

// acceptsAsync takes AcceptAsyncParam out of the store URL raw: whether it accepts the
// risk, and the URL the server is given.
func acceptsAsync(raw string) (bool, string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return false, raw, nil // the caller's parse says what is wrong
	}
	q := u.Query()
	vals, named := q[AcceptAsyncParam]
	if !named {
		return false, raw, nil
	}
	if len(vals) != 1 || vals[0] != acceptAsyncValue {
		return false, raw, gate.Invalidf("store URL: %s takes one value, %s (it accepts that a failover to an asynchronous standby can lose acknowledged crossings)", AcceptAsyncParam, acceptAsyncValue)
	}
	q.Del(AcceptAsyncParam)
	u.RawQuery = q.Encode()
	return true, u.String(), nil
}

// replication reads the server's replication set-up, in one statement.
func (b *Backend) replication(ctx context.Context) (Replication, error) {
	r := Replication{AsyncAccepted: b.acceptAsync}
	ctx, cancel := context.WithTimeout(ctx, b.opt.LockTimeout)
	defer cancel()
	var standbys []byte
	err := b.db.QueryRowContext(ctx, `SELECT pg_is_in_recovery(), current_setting('synchronous_standby_names'),
		current_setting('synchronous_commit'),
		(SELECT count(*) FROM pg_replication_slots WHERE slot_type = 'physical' AND NOT temporary),
		(SELECT coalesce(json_agg(json_build_object('name', coalesce(r.application_name, ''), 'state', coalesce(r.state, ''),
			'sync_state', coalesce(r.sync_state, ''), 'lag', coalesce(extract(epoch FROM r.replay_lag), 0)) ORDER BY r.application_name), '[]')
		 FROM pg_stat_replication r LEFT JOIN pg_stat_activity a ON a.pid = r.pid
		 WHERE a.datname IS NULL AND coalesce(r.state, '') <> 'backup')`).Scan(
		&r.InRecovery, &r.SynchronousStandbyNames, &r.SynchronousCommit, &r.PhysicalSlots, &standbys)
	if err != nil {
		return r, fmt.Errorf("reading %s's replication settings: %w", b.display, err)
	}
	var rows []struct {
		Name, State string
		SyncState   string `json:"sync_state"`
		Lag         float64
	}
	if err := json.Unmarshal(standbys, &rows); err != nil {
		return r, fmt.Errorf("reading %s's pg_stat_replication: %w", b.display, err)
	}
	for _, s := range rows {
		r.Standbys = append(r.Standbys, Standby{Name: s.Name, State: s.State, SyncState: s.SyncState, ReplayLag: time.Duration(s.Lag * float64(time.Second))})
	}
	return r, nil
}

// Replication is what the server said of its replication when the store was opened.
func (b *Backend) Replication() Replication { return b.repl }

// checkReplication reads the set-up and refuses what a fleet must not write to.
func (b *Backend) checkReplication(ctx context.Context) error {
	r, err := b.replication(ctx)
	if err != nil {
		return err
	}
	b.repl = r
	return r.Check(b.display)
}

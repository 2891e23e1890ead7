package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/store/sqlite"
)

func cmdInit(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("init", "[--store PATH]")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	path, err := env.storeFile()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	b, err := sqlite.Create(ctx, path, sqlite.Options{LockTimeout: env.lockTimeout})
	if err != nil {
		return fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	b.Close()
	abs := b.Path()
	env.print(map[string]any{"store": abs, "schema_version": sqlite.SchemaVersion}, func(w io.Writer) {
		fmt.Fprintf(w, "store ready: %s (schema %d)\n", abs, sqlite.SchemaVersion)
	})
	return nil
}

func attemptJSON(a store.AttemptRecord) map[string]any {
	out := map[string]any{
		"dispatch_id": a.DispatchID, "task": a.Task, "token": a.Token, "revision": a.Revision,
		"claimed_at": formatTime(a.ClaimedAt), "lease_expires_at": formatTime(a.LeaseExpires),
		"crossings": a.Crossings, "superseded": a.Superseded,
	}
	if a.Crossings == nil {
		out["crossings"] = []store.Crossing{}
	}
	if a.Recorded {
		o, _ := a.Axes.Outcome()
		out["outcome"], out["delivery"], out["acceptance"], out["ended_at"] = o, a.Axes.Delivery, a.Axes.Acceptance, formatTime(a.EndedAt)
	}
	if a.Evidence != "" {
		out["evidence"] = a.Evidence
	}
	if a.ChainHead != "" {
		out["chain_head"] = a.ChainHead
	}
	return out
}

func intentJSON(r store.IntentReport) map[string]any {
	attempts := make([]map[string]any, len(r.Attempts))
	for i, a := range r.Attempts {
		attempts[i] = attemptJSON(a)
	}
	out := map[string]any{"intent": r.ID, "status": r.Status, "revision": r.Revision, "identity_strength": r.Strength,
		"keys": r.Keys, "attempts": attempts, "as_of": formatTime(r.AsOf), "explanation": explain(r)}
	if r.Events != nil {
		out["events"] = r.Events
	}
	if len(r.Notes) > 0 {
		out["notes"] = r.Notes
	}
	return out
}

// explain says what a status means for the user, in a sentence.
func explain(r store.IntentReport) string {
	a := r.Latest()
	switch r.Status {
	case gate.StatusFree:
		if a == nil || a.Revision != r.Revision {
			if r.Revision > 0 {
				return fmt.Sprintf("revision %d was opened by an authorization and is free: one executor may claim it", r.Revision)
			}
			return "nothing was ever claimed for this key: one executor may claim it"
		}
		return fmt.Sprintf("task %s's lease expired before any crossing: one new executor may claim it", a.Task)
	case gate.StatusHeld:
		if a.HasCrossed() {
			return fmt.Sprintf("task %s crossed %s and is still at work (lease until %s); the key is already consumed", a.Task, a.Crossed[len(a.Crossed)-1], formatTime(a.LeaseExpires))
		}
		return fmt.Sprintf("task %s holds the lease until %s and has crossed nothing yet", a.Task, formatTime(a.LeaseExpires))
	case gate.StatusNotSent:
		return fmt.Sprintf("task %s proved nothing was sent: one new executor may claim it", a.Task)
	case gate.StatusSentVerified:
		return fmt.Sprintf("delivered and confirmed by task %s: do not send again", a.Task)
	case gate.StatusSentRejected:
		return fmt.Sprintf("task %s delivered, but to the wrong recipient or with the wrong bytes: do not send again; a person decides what next", a.Task)
	case gate.StatusSendStatusUnknown:
		return fmt.Sprintf("task %s may have sent (it crossed %s) and nothing proves the result: do not send again; reconcile with the provider, or a person authorizes a redelivery", a.Task, crossedOrNothing(a))
	}
	return string(r.Status)
}

func crossedOrNothing(a *store.AttemptRecord) string {
	if len(a.Crossed) == 0 {
		return "nothing, but recorded unknown"
	}
	return string(a.Crossed[len(a.Crossed)-1])
}

func cmdStatus(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("status", "(--key KEY | [--to TITLE] [--dest-id NS:ID] (--file PATH | --sha256 HEX))")
	keyFlag := fs.String("key", "", "a `KEY` printed by a claim")
	var dest destination
	dest.register(fs)
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	keys, err := keysFromFlags(*keyFlag, dest)
	if err != nil {
		return err
	}
	return env.report(ctx, keys, false)
}

func cmdShow(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("show", "KEY")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	ref, err := gate.ParseRef(pos[0])
	if err != nil {
		return err
	}
	return env.report(ctx, []gate.Key{ref.Key}, true)
}

func keysFromFlags(key string, dest destination) ([]gate.Key, error) {
	if key != "" {
		if dest != (destination{}) {
			return nil, usagef("give either --key or the destination and file, not both")
		}
		ref, err := gate.ParseRef(key)
		if err != nil {
			return nil, err
		}
		return []gate.Key{ref.Key}, nil
	}
	return dest.keys()
}

func (env *environment) report(ctx context.Context, keys []gate.Key, events bool) error {
	s, err := env.openStore(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	var reports []store.IntentReport
	if events {
		reports, err = s.Show(ctx, keys)
	} else {
		reports, err = s.Status(ctx, keys)
	}
	if err != nil {
		return err
	}
	// Several intents happen only when aliases were never claimed together: the
	// strictest status speaks for them all.
	top := reports[0]
	for _, r := range reports[1:] {
		if statusRank(r.Status) > statusRank(top.Status) {
			top = r
		}
	}
	intents := make([]map[string]any, len(reports))
	for i, r := range reports {
		intents[i] = intentJSON(r)
	}
	out := map[string]any{"status": top.Status, "key": keys[0].String(), "identity_strength": top.Strength, "explanation": explain(top), "intents": intents}
	env.print(out, func(w io.Writer) {
		for _, r := range reports {
			writeIntent(w, r)
		}
	})
	return nil
}

func statusRank(s gate.Status) int {
	return strings.Index("free not_sent held sent_verified sent_rejected send_status_unknown", string(s))
}

func writeIntent(w io.Writer, r store.IntentReport) {
	fmt.Fprintf(w, "status: %s\n%s\n", r.Status, explain(r))
	if r.ID == 0 {
		fmt.Fprintln(w, "(no intent in the store)")
	}
	for _, k := range r.Keys {
		note := ""
		if k.Strength == gate.Weak {
			note = "  WEAK: a visible title; two conversations can show the same title"
		}
		fmt.Fprintf(w, "key: %s%s\n", k.Key, note)
	}
	if r.Revision > 0 {
		fmt.Fprintf(w, "revision: %d\n", r.Revision)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, a := range r.Attempts {
		o := "no outcome"
		if a.Recorded {
			oc, _ := a.Axes.Outcome()
			o = fmt.Sprintf("%s (delivery %s, acceptance %s)", oc, a.Axes.Delivery, a.Axes.Acceptance)
		} else if a.Superseded {
			o = "superseded before any crossing"
		}
		fmt.Fprintf(w, "attempt r%d token %d task %s dispatch %s: %s\n", a.Revision, a.Token, a.Task, a.DispatchID, o)
		for _, c := range a.Crossings {
			fmt.Fprintf(w, "  crossed %s at %s\n", c.Boundary, formatTime(c.At))
		}
		if a.Evidence != "" {
			fmt.Fprintf(w, "  evidence: %s\n", a.Evidence)
		}
	}
	for _, e := range r.Events {
		fmt.Fprintf(w, "%5d %s %-17s", e.Seq, formatTime(e.At), e.Kind)
		if e.Task != "" {
			fmt.Fprintf(w, " task=%s", e.Task)
		}
		if e.Token != 0 {
			fmt.Fprintf(w, " token=%d", e.Token)
		}
		for _, k := range sortedKeys(e.Detail) {
			fmt.Fprintf(w, " %s=%q", k, e.Detail[k])
		}
		fmt.Fprintln(w)
	}
}

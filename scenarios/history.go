//go:build unix

package scenarios

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/store/registry"
)

// The history checker, in the style of Jepsen: many worker processes deliver a few
// keys through the gate with a side effect that leaves a trace (a line appended to a
// sends log: the "send"), while the checker kills, pauses and restarts them. Then
// every unknown attempt is reconciled against the sends log (the provider's truth)
// and the whole history is checked: no key sent twice, no grant after consumption,
// no send without a durable crossing before it, every resolution backed by a send.

// Worker is one executor: claim, check, cross choose_file and send, send (append to
// the log), record. It renews its lease while it works, so a paused worker expires.
//
// An unsafe worker sends without asking the gate: it exists so that a test can show
// the checker catches duplicates. With acksLog, it notes there each claim, crossing and
// record the store acknowledged, after the acknowledgment: the checker then finds every
// one in the store (a failover must not lose them).
func Worker(ctx context.Context, storePath, sendsLog, acksLog, task, workstation string, key gate.Key, lease time.Duration, unsafe bool) error {
	if unsafe {
		time.Sleep(time.Duration(randInt(40)) * time.Millisecond)
		return appendSendRaw(sendsLog, key, "0", "unsafe-"+task, task)
	}
	o, err := registry.Open(ctx, storePath, registry.Options{LockTimeout: 20 * time.Second})
	if err != nil {
		return err
	}
	s := o.Store
	defer s.Close()
	res, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{key}, Task: task, Lease: lease, Origin: store.Origin{Workstation: workstation}})
	if err != nil {
		return err
	}
	p := res.Permit
	if err := appendAck(acksLog, "claim", p, ""); err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	store.KeepAlive(ctx, lease/3, cancel, func(ctx context.Context) error {
		_, err := s.Renew(ctx, p, lease)
		return err
	})
	jitter := func() { time.Sleep(time.Duration(randInt(40)) * time.Millisecond) }
	jitter()
	if err := s.Check(ctx, p, gate.OpenPicker); err != nil {
		s.Record(context.WithoutCancel(ctx), p, store.RecordRequest{Outcome: gate.NotSent})
		return err
	}
	jitter()
	if _, err := s.Cross(ctx, p, gate.ChooseFile, ""); err != nil {
		return err
	}
	if err := appendAck(acksLog, "cross", p, string(gate.ChooseFile)); err != nil {
		return err
	}
	jitter()
	pass, err := s.Cross(ctx, p, gate.Send, "")
	if err != nil {
		return err
	}
	if err := appendAck(acksLog, "cross", p, string(gate.Send)); err != nil {
		return err
	}
	if err := pass.Use(); err != nil {
		return err
	}
	if err := appendSend(sendsLog, key, p); err != nil {
		return err
	}
	jitter()
	outcome := gate.SentVerified
	if randInt(3) == 0 { // the screen could not prove it: unknown
		outcome = gate.SendStatusUnknown
	}
	if _, err = s.Record(context.WithoutCancel(ctx), p, store.RecordRequest{Outcome: outcome}); err != nil {
		return err
	}
	return appendAck(acksLog, "record", p, string(outcome))
}

// appendAck notes, in the acks log (none when path is ""), what the store acknowledged.
func appendAck(path, what string, p *store.Permit, detail string) error {
	if path == "" {
		return nil
	}
	return appendLine(path, fmt.Sprintf("%s %s %s", what, p.DispatchID(), cmp.Or(detail, "-")))
}

// appendSend is the side effect: one line per send, flushed to disk.
func appendSend(path string, k gate.Key, p *store.Permit) error {
	return appendSendRaw(path, k, fmt.Sprint(p.Revision()), p.DispatchID(), p.Task())
}

func appendSendRaw(path string, k gate.Key, revision, dispatch, task string) error {
	return appendLine(path, fmt.Sprintf("%s %s %s %s", k, revision, dispatch, task))
}

// appendLine appends one line to a log, flushed to disk.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, line); err != nil {
		return err
	}
	return f.Sync()
}

func randInt(n int) int {
	v, _ := rand.Int(rand.Reader, big.NewInt(int64(n)))
	return int(v.Int64())
}

// HistoryConfig bounds a history run.
type HistoryConfig struct {
	Exe     string   // a binary whose 'scenarios worker' runs Worker; this program when ""
	Env     []string // extra environment for the workers
	Rounds  int      // rounds, each with fresh keys
	Keys    int      // keys per round
	Workers int      // worker processes per key per round (restarts come on top)
	Lease   time.Duration
	Unsafe  bool // workers skip the gate: the checker must then find duplicates
	// Store is a fresh empty store to run on (a PostgreSQL database, say); a SQLite
	// file in the run's folder when "".
	Store string
	// Workstations splits the workers across that many workstation ids (ws-0, ws-1,
	// ...), each claim recording its own; one (none named) when 0.
	Workstations int
	// Acks has the workers note what the store acknowledged, and the checker find each
	// one in the store afterwards.
	Acks bool
	// DuringRound, when set, is called in a goroutine of its own as each round's workers
	// start, and the round waits for it: a test's fault (a database restarted) lands
	// while they run.
	DuringRound func(round int)
}

// HistoryReport counts what a run did and what the checker found.
type HistoryReport struct {
	Rounds, Processes, Kills, Pauses, Restarts int
	Sends, Resolved, Duplicates                int
	// Acknowledged counts the claims, crossings and records the store acknowledged to a
	// worker (HistoryConfig.Acks), Lost those the store then did not hold.
	Acknowledged, Lost int
	Violations         []string
}

// WriteText writes the counts and every violation for a person.
func (rep HistoryReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "rounds %d, processes %d, faults: %d kills, %d pauses past the lease, %d restarts\nsends %d, unknowns resolved by the sends log %d, duplicates %d\n",
		rep.Rounds, rep.Processes, rep.Kills, rep.Pauses, rep.Restarts, rep.Sends, rep.Resolved, rep.Duplicates)
	for _, v := range rep.Violations {
		fmt.Fprintf(w, "VIOLATION: %s\n", v)
	}
}

// RunHistory runs the randomized history and checks it. dir holds the store and log.
// dir "" is a temporary folder, removed afterwards.
func RunHistory(ctx context.Context, cfg HistoryConfig, dir string) (HistoryReport, error) {
	var rep HistoryReport
	if cfg.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return rep, err
		}
		cfg.Exe = exe
	}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "sendonce-history-")
		if err != nil {
			return rep, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	storePath, sendsLog, acksLog := filepath.Join(dir, "history.db"), filepath.Join(dir, "sends.log"), ""
	if cfg.Acks {
		acksLog = filepath.Join(dir, "acks.log")
	}
	if cfg.Store != "" {
		storePath = cfg.Store
	}
	initCmd := exec.CommandContext(ctx, cfg.Exe, "init", "--store", storePath)
	initCmd.Env = append(os.Environ(), cfg.Env...)
	if out, err := initCmd.CombinedOutput(); err != nil {
		return rep, fmt.Errorf("init: %v: %s", err, out)
	}
	var all []gate.Key
	for round := 0; round < cfg.Rounds; round++ {
		rep.Rounds++
		var keys []gate.Key
		for k := 0; k < cfg.Keys; k++ {
			id, _ := gate.Title("Bob")
			var b [8]byte
			rand.Read(b[:])
			keys = append(keys, gate.NewKey(id, gate.DigestOf([]byte(hex.EncodeToString(b[:])))))
		}
		all = append(all, keys...)
		var wg sync.WaitGroup
		var mu sync.Mutex
		if cfg.DuringRound != nil {
			wg.Add(1)
			go func(round int) {
				defer wg.Done()
				cfg.DuringRound(round)
			}(round)
		}
		for _, k := range keys {
			for w := 0; w < cfg.Workers; w++ {
				wg.Add(1)
				ws := ""
				if cfg.Workstations > 0 {
					ws = fmt.Sprintf("ws-%d", w%cfg.Workstations)
				}
				go func(k gate.Key, task string) {
					defer wg.Done()
					kills, pauses, restarts := runWorker(ctx, cfg, storePath, sendsLog, acksLog, task, ws, k)
					mu.Lock()
					rep.Processes += 1 + restarts
					rep.Kills, rep.Pauses, rep.Restarts = rep.Kills+kills, rep.Pauses+pauses, rep.Restarts+restarts
					mu.Unlock()
				}(k, fmt.Sprintf("r%d-w%d", round, w))
			}
		}
		wg.Wait()
	}
	time.Sleep(cfg.Lease + 200*time.Millisecond) // every lease of a killed worker has expired
	return rep, checkHistory(ctx, storePath, sendsLog, acksLog, all, &rep)
}

// runWorker starts a worker and maybe kills it, pauses it past its lease, or restarts
// it (the same task, resuming) after a kill.
func runWorker(ctx context.Context, cfg HistoryConfig, storePath, sendsLog, acksLog, task, workstation string, k gate.Key) (kills, pauses, restarts int) {
	for attempt := 0; attempt < 2; attempt++ {
		cmd := exec.CommandContext(ctx, cfg.Exe, "scenarios", "worker", "--store", storePath, "--sends", sendsLog, "--acks", acksLog, "--task", task, "--key", k.String(),
			"--lease", cfg.Lease.String(), fmt.Sprintf("--unsafe=%v", cfg.Unsafe), "--workstation", workstation)
		cmd.Env = append(os.Environ(), cfg.Env...)
		if err := cmd.Start(); err != nil {
			return
		}
		fault := randInt(4)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		switch fault {
		case 0: // kill at a random moment
			time.Sleep(time.Duration(randInt(150)) * time.Millisecond)
			cmd.Process.Signal(syscall.SIGKILL)
			kills++
		case 1: // pause past the lease, then wake
			time.Sleep(time.Duration(randInt(100)) * time.Millisecond)
			cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(cfg.Lease + time.Duration(randInt(300))*time.Millisecond)
			cmd.Process.Signal(syscall.SIGCONT)
			pauses++
		}
		<-done
		if fault != 0 || randInt(2) == 0 {
			return
		}
		restarts++ // a killed worker is restarted with the same task id: a resume
	}
	return
}

// checkHistory reconciles unknowns against the sends log and checks every invariant.
func checkHistory(ctx context.Context, storePath, sendsLog, acksLog string, keys []gate.Key, rep *HistoryReport) error {
	sends, err := readSends(sendsLog)
	if err != nil {
		return err
	}
	o, err := registry.Open(ctx, storePath, registry.Options{})
	if err != nil {
		return err
	}
	s := o.Store
	defer s.Close()
	if err := checkAcks(ctx, s, acksLog, rep); err != nil {
		return err
	}

	// Reconcile: the sends log is the provider. Only a send bound to the dispatch
	// resolves it; an unknown with no send stays unknown.
	unresolved, _, err := s.Unresolved(ctx)
	if err != nil {
		return err
	}
	for _, a := range unresolved {
		for _, sd := range sends {
			if sd.dispatch == a.DispatchID {
				k, _ := gate.ParseKey(sd.key)
				if _, err := s.Resolve(ctx, store.ResolveRequest{DispatchID: a.DispatchID, Provider: "sends-log", ObjectID: "send-" + sd.dispatch, SHA256: k.Digest().String()}); err == nil {
					rep.Resolved++
				}
			}
		}
	}

	perKeyRevision := map[string]int{}
	for _, sd := range sends {
		rep.Sends++
		perKeyRevision[sd.key+"#"+sd.revision]++
	}
	for kr, n := range perKeyRevision {
		if n > 1 {
			rep.Duplicates += n - 1
			rep.Violations = append(rep.Violations, fmt.Sprintf("%s sent %d times", kr, n))
		}
	}
	for _, k := range keys {
		rs, err := s.Show(ctx, []gate.Key{k})
		if err != nil {
			return err
		}
		for _, r := range rs {
			rep.Violations = append(rep.Violations, checkIntent(r, sends)...)
		}
	}
	return nil
}

type send struct{ key, revision, dispatch, task string }

func readSends(path string) ([]send, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []send
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.Fields(sc.Text())
		if len(p) != 4 {
			return nil, fmt.Errorf("sends log: unreadable line %q", sc.Text())
		}
		out = append(out, send{p[0], p[1], p[2], p[3]})
	}
	return out, sc.Err()
}

// checkIntent checks one intent's history: no grant after a crossing or a consuming
// outcome in its revision; every send preceded by its attempt's durable crossing of
// send; every resolution backed by a send of its own dispatch.
func checkIntent(r store.IntentReport, sends []send) []string {
	var v []string
	consumed := map[int]bool{}
	crossedSend := map[string]bool{}
	for _, e := range r.Events {
		switch e.Kind {
		case store.EventClaimGranted:
			if consumed[e.Revision] {
				v = append(v, fmt.Sprintf("intent %d: claim granted to %s (token %d) after revision %d was consumed", r.ID, e.Task, e.Token, e.Revision))
			}
		case store.EventCrossed:
			consumed[e.Revision] = true
			if e.Detail["boundary"] == "send" {
				crossedSend[e.DispatchID] = true
			}
		case store.EventRecorded:
			if e.Detail["recorded"] != string(gate.NotSent) {
				consumed[e.Revision] = true
			}
		case store.EventResolved:
			backed := false
			for _, sd := range sends {
				backed = backed || sd.dispatch == e.DispatchID
			}
			if !backed {
				v = append(v, fmt.Sprintf("intent %d: dispatch %s resolved without a send to back it", r.ID, e.DispatchID))
			}
		}
	}
	for _, sd := range sends {
		for _, a := range r.Attempts {
			if a.DispatchID == sd.dispatch && !crossedSend[sd.dispatch] {
				v = append(v, fmt.Sprintf("dispatch %s sent without a durable crossing of send before it", sd.dispatch))
			}
		}
	}
	return v
}

// checkAcks finds, in the store, every claim, crossing and record the acks log says it
// acknowledged to a worker: read before reconciling, which changes no attempt's record
// but its outcome.
func checkAcks(ctx context.Context, s *store.Store, acksLog string, rep *HistoryReport) error {
	if acksLog == "" {
		return nil
	}
	b, err := os.ReadFile(acksLog)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		p := strings.Fields(line)
		if len(p) != 3 {
			return fmt.Errorf("acks log: unreadable line %q", line)
		}
		rep.Acknowledged++
		a, err := s.AttemptByDispatch(ctx, p[1])
		if err != nil {
			return err
		}
		held := a != nil
		switch {
		case !held:
		case p[0] == "cross":
			held = slices.Contains(a.Crossed, gate.Boundary(p[2]))
		case p[0] == "record":
			held = a.Recorded
		}
		if !held {
			rep.Lost++
			rep.Violations = append(rep.Violations, fmt.Sprintf("the store acknowledged %s %s of dispatch %s and does not hold it", p[0], p[2], p[1]))
		}
	}
	return nil
}

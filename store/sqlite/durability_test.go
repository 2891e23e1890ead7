package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

// A SIGKILL test cannot see a missing fsync: the page cache survives the process. This
// one watches the system calls. A helper process (this test binary, re-executed) makes
// decisions on a store under strace, writing a line to its stdout as each one is
// answered, and the test reads the trace: each answer comes after the decision's
// writes to the WAL and a sync of the WAL begun after the last of them. The same helper
// with synchronous=OFF fails that, which shows the test would notice durability
// weakened. The helper also copies the store's files at each answer, and the test
// checks that each copy, read as a crash would leave it, holds that decision: nothing of
// it was still in the process's memory.

const helperEnv = "SENDONCE_DURABILITY_HELPER"

// 12 claims of distinct keys, 4 of them crossed at choose_file and send, and recorded.
const claims, crossed = 12, 4

// TestMain runs the helper instead of the tests when the durability test starts this
// binary as one.
func TestMain(m *testing.M) {
	if path := os.Getenv(helperEnv); path != "" {
		if err := decide(path, os.Getenv(helperEnv+"_SYNC")); err != nil {
			fmt.Fprintln(os.Stderr, "durability helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// answered is the line the helper writes as each decision is answered.
const answered = "answered\n"

// decide makes the helper's decisions on the store at path and, at each answer, copies
// its database and WAL into a folder of snapshots beside it.
func decide(path, synchronous string) error {
	ctx := context.Background()
	b, err := Open(ctx, path, Options{synchronous: synchronous})
	if err != nil {
		return err
	}
	b.checkpoints.every = 8 // a few checkpoints and WAL restarts among the decisions
	s := store.New(b)
	defer s.Close()
	answers := 0
	answer := func() error {
		os.Stdout.WriteString(answered)
		answers++
		// The turn keeps the checkpointer from restarting the WAL between the copies.
		b.turn.take(ctx)
		defer b.turn.give()
		snapshot := filepath.Join(filepath.Dir(path), "snapshots", strconv.Itoa(answers))
		if err := os.MkdirAll(snapshot, 0o700); err != nil {
			return err
		}
		for _, suffix := range []string{"", "-wal"} {
			raw, err := os.ReadFile(path + suffix)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(snapshot, "s.db"+suffix), raw, 0o600); err != nil {
				return err
			}
		}
		return nil
	}
	id, _ := gate.Title("Bob")
	for i := 0; i < claims; i++ {
		res, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{gate.NewKey(id, gate.DigestOf([]byte(fmt.Sprint("file ", i))))}, Task: "T"})
		if err != nil || !res.Granted {
			return fmt.Errorf("claim %d: %v %+v", i, err, res)
		}
		if err := answer(); err != nil {
			return err
		}
		if i < crossed {
			for _, bd := range []gate.Boundary{gate.ChooseFile, gate.Send} {
				if _, err := s.Cross(ctx, res.Permit, bd, ""); err != nil {
					return fmt.Errorf("cross %s: %v", bd, err)
				}
				if err := answer(); err != nil {
					return err
				}
			}
			if _, err := s.Record(ctx, res.Permit, store.RecordRequest{Outcome: gate.SendStatusUnknown}); err != nil {
				return fmt.Errorf("record: %v", err)
			}
			if err := answer(); err != nil {
				return err
			}
		}
	}
	return nil
}

// walTrace is what the trace shows of the helper's WAL.
type walTrace struct {
	answers int // decisions answered
	syncs   int // fsync or fdatasync of the WAL that returned 0
	writes  int // writes to the WAL
	// undurable counts the answers given with no write to the WAL since the answer
	// before (a commit writes at least one page) or with one not followed by a sync.
	undurable int
	// events is the number of events in the snapshot taken at each answer.
	events []int
}

// traceWAL runs the helper under strace and reads the trace of its WAL.
func traceWAL(t *testing.T, synchronous string) walTrace {
	t.Helper()
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Fatalf("the durability test needs strace (scripts/setup-deps installs it): %v", err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "sendonce.db")
	b, err := Create(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	trace := filepath.Join(dir, "trace")
	cmd := exec.Command(strace, "-f", "-y", "-e", "trace=fsync,fdatasync,pwrite64,pwritev,pwritev2,write", "-o", trace, os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+path, helperEnv+"_SYNC="+synchronous)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the helper under strace: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	w := readTrace(t, string(raw), path+"-wal")
	if w.answers != decisions {
		t.Fatalf("the trace shows %d answers; the helper gave %d", w.answers, decisions)
	}
	for i := 1; i <= w.answers; i++ {
		w.events = append(w.events, eventsIn(t, filepath.Join(dir, "snapshots", strconv.Itoa(i), "s.db")))
	}
	return w
}

// eventsIn counts the events of the store copied to path, opened by SQLite's own VFS,
// which rebuilds the WAL's index from the frames whose checksums hold, as after a crash.
func eventsIn(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM events").Scan(&n); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return n
}

// readTrace reads strace -f -y output, in which a call another thread interrupted is
// split in two lines:
//
//	1234  fdatasync(7</tmp/x/sendonce.db-wal>) = 0
//	1234  fsync(7</tmp/x/sendonce.db-wal> <unfinished ...>
//	1234  <... fsync resumed>) = 0
//	1234  pwrite64(7</tmp/x/sendonce.db-wal>, "\0\0\0\2"..., 1048, 32) = 1048
//	1234  write(1<pipe:[5678]>, "answered\n", 9) = 9
//
// A write makes the WAL dirty from its start; a sync cleans it when it returns 0, if it
// began after the last write to the WAL had begun.
func readTrace(t *testing.T, raw, wal string) walTrace {
	t.Helper()
	call := regexp.MustCompile(`^(\d+) +(?:(fsync|fdatasync|pwrite64|pwritev2?|write)\((\d+)<([^>]*)>(.*)|<\.\.\. (fsync|fdatasync|pwrite64|pwritev2?|write) resumed>(.*))$`)
	written := regexp.MustCompile(`, (\d+), \d+\) += (-?\d+)`)
	var w walTrace
	dirty, wrote := false, false
	line, lastWrite := 0, -1
	syncing := map[string]int{} // by thread: the line where a sync of the WAL began
	synced := func(began int, result string) {
		if strings.HasSuffix(result, "= 0") {
			w.syncs++
			if began > lastWrite {
				dirty = false
			}
		}
	}
	for _, text := range strings.Split(raw, "\n") {
		line++
		m := call.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		thread := m[1]
		if name := m[6]; name != "" { // resumed
			if began, ok := syncing[thread]; ok && (name == "fsync" || name == "fdatasync") {
				delete(syncing, thread)
				synced(began, m[7])
			}
			continue
		}
		name, file, rest := m[2], m[4], m[5]
		switch {
		case name == "write" && strings.HasPrefix(rest, ", "+strconv.Quote(answered)):
			w.answers++
			if dirty || !wrote {
				w.undurable++
			}
			wrote = false
		case file != wal:
		case name != "fsync" && name != "fdatasync": // pwrite64, pwritev or write
			w.writes++
			dirty, wrote, lastWrite = true, true, line
			if n := written.FindStringSubmatch(rest); n != nil && n[1] != n[2] {
				t.Fatalf("a write to the WAL wrote %s of %s bytes: %s", n[2], n[1], text)
			}
		case strings.HasSuffix(rest, "<unfinished ...>"):
			syncing[thread] = line
		default:
			synced(line, rest)
		}
	}
	return w
}

// decisions is the number of decisions the helper commits and answers.
const decisions = claims + crossed*3

// TestEveryDecisionSyncsTheWAL: every committed claim, crossing and record is synced to
// the WAL before it is answered (synchronous=FULL), every byte of it: each answer comes
// after the commit's writes to the WAL and a sync after the last of them. With
// synchronous=OFF none is, and the trace says so.
func TestEveryDecisionSyncsTheWAL(t *testing.T) {
	full := traceWAL(t, "")
	t.Logf("synchronous=FULL: %+v", full)
	if full.undurable != 0 {
		t.Errorf("%d of %d decisions were answered before their writes to the WAL were made and synced", full.undurable, decisions)
	}
	if full.syncs < decisions {
		t.Errorf("%d syncs of the WAL for %d committed decisions; want at least one each", full.syncs, decisions)
	}
	for i := range full.events {
		if i == 0 && full.events[0] == 0 || i > 0 && full.events[i] <= full.events[i-1] {
			t.Errorf("the store's files as of answer %d hold no more events than before it (%v): that decision was not in the files when it was answered", i+1, full.events)
			break
		}
	}

	off := traceWAL(t, "OFF")
	t.Logf("synchronous=OFF: %+v", off)
	if off.syncs != 0 || off.undurable != decisions {
		t.Errorf("with synchronous=OFF the trace shows %d syncs and %d of %d decisions answered unsynced; the control must show none and all", off.syncs, off.undurable, decisions)
	}
}

// The trace's reading on made-up traces: a sync begun before the last write does not
// make it durable, nor does any other call on the WAL that returns 0.
func TestReadTrace(t *testing.T) {
	const wal = "/s/s.db-wal"
	const (
		write  = `1  pwrite64(7</s/s.db-wal>, "\0"..., 1048, 32) = 1048`
		sync   = `1  fdatasync(7</s/s.db-wal>) = 0`
		answer = `1  write(1<pipe:[5]>, "answered\n", 9) = 9`
	)
	for _, tc := range []struct {
		name      string
		trace     []string
		undurable int
	}{
		{"written, synced, answered", []string{write, sync, answer}, 0},
		{"two decisions", []string{write, write, sync, answer, write, sync, answer}, 0},
		{"written after the sync", []string{write, sync, write, answer}, 1},
		{"nothing written", []string{write, sync, answer, answer}, 1},
		{"a sync begun before the write", []string{
			`2  fsync(7</s/s.db-wal> <unfinished ...>`, write, `2  <... fsync resumed>) = 0`, answer}, 1},
		{"a sync begun after the write, split", []string{
			write, `2  fsync(7</s/s.db-wal> <unfinished ...>`, `1  write(9</x>, "a", 1) = 1`, `2  <... fsync resumed>) = 0`, answer}, 0},
		{"a failed sync", []string{write, `1  fsync(7</s/s.db-wal>) = -1 EIO (Input/output error)`, answer}, 1},
		{"a sync of another file", []string{write, `1  fsync(8</s/s.db>) = 0`, answer}, 1},
		{"a write, not a sync, returning 0", []string{write, sync, `1  write(7</s/s.db-wal>, "", 0) = 0`, answer}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if w := readTrace(t, strings.Join(tc.trace, "\n"), wal); w.undurable != tc.undurable {
				t.Errorf("%+v; want %d undurable", w, tc.undurable)
			}
		})
	}
}

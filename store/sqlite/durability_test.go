package sqlite

import (
	"context"
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
// answered, and the test reads the trace: every write to the store's WAL is followed by
// a sync of the WAL before the next answer, and the WAL is synced at least once per
// committed decision. The same helper with synchronous=OFF fails both, which shows the
// test would notice durability weakened.

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

// decide makes the helper's decisions on the store at path.
func decide(path, synchronous string) error {
	ctx := context.Background()
	b, err := Open(ctx, path, Options{synchronous: synchronous})
	if err != nil {
		return err
	}
	s := store.New(b)
	defer s.Close()
	id, _ := gate.Title("Bob")
	for i := 0; i < claims; i++ {
		res, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{gate.NewKey(id, gate.DigestOf([]byte(fmt.Sprint("file ", i))))}, Task: "T"})
		if err != nil || !res.Granted {
			return fmt.Errorf("claim %d: %v %+v", i, err, res)
		}
		os.Stdout.WriteString(answered)
		if i < crossed {
			for _, bd := range []gate.Boundary{gate.ChooseFile, gate.Send} {
				if _, err := s.Cross(ctx, res.Permit, bd, ""); err != nil {
					return fmt.Errorf("cross %s: %v", bd, err)
				}
				os.Stdout.WriteString(answered)
			}
			if _, err := s.Record(ctx, res.Permit, store.RecordRequest{Outcome: gate.SendStatusUnknown}); err != nil {
				return fmt.Errorf("record: %v", err)
			}
			os.Stdout.WriteString(answered)
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
	// before (a commit writes at least one page) or with one not synced since.
	undurable int
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
	cmd := exec.Command(strace, "-f", "-y", "-e", "trace=fsync,fdatasync,pwrite64,write", "-o", trace, os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+path, helperEnv+"_SYNC="+synchronous)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the helper under strace: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	return readTrace(t, string(raw), path+"-wal")
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
// A write to the WAL counts from its start, a sync from its successful return: the
// order that makes a write durable. A commit that had not written its pages by its
// answer (held in memory) shows as an answer with no write before it.
func readTrace(t *testing.T, raw, wal string) walTrace {
	t.Helper()
	call := regexp.MustCompile(`^(\d+) +(?:(fsync|fdatasync|pwrite64|write)\((\d+)<([^>]*)>(.*)|<\.\.\. (fsync|fdatasync|pwrite64|write) resumed>(.*))$`)
	var w walTrace
	dirty, wrote := false, false
	pendingSync := map[string]bool{} // by thread: a sync of the WAL not returned yet
	for _, line := range strings.Split(raw, "\n") {
		m := call.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		thread := m[1]
		if m[6] != "" { // resumed
			if pendingSync[thread] && m[6] != "write" && m[6] != "pwrite64" {
				delete(pendingSync, thread)
				if strings.HasSuffix(m[7], "= 0") {
					w.syncs++
					dirty = false
				}
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
		case name == "pwrite64":
			w.writes++
			dirty, wrote = true, true
		case strings.HasSuffix(rest, "<unfinished ...>"):
			pendingSync[thread] = true
		case strings.HasSuffix(rest, "= 0"):
			w.syncs++
			dirty = false
		}
	}
	if w.answers != decisions {
		t.Fatalf("the trace shows %d answers; the helper gave %d", w.answers, decisions)
	}
	return w
}

// decisions is the number of decisions the helper commits and answers.
const decisions = claims + crossed*3

// TestEveryDecisionSyncsTheWAL: every committed claim, crossing and record is synced to
// the WAL before it is answered (synchronous=FULL), every byte of it: each answer comes
// after the commit's writes to the WAL and a sync after the last of them. With synchronous=OFF none is, and the trace says
// so. It also shows the WAL's writes gathered (walwrites.go): about one a commit, where
// SQLite alone makes two for each page.
func TestEveryDecisionSyncsTheWAL(t *testing.T) {
	full := traceWAL(t, "")
	t.Logf("synchronous=FULL: %+v", full)
	if full.undurable != 0 {
		t.Errorf("%d of %d decisions were answered before their writes to the WAL were made and synced", full.undurable, decisions)
	}
	if full.syncs < decisions {
		t.Errorf("%d syncs of the WAL for %d committed decisions; want at least one each", full.syncs, decisions)
	}
	if full.writes > 2*decisions {
		t.Errorf("%d writes to the WAL for %d commits: its writes were not gathered", full.writes, decisions)
	}

	off := traceWAL(t, "OFF")
	t.Logf("synchronous=OFF: %+v", off)
	if off.syncs != 0 || off.undurable != decisions {
		t.Errorf("with synchronous=OFF the trace shows %d syncs and %d of %d decisions answered unsynced; the control must show none and all", off.syncs, off.undurable, decisions)
	}
	if off.writes < 8*decisions {
		t.Errorf("with synchronous=OFF (writes not gathered) %d writes to the WAL for %d commits; want two a page", off.writes, decisions)
	}
}

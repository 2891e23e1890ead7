package sqlite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

// A SIGKILL test cannot see a missing fsync: the page cache survives the process. This
// one watches the system calls. A helper process (this test binary, re-executed) makes
// decisions on a store under strace, and the test counts the syncs of the store's WAL:
// at least one per committed decision. The same helper with synchronous=OFF makes none,
// which shows the count would notice durability weakened.

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
		if i < crossed {
			for _, bd := range []gate.Boundary{gate.ChooseFile, gate.Send} {
				if _, err := s.Cross(ctx, res.Permit, bd, ""); err != nil {
					return fmt.Errorf("cross %s: %v", bd, err)
				}
			}
			if _, err := s.Record(ctx, res.Permit, store.RecordRequest{Outcome: gate.SendStatusUnknown}); err != nil {
				return fmt.Errorf("record: %v", err)
			}
		}
	}
	return nil
}

// walSyncs runs the helper under strace and counts fsync/fdatasync calls on the WAL.
func walSyncs(t *testing.T, synchronous string) int {
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
	cmd := exec.Command(strace, "-f", "-y", "-e", "trace=fsync,fdatasync", "-o", trace, os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+path, helperEnv+"_SYNC="+synchronous)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the helper under strace: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	// e.g. 1234  fdatasync(7</tmp/x/sendonce.db-wal>) = 0
	wal := regexp.MustCompile(`f(?:data)?sync\(\d+<` + regexp.QuoteMeta(path) + `-wal>\) += 0`)
	return len(wal.FindAllIndex(raw, -1))
}

// TestEveryDecisionSyncsTheWAL: every committed claim, crossing and record is synced to
// the WAL before it is answered (synchronous=FULL); with synchronous=OFF none is, and
// the count says so.
func TestEveryDecisionSyncsTheWAL(t *testing.T) {
	decisions := claims + crossed*3
	if n := walSyncs(t, ""); n < decisions {
		t.Fatalf("%d syncs of the WAL for %d committed decisions; want at least one each", n, decisions)
	} else {
		t.Logf("%d syncs of the WAL for %d committed decisions (synchronous=FULL)", n, decisions)
	}
	if n := walSyncs(t, "OFF"); n != 0 {
		t.Fatalf("with synchronous=OFF the helper synced the WAL %d times; the control must show none", n)
	} else {
		t.Log("with synchronous=OFF: " + strconv.Itoa(n) + " syncs of the WAL: the count notices weakened durability")
	}
}

package workstation

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

func crossing(i int) store.CrossingRef {
	return store.CrossingRef{DispatchID: fmt.Sprintf("d%02d", i), Key: "v2:title:Bob:x", Token: uint64(i), Task: "T", Boundary: gate.Send,
		At: time.Date(2026, 12, 7, 0, 0, i, 0, time.UTC)}
}

// TestJournalKeepsWhatIsAppended: appends from many goroutines at once (as processes of
// one workstation, under the file lock) all come back; Check keeps what verify returns.
func TestJournalKeepsWhatIsAppended(t *testing.T) {
	j := Journal{Path: JournalFile(t.TempDir(), "store1")}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if had, err := j.Append(crossing(i)); err != nil || had {
				t.Error(had, err)
			}
		}()
	}
	wg.Wait()
	if had, err := j.Append(crossing(3)); err != nil || !had {
		t.Fatalf("Append of a crossing the journal holds = %v, %v; want had", had, err)
	}
	var seen []store.CrossingRef
	if err := j.Check(func(all []store.CrossingRef) ([]store.CrossingRef, error) { seen = all; return all[:5], nil }); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 20 {
		t.Fatalf("Check saw %d crossings; want 20", len(seen))
	}
	if err := j.Check(func(all []store.CrossingRef) ([]store.CrossingRef, error) { seen = all; return all, nil }); err != nil || len(seen) != 5 {
		t.Fatalf("after keeping 5, Check saw %d (%v); want 5", len(seen), err)
	}
	failed := errors.New("the store could not be asked")
	if err := j.Check(func([]store.CrossingRef) ([]store.CrossingRef, error) { return nil, failed }); !errors.Is(err, failed) {
		t.Fatalf("Check = %v; want verify's error", err)
	}
	if err := j.Check(func(all []store.CrossingRef) ([]store.CrossingRef, error) { seen = all; return all, nil }); err != nil || len(seen) != 5 {
		t.Fatalf("a failed verify changed the journal: %d (%v); want 5", len(seen), err)
	}
}

// TestJournalTornAndDamaged: a last line without its newline (a crash before the fsync,
// so never acted on) is dropped; a damaged complete line fails closed.
func TestJournalTornAndDamaged(t *testing.T) {
	dir := t.TempDir()
	j := Journal{Path: filepath.Join(dir, "crossings-s")}
	if _, err := j.Append(crossing(1)); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(j.Path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"dispatch_id":"d02","key":`)
	f.Close()
	var seen []store.CrossingRef
	if err := j.Check(func(all []store.CrossingRef) ([]store.CrossingRef, error) { seen = all; return all, nil }); err != nil || len(seen) != 1 || seen[0].DispatchID != "d01" {
		t.Fatalf("torn last line: Check saw %+v (%v); want d01 alone", seen, err)
	}
	if _, err := j.Append(crossing(3)); err != nil {
		t.Fatal(err)
	}
	if err := j.Check(func(all []store.CrossingRef) ([]store.CrossingRef, error) { seen = all; return all, nil }); err != nil || len(seen) != 2 || seen[1].DispatchID != "d03" {
		t.Fatalf("an append after a torn line: Check saw %+v (%v); want d01 and d03", seen, err)
	}
	if err := os.WriteFile(j.Path, []byte("{\"dispatch_id\":\"d01\"}\nnot json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = j.Check(func(all []store.CrossingRef) ([]store.CrossingRef, error) { return all, nil })
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a damaged line: %v; want ErrUnavailable", err)
	}
}

//go:build cgo

package sendonce_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/evidence"
)

var updateSkeletons = flag.Bool("update-skeletons", false, "rewrite testdata/skeletons from the replayed deliveries")

// skeleton is what a delivery checked and in what order, without what it saw: one line
// per record with its kind, a step's class and intent, a gate use's action, boundary
// and decision, an observation's kind and phase. A faster delivery must still leave
// the same skeleton: speed may not come from dropping a check.
func skeleton(b *evidence.Bundle) string {
	var out strings.Builder
	for _, r := range b.Records {
		fmt.Fprintf(&out, "%s", r.Kind)
		switch {
		case r.Kind == evidence.KindStep:
			fmt.Fprintf(&out, " %s %s", r.Class, r.Intent)
		case r.Gate != nil:
			fmt.Fprintf(&out, " %s %s %s", r.Gate.Action, r.Gate.Boundary, r.Gate.Decision)
		case r.Observed != nil:
			fmt.Fprintf(&out, " %s %s", r.Observed.What, r.Observed.Phase)
		}
		if r.Error != "" {
			out.WriteString(" (error)")
		}
		out.WriteByte('\n')
	}
	return out.String()
}

// checkSkeleton compares a replayed delivery's skeleton with testdata/skeletons/NAME.txt,
// written from the code of 2026-12-01 (before issue 15's speed work); a difference
// fails the test until the golden file is rewritten on purpose (-update-skeletons) and
// the commit says why each line changed.
func checkSkeleton(t *testing.T, name string, b *evidence.Bundle) {
	t.Helper()
	path := filepath.Join("testdata", "skeletons", name+".txt")
	got := skeleton(b)
	if *updateSkeletons {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestReplayFixtures -update-skeletons . writes it)", err)
	}
	if got != string(want) {
		t.Fatalf("the delivery's record skeleton differs from %s (a check added, dropped or moved?):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff lists the lines of want missing from got (-) and those new in got (+), in
// order: enough to see which check moved.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out strings.Builder
	i, j := 0, 0
	for i < len(w) || j < len(g) {
		switch {
		case i < len(w) && j < len(g) && w[i] == g[j]:
			i, j = i+1, j+1
		case j < len(g) && (i >= len(w) || !strings.Contains(strings.Join(w[i:], "\n"), g[j])):
			fmt.Fprintf(&out, "+ %s\n", g[j])
			j++
		default:
			fmt.Fprintf(&out, "- %s\n", w[i])
			i++
		}
	}
	return out.String()
}

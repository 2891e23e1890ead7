package sendonce_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/gate"
)

// TestExitCodeTable: each sentinel gets its one code, 5 is the store's, and an error
// nobody classified refuses (5) rather than pass.
func TestExitCodeTable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
		kind string
	}{
		{nil, sendonce.ExitOK, "error"},
		{fmt.Errorf("--to: %w", sendonce.ErrInvalid), sendonce.ExitUsage, "bad_input"},
		{fmt.Errorf("inspect: %w", sendonce.ErrDesktopUnavailable), sendonce.ExitUsage, "bad_input"},
		{fmt.Errorf("open: %w", sendonce.ErrUnavailable), sendonce.ExitFailClosed, "fail_closed"},
		{sendonce.ErrNotInitialized, sendonce.ExitFailClosed, "fail_closed"},
		{sendonce.ErrConsumed, sendonce.ExitConsumed, "consumed"},
		{sendonce.ErrHeld, sendonce.ExitHeld, "held"},
		{sendonce.ErrStale, sendonce.ExitStale, "stale"},
		{sendonce.ErrEvidence, sendonce.ExitVerifyFailed, "evidence_untrusted"},
		{sendonce.ErrUnauthenticated, sendonce.ExitUnauthenticated, "evidence_untrusted"},
		{context.Canceled, sendonce.ExitInterrupted, "interrupted"},
		{errors.New("nobody classified this"), sendonce.ExitFailClosed, "error"},
	} {
		if got := sendonce.ExitCode(tc.err); got != tc.code {
			t.Errorf("ExitCode(%v) = %d; want %d", tc.err, got, tc.code)
		}
		if tc.err != nil {
			if got := sendonce.ErrorKind(tc.err); got != tc.kind {
				t.Errorf("ErrorKind(%v) = %q; want %q", tc.err, got, tc.kind)
			}
		}
	}
}

// TestClassifyExit: classify exits with its outcome's code, and 1 (as evidence verify)
// for a transcript that cannot be trusted, never 5 (the store's).
func TestClassifyExit(t *testing.T) {
	for _, tc := range []struct {
		c    evidence.Classification
		code int
	}{
		{evidence.Classification{Outcome: gate.SentVerified}, sendonce.ExitOK},
		{evidence.Classification{Outcome: gate.NotSent}, sendonce.ExitNotSent},
		{evidence.Classification{Outcome: gate.SendStatusUnknown}, sendonce.ExitUnknown},
		{evidence.Classification{Outcome: gate.SentRejected}, sendonce.ExitRejected},
		{evidence.FailClosed(errors.New("not a gzip archive")), sendonce.ExitVerifyFailed},
	} {
		if got := sendonce.ClassifyExit(sendonce.ClassifyResult{Classification: tc.c}); got != tc.code {
			t.Errorf("ClassifyExit(%s, fail closed %v) = %d; want %d", tc.c.Outcome, tc.c.FailClosed, got, tc.code)
		}
	}
}

// TestInspectNoDisplay: inspect on a display no X server serves is
// ErrDesktopUnavailable, exit 2, naming the display; not the store's 5.
func TestInspectNoDisplay(t *testing.T) {
	_, err := sendonce.Inspect(context.Background(), sendonce.InspectRequest{Process: "gajim", Display: ":97"}, sendonce.Options{})
	if !errors.Is(err, sendonce.ErrDesktopUnavailable) || sendonce.ExitCode(err) != sendonce.ExitUsage {
		t.Fatalf("Inspect on a dead display: %v (exit %d); want ErrDesktopUnavailable, exit 2", err, sendonce.ExitCode(err))
	}
	if want := ":97"; !strings.Contains(err.Error(), want) {
		t.Errorf("the error %q does not name the display", err)
	}
}

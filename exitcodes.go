package sendonce

import (
	"context"
	"errors"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

// Exit codes: the contract with every caller of the CLI, and the exit_code an HTTP
// problem carries. Documented in docs/gate.md ("Exit codes"); never renumbered.
const (
	ExitOK              = 0
	ExitVerifyFailed    = 1  // evidence verify, report, export: the bundle cannot be trusted
	ExitUsage           = 2  // usage or bad input
	ExitConsumed        = 3  // refused: consumed or crossed
	ExitHeld            = 4  // refused: another executor holds it
	ExitFailClosed      = 5  // refused: the store is unavailable (fail closed)
	ExitStale           = 6  // refused: stale or expired permit
	ExitUnknown         = 7  // deliver: send_status_unknown
	ExitNotSent         = 8  // deliver: not_sent, stopped safely before any boundary
	ExitRejected        = 9  // deliver: sent_rejected
	ExitUnauthenticated = 10 // evidence verify: consistent, but nothing outside the bundle vouches for it
	ExitInterrupted     = 130
)

// exitCodes is the one table from the errors callers branch on to exit codes, in the
// order they are tried.
var exitCodes = []struct {
	err  error
	code int
}{
	{ErrInvalid, ExitUsage},
	{ErrDesktopUnavailable, ExitUsage},
	{ErrNotInitialized, ExitFailClosed},
	{ErrCrossedNotJournaled, ExitUnknown},
	{ErrUnavailable, ExitFailClosed},
	{ErrConsumed, ExitConsumed},
	{ErrStale, ExitStale},
	{ErrHeld, ExitHeld},
	{context.Canceled, ExitInterrupted},
	{ErrEvidence, ExitVerifyFailed},
	{ErrUnauthenticated, ExitUnauthenticated},
}

// ErrDesktopUnavailable: the X display, its accessibility bus, or the app on it could
// not be reached or read (inspect, a profile's window). Nothing was claimed or touched:
// the CLI exits 2 (bad input: the display or app named, or not started), never 5, which
// is the store's. Its message names the cause.
var ErrDesktopUnavailable = errors.New("the desktop is unavailable")

// desktopError is an error of the desktop: its own message, matching
// ErrDesktopUnavailable.
type desktopError struct{ err error }

func (e desktopError) Error() string        { return e.err.Error() }
func (e desktopError) Unwrap() error        { return e.err }
func (e desktopError) Is(target error) bool { return target == ErrDesktopUnavailable }

// desktopUnavailable marks an error met while reading the desktop as
// ErrDesktopUnavailable, unless it is already bad input or an interrupt.
func desktopUnavailable(err error) error {
	if err == nil || errors.Is(err, ErrInvalid) || errors.Is(err, context.Canceled) {
		return err
	}
	return desktopError{err}
}

// ClassifyExit is classify's exit code for a transcript's classification: its
// outcome's (0, 7, 8, 9), or ExitVerifyFailed (1, as evidence verify) when the
// transcript cannot be trusted (not a bundle, tampered with, incomplete): what it says
// frees nothing.
func ClassifyExit(c ClassifyResult) int {
	if c.FailClosed {
		return ExitVerifyFailed
	}
	return OutcomeExit(c.Outcome)
}

// ExitCode is the exit code for an error of this package: 0 for nil, and
// ExitFailClosed for an error nobody classified (refuse rather than guess).
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	for _, e := range exitCodes {
		if errors.Is(err, e.err) {
			return e.code
		}
	}
	return ExitFailClosed
}

// ErrorKind names an error's kind as the CLI's exit codes do, for callers that speak
// JSON (an MCP tool error, an HTTP problem's "kind"): idempotency_conflict (a request id
// reused for another request), bad_input, fail_closed, stale,
// crossed (a boundary this attempt already crossed), consumed, held,
// evidence_untrusted, interrupted, or error.
func ErrorKind(err error) string {
	var again *store.CrossedAgain
	switch {
	case errors.Is(err, ErrRequestReused):
		return "idempotency_conflict"
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrDesktopUnavailable):
		return "bad_input"
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrNotInitialized), errors.Is(err, context.DeadlineExceeded):
		return "fail_closed" // a deadline too: the exit table refuses it as 5
	case errors.Is(err, ErrStale):
		return "stale"
	case errors.As(err, &again):
		return "crossed"
	case errors.Is(err, ErrConsumed):
		return "consumed"
	case errors.Is(err, ErrHeld):
		return "held"
	case errors.Is(err, ErrEvidence), errors.Is(err, ErrUnauthenticated):
		return "evidence_untrusted"
	case errors.Is(err, context.Canceled):
		return "interrupted"
	}
	return "error"
}

// OutcomeExit is the exit code an outcome maps to, as deliver and classify use them.
func OutcomeExit(o gate.Outcome) int {
	switch o {
	case gate.SentVerified:
		return ExitOK
	case gate.NotSent:
		return ExitNotSent
	case gate.SentRejected:
		return ExitRejected
	}
	return ExitUnknown
}

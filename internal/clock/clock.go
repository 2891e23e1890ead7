// Package clock is the workstation's one wall clock. Every reading of the time in
// sendonce's library code goes through a clock a caller may replace (Options.Clock), so
// that a test can shift the workstation's time; the stores measure leases by their own
// clock (the database's, for a shared store). A test forbids time.Now anywhere else.
package clock

import (
	"context"
	"time"
)

// System reads the system clock: the one call of time.Now in the library.
func System() time.Time { return time.Now() }

// Or is f, or System when f is nil.
func Or(f func() time.Time) func() time.Time {
	if f == nil {
		return System
	}
	return f
}

// Sleep waits for d, or until ctx ends (its error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

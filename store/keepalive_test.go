package store

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestKeepAliveRenewsUntilRefused(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var n atomic.Int32
	refused := errors.New("fenced")
	done := KeepAlive(ctx, 5*time.Millisecond, cancel, func(context.Context) error {
		if n.Add(1) == 3 {
			return refused
		}
		return nil
	})
	if err := <-done; !errors.Is(err, refused) {
		t.Fatalf("KeepAlive reported %v; want the refusal", err)
	}
	if ctx.Err() == nil || n.Load() != 3 || !errors.Is(context.Cause(ctx), refused) {
		t.Fatalf("after a refused renewal: context %v (cause %v), %d renewals; want it cancelled after 3, the refusal its cause", ctx.Err(), context.Cause(ctx), n.Load())
	}
}

func TestKeepAliveStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	done := KeepAlive(ctx, time.Millisecond, cancel, func(context.Context) error { return nil })
	cancel(nil)
	if err := <-done; err != nil {
		t.Fatalf("stopped by its context: %v; want no error", err)
	}
}

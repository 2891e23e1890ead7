//go:build cgo && sendonce_testhooks

package main

import (
	"context"
	"time"

	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/driver/replay"
)

// replayDesktop drives a recorded fixture instead of the live desktop (deliver --replay,
// test builds only).
func replayDesktop(f *deliverFlags) func(context.Context, string) (driver.Driver, func(), error) {
	if f.display == "" {
		f.display = ":replay"
	}
	if f.sentItemTimeout == 0 {
		f.sentItemTimeout = 2 * time.Second
	}
	return func(context.Context, string) (driver.Driver, func(), error) {
		d, err := replay.New(f.replay)
		if err != nil {
			return nil, nil, usagef("--replay: %v", err)
		}
		return d, func() {}, nil
	}
}

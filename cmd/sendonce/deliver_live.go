//go:build cgo && !sendonce_testhooks

package main

import (
	"context"

	"github.com/sendonce/sendonce/driver"
)

// replayDesktop is never reached in a release build: --replay is not a flag there.
func replayDesktop(*deliverFlags) func(context.Context, string) (driver.Driver, func(), error) {
	return openLive
}

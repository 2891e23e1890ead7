//go:build cgo && !sendonce_testhooks

package main

// replayDesktop is never reached in a release build: --replay is not a flag there.
func replayDesktop(*deliverFlags) desktop { return desktop{open: openLive} }

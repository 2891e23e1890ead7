//go:build !sendonce_testhooks

package main

import "github.com/sendonce/sendonce"

// A release build (go build ./cmd/sendonce) has no test-only surfaces: no scenario
// commands, no SENDONCE_TEST_KILL_AFTER, no deliver --replay. A replayed desktop must not
// be able to record outcomes for real keys in a real store.

const testHooks = false

func testCommands() []command { return nil }

func (env *environment) killpoint(string) {}

func (env *environment) testClock(o *sendonce.Options) {}

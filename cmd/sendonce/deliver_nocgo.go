//go:build !cgo

package main

import (
	"context"

	"github.com/sendonce/sendonce"
)

// desktopBuild: this build cannot deliver (no cgo: no X11 input, no Tesseract).
const desktopBuild = false

// desktopCommands in a build without cgo: the gate, evidence and status commands work;
// deliver needs the desktop build (robotgo for input, Tesseract for OCR).
func desktopCommands() []command {
	var out []command
	for _, name := range []string{"deliver", "record", "doctor"} {
		out = append(out, command{name, "needs the desktop build (cgo, X11, Tesseract)", noDesktop(name)})
	}
	return out
}

// noDesktop is a desktop command in a build without cgo: it says why it cannot run.
func noDesktop(name string) func(context.Context, *environment, []string) error {
	return func(context.Context, *environment, []string) error {
		return usagef("%s needs the desktop build of sendonce (built with cgo, X11 and Tesseract, on Linux); this one was built without cgo: the gate, status, evidence, mcp and serve commands work here", name)
	}
}

// mcpDeliverer in a build without cgo: none; the MCP deliver tool says it needs the
// desktop build, and every other tool works.
func (env *environment) mcpDeliverer(*sendonce.Client, string, string) (*sendonce.Deliverer, func(), error) {
	return nil, func() {}, nil
}

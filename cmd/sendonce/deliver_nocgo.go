//go:build !cgo

package main

import (
	"context"

	"github.com/sendonce/sendonce"
)

// desktopCommands in a build without cgo: the gate, evidence and status commands work;
// deliver needs the desktop build (robotgo for input, Tesseract for OCR).
func desktopCommands() []command {
	return []command{{"deliver", "needs the desktop build (cgo, X11, Tesseract)", cmdNoDesktop}}
}

func cmdNoDesktop(ctx context.Context, env *environment, args []string) error {
	return usagef("deliver needs the desktop build of sendonce (built with cgo, X11 and Tesseract); this one was built without cgo")
}

// mcpDeliverer in a build without cgo: none; the MCP deliver tool says it needs the
// desktop build, and every other tool works.
func (env *environment) mcpDeliverer(*sendonce.Client, string) (*sendonce.Deliverer, func(), error) {
	return nil, func() {}, nil
}

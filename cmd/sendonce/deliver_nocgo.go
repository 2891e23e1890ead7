//go:build !cgo

package main

import "context"

// desktopCommands in a build without cgo: the gate, evidence and status commands work;
// deliver needs the desktop build (robotgo for input, Tesseract for OCR).
func desktopCommands() []command {
	return []command{{"deliver", "needs the desktop build (cgo, X11, Tesseract)", cmdNoDesktop}}
}

func cmdNoDesktop(ctx context.Context, env *environment, args []string) error {
	return usagef("deliver needs the desktop build of sendonce (built with cgo, X11 and Tesseract); this one was built without cgo")
}

package main

import "os"

// ownStderr is os.Stderr: no Tesseract engine redirects it in this build.
func ownStderr() *os.File { return os.Stderr }

// reexecForOCR does nothing: deliveries (the commands that read the screen) need the
// Linux desktop build.
func reexecForOCR([]string) {}

package atspi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Chromium-built apps (Chromium, Chrome, and Electron apps: Slack, Discord, Signal,
// Element) build their accessibility tree only when asked, behind two gates
// (Chromium's ui/accessibility/platform/atk_util_auralinux.cc and its accessibility
// modes; measured with Debian's Chromium 156 on the test bed, 2026-12-06):
//
//  1. Whether it joins the accessibility bus at all is read once, at start: the
//     switch --force-renderer-accessibility, ACCESSIBILITY_ENABLED=1 in its
//     environment, or org.a11y.Status IsEnabled on its session bus (the desktop's
//     toolkit-accessibility setting) as it starts. Setting IsEnabled or
//     ScreenReaderEnabled on a running app's session bus changes nothing, and so does
//     chrome://accessibility: an app started without one of them cannot be read until
//     it is started again with one.
//  2. On the bus, an app started without --force-renderer-accessibility shows only its
//     top-level windows, empty, until an assistive technology asks a window for its
//     attributes (Accessible.GetAttributes, as Orca does); its pages' trees then come
//     within a second.
//
// AskForTree passes the second gate where it is shut; WhyAbsent names the first.

// ToolkitChromium is the toolkit name a Chromium-built app gives on the bus
// (org.a11y.atspi.Application's ToolkitName): Chromium, Chrome and Electron alike.
const ToolkitChromium = "Chromium"

// ChromiumFix says what makes a Chromium-built app publish its tree.
const ChromiumFix = "start it again with --force-renderer-accessibility on its command line " +
	"(Chromium, Chrome and Electron apps: Slack, Discord, Signal, Element alike; for an app started from a menu, in its .desktop file's Exec line), " +
	"or with ACCESSIBILITY_ENABLED=1 in its environment; Chromium decides once, as it starts: " +
	"chrome://accessibility, and the desktop's accessibility switch, do not reach an app that already runs"

// ErrNoDocument: a Chromium-built app is on the bus, was asked for its pages' trees as
// a screen reader asks, and none of its windows holds a web document.
var ErrNoDocument = errors.New("the app's windows hold no web document")

// askPoll is how often AskForTree looks again for a document.
const askPoll = 100 * time.Millisecond

// documentSearch bounds one look for a document: the nodes read, and how deep.
const (
	documentNodes = 400
	documentDepth = 16
)

// AskForTree asks a Chromium-built app (ToolkitName "Chromium") for its pages' trees
// as a screen reader does, each of its top-level windows for its attributes, and waits
// until one of its windows holds a web document that shows (role "document web"), at
// most within (and never past ctx): without one the app's tree is its browser frame
// alone, which is no page's. Apps of other toolkits are not asked (nil). A Chromium
// app whose windows still hold no document then is ErrNoDocument (and
// ErrUnavailable), naming the fix.
func (b *Bus) AskForTree(ctx context.Context, app App, within time.Duration) error {
	if app.Toolkit != ToolkitChromium {
		return nil
	}
	wins, err := b.children(ctx, app.Ref)
	if err != nil {
		return fmt.Errorf("%w: the windows of %s (pid %d): %v", ErrUnavailable, app.Name, app.PID, err)
	}
	for _, w := range wins {
		// The answer is not needed: being asked is what turns the page's tree on.
		var attrs map[string]string
		if err := b.call(ctx, w, IfaceAccessible+".GetAttributes").Store(&attrs); err != nil && ctx.Err() != nil {
			return fmt.Errorf("%w: asking %s (pid %d) for its tree: %w", ErrUnavailable, app.Name, app.PID, ctx.Err())
		}
	}
	wctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		found, err := b.hasDocument(wctx, wins)
		if found {
			return nil
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return fmt.Errorf("%w: waiting for %s (pid %d) to show a page's tree: %w", ErrUnavailable, app.Name, app.PID, ctx.Err())
			}
			saw := fmt.Sprintf("none of its %d window(s) held a web page's tree (document web)", len(wins))
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				saw += fmt.Sprintf(" (the last look failed: %v)", err)
			}
			return fmt.Errorf("%w: %w: %s (pid %d, a Chromium-built app) was asked for its pages' trees as a screen reader asks, and after %v %s: %s",
				ErrUnavailable, ErrNoDocument, app.Name, app.PID, within, saw, ChromiumFix)
		case <-time.After(askPoll):
		}
	}
}

// hasDocument says whether a document that shows lies under one of the windows: it
// reads only what shows, depth first, and stops at the first document.
func (b *Bus) hasDocument(ctx context.Context, wins []Ref) (bool, error) {
	read := 0
	var look func(r Ref, depth int) (bool, error)
	look = func(r Ref, depth int) (bool, error) {
		if read++; read > documentNodes || depth > documentDepth {
			return false, nil
		}
		n, kids, err := b.node(ctx, r, true, false, false, nil)
		if err != nil {
			return false, err
		}
		if !n.Has("showing") {
			return false, nil
		}
		if isDocument(n.Role) {
			return true, nil
		}
		for _, k := range kids {
			if ok, err := look(k, depth+1); ok || err != nil {
				return ok, err
			}
		}
		return false, nil
	}
	for _, w := range wins {
		if ok, err := look(w, 0); ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// chromiumPack is a file every Chromium-built program maps (Chromium's and Chrome's
// resource pack; Electron ships it beside each app's binary).
const chromiumPack = "/chrome_100_percent.pak"

// IsChromium says whether process pid, under procDir (/proc), is a Chromium-built
// program: it maps chromiumPack. False when its maps cannot be read (another user's
// process).
func IsChromium(procDir string, pid int) bool {
	maps, err := os.ReadFile(filepath.Join(procDir, strconv.Itoa(pid), "maps"))
	return err == nil && mapsChromium(maps)
}

// mapsChromium says whether a process's maps name chromiumPack (a whole file name,
// at a line's end).
func mapsChromium(maps []byte) bool { return bytes.Contains(maps, []byte(chromiumPack+"\n")) }

// whyChromium is WhyAbsent's answer for a Chromium-built process: it publishes no tree
// because it started without being asked to (the first gate).
func whyChromium(maps []byte) string {
	if !mapsChromium(maps) {
		return ""
	}
	return "it is a Chromium-built app (it maps " + chromiumPack[1:] + ") that started without accessibility, which Chromium reads only as it starts: " + ChromiumFix
}

//go:build cgo

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"

	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/driver/x11"
	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/vision"
	"github.com/sendonce/sendonce/vision/tesseract"
)

// BenchmarkLiveTypedPathReadBack types 100 staged-looking paths (the test bed's
// staging folder, a 32-hex dispatch folder, a file name; each a real file) into the
// test bed's Gajim file chooser's location field, one after the other, and reads each
// back as a whole_line step before choose_file would (the preparations of the variant of
// Gajim's profile TestReplayedPathReadBack uses, the path's own characters). It reports how many were read back, how many reads that
// took, and how long a path took to type. A path not read back leaves its field's
// capture and every reading in SENDONCE_TYPED_DIR (default: a temporary folder) for a
// person to tell a lost key from a misread. Not in CI: BENCHMARKS.md's typing rows
// give the command (SENDONCE_TYPED_PATHS changes the count,
// SENDONCE_TYPED_WITH the typist: see typePath).
func BenchmarkLiveTypedPathReadBack(b *testing.B) {
	bed := liveTestBed(b)
	display, staging := bed.display(b), bed.staging(b)
	b.Setenv("DISPLAY", display)
	d, err := x11.Open(display)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	ocr, err := tesseract.New(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ocr.Close()
	ctx := context.Background()
	keep := os.Getenv("SENDONCE_TYPED_DIR")
	if keep == "" {
		keep = b.TempDir()
	}
	paths := 100
	if n := os.Getenv("SENDONCE_TYPED_PATHS"); n != "" {
		fmt.Sscan(n, &paths)
	}
	// The preparations of the read-back step TestReplayedPathReadBack gives Gajim's
	// profile (the built-in profiles check the file's name only: README).
	check := driver.Step{Prep: vision.Prep{Gray: true, Scale: 3, Smooth: true}, AltPreps: []vision.Prep{
		{Gray: true, Scale: 4, Smooth: true}, {Gray: true, Scale: 3, Smooth: true, Threshold: 180}, {Gray: true, Scale: 6, Smooth: true}}}
	chooser := openChooser(b, ctx, d)
	defer func() {
		d.Key(ctx, "Escape")
		time.Sleep(300 * time.Millisecond)
		d.Key(ctx, "Escape")
	}()
	region := image.Rect(chooser.Bounds.Min.X+160, chooser.Bounds.Min.Y+5, chooser.Bounds.Max.X-5, chooser.Bounds.Min.Y+45)
	rd := &vision.Reader{Screen: d, OCR: ocr}
	var gid int
	if fi, err := os.Stat(staging); err == nil {
		gid = int(fi.Sys().(*syscall.Stat_t).Gid)
	}
	b.ResetTimer()
	readBack, reads := 0, 0
	var typing time.Duration
	for i := range paths {
		var id [16]byte
		rand.Read(id[:])
		dir := filepath.Join(staging, hex.EncodeToString(id[:]))
		path := filepath.Join(dir, fmt.Sprintf("typed-%03d.txt", i))
		os.Mkdir(dir, 0o750)
		os.WriteFile(path, []byte("typed\n"), 0o640)
		os.Chown(dir, -1, gid)
		os.Chown(path, -1, gid)
		if err := d.Key(ctx, "ctrl+a"); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := typePath(ctx, d, path); err != nil {
			b.Fatal(err)
		}
		typing += time.Since(start)
		a := vision.Anchor{Text: path, WholeLine: true, Match: evidence.PathMatches, Mode: vision.SingleLine, Prep: check.Prep, AltPreps: check.AltPreps}
		found, err := rd.WaitStable(ctx, region, a, 3*time.Second)
		reads += found.Reads
		os.RemoveAll(dir)
		if err == nil {
			readBack++
			continue
		}
		// Keep what a person needs to tell a lost key from a misread.
		frame, cerr := d.Capture(ctx, region)
		if cerr != nil {
			b.Fatal(cerr)
		}
		var readings []string
		for _, p := range append([]vision.Prep{a.Prep}, a.AltPreps...) {
			ws, _ := vision.RecognizeCharset(ctx, ocr, p.Apply(frame), vision.SingleLine, "|"+path)
			var texts []string
			for _, w := range ws {
				texts = append(texts, w.Text)
			}
			readings = append(readings, fmt.Sprintf("%+v: %s", p, strings.Join(texts, " ")))
		}
		name := filepath.Join(keep, fmt.Sprintf("missed-%03d", i))
		f, _ := os.Create(name + ".png")
		png.Encode(f, frame)
		f.Close()
		os.WriteFile(name+".txt", []byte(path+"\n"+strings.Join(readings, "\n")+"\n"), 0o644)
		b.Logf("path %d not read back: %s (readings in %s.txt)", i, path, name)
	}
	b.StopTimer()
	b.ReportMetric(float64(readBack), "read-back")
	b.ReportMetric(float64(paths), "paths")
	b.ReportMetric(float64(reads)/float64(paths), "reads/path")
	b.ReportMetric(typing.Seconds()*1000/float64(paths), "ms-typing/path")
}

// typePath types through the driver (XTest events on its connection), or with SENDONCE_TYPED_WITH=xdotool:MS
// through xdotool at MS milliseconds a character (the rate the anchor script types at,
// to measure what the location field accepts at it).
func typePath(ctx context.Context, d *x11.Desktop, path string) error {
	with := os.Getenv("SENDONCE_TYPED_WITH")
	if with == "" {
		return d.Type(ctx, path)
	}
	ms, ok := strings.CutPrefix(with, "xdotool:")
	if !ok {
		return fmt.Errorf("SENDONCE_TYPED_WITH=%s: want xdotool:MS", with)
	}
	return exec.CommandContext(ctx, "xdotool", "type", "--delay", ms, "--", path).Run()
}

// openChooser opens the test bed Gajim's file chooser on the open conversation's send
// page, with its location field showing, and returns the chooser's window.
func openChooser(b *testing.B, ctx context.Context, d *x11.Desktop) driver.Window {
	b.Helper()
	ws, err := d.Windows(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var app *driver.Window
	for i := range ws {
		if ws[i].Title == "Gajim" && ws[i].Viewable {
			app = &ws[i]
		}
	}
	if app == nil {
		b.Fatal("no Gajim window on the test bed's display")
	}
	if err := d.Activate(ctx, *app); err != nil {
		b.Fatal(err)
	}
	d.Key(ctx, "ctrl+shift+u")
	time.Sleep(700 * time.Millisecond)
	d.Click(ctx, image.Pt(849, 599)) // Add Files… (the anchor script's position)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ws, _ := d.Windows(ctx)
		for _, w := range ws {
			if strings.HasPrefix(w.Title, "Choose File to Send") && w.Viewable {
				time.Sleep(300 * time.Millisecond)
				if err := d.Key(ctx, "ctrl+l"); err != nil {
					b.Fatal(err)
				}
				time.Sleep(200 * time.Millisecond)
				return w
			}
		}
	}
	b.Fatal("the file chooser did not open (is a conversation open in the test bed's Gajim?)")
	return driver.Window{}
}

// TestLiveTypingReachesTheWindow: text typed on the live desktop reaches the focused
// window as exactly its characters, in order, Shift held where the character needs
// it, and no key is left down. The test maps a window of its own on the test bed's
// display, gives it the keyboard focus (and fails if it did not get it: the keys would
// go to Gajim), types every printable ASCII character and a path through the driver,
// and decodes the key presses the window receives with the display's keyboard map; a
// press of any other key fails it. On the local Xvfb the text goes as XTest events on
// the driver's own connection, not through robotgo. With CapsLock on, typing is
// refused before any key is pressed.
func TestLiveTypingReachesTheWindow(t *testing.T) {
	d, display := liveDesktop(t)
	if err := d.XTestTyping(); err != nil {
		t.Errorf("text typed on a local Xvfb does not go as XTest events on the driver's connection (%v): robotgo types it", err)
	}
	c, err := xgb.NewConnDisplay(display)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close) // after the window's cleanups: they need the connection
	if err := xtest.Init(c); err != nil {
		t.Fatal(err)
	}
	setup := xproto.Setup(c)
	screen := setup.DefaultScreen(c)
	win := focusedWindow(t, c)
	m, err := xproto.GetKeyboardMapping(c, setup.MinKeycode, byte(setup.MaxKeycode-setup.MinKeycode+1)).Reply()
	if err != nil {
		t.Fatal(err)
	}
	n := int(m.KeysymsPerKeycode)
	keysym := func(code xproto.Keycode, level int) xproto.Keysym {
		i := int(code-setup.MinKeycode)*n + level
		if i < 0 || i >= len(m.Keysyms) {
			t.Fatalf("a key press of keycode %d, outside the keyboard map", code)
		}
		return m.Keysyms[i]
	}
	var want strings.Builder
	for r := rune(0x20); r <= 0x7e; r++ {
		want.WriteRune(r)
	}
	want.WriteString("/var/lib/sendonce/staging/0a1B2c3D/Report_final-v2.txt")
	ctx := context.Background()
	if err := d.Type(ctx, want.String()); err != nil {
		t.Fatal(err)
	}
	xproto.GetInputFocus(c).Reply() // a round trip: every event the typing caused is queued
	var got strings.Builder
	for {
		ev, err := c.PollForEvent()
		if err != nil {
			t.Fatal(err)
		}
		if ev == nil {
			break
		}
		k, ok := ev.(xproto.KeyPressEvent)
		if !ok || k.Event != win {
			continue
		}
		if keysym(k.Detail, 0) == 0xffe1 { // Shift_L
			continue
		}
		level := 0
		if k.State&xproto.ModMaskShift != 0 {
			level = 1
		}
		r := rune(keysym(k.Detail, level))
		if r < 0x20 || r > 0x7e {
			t.Fatalf("a press of keycode %d (keysym %#x, state %#x): not a character of the text", k.Detail, r, k.State)
		}
		got.WriteRune(r)
	}
	if got.String() != want.String() {
		t.Fatalf("the window received\n%q\nwant\n%q", got.String(), want.String())
	}
	if km, err := xproto.QueryKeymap(c).Reply(); err != nil || slices.ContainsFunc(km.Keys, func(b byte) bool { return b != 0 }) {
		t.Fatalf("a key is still down after typing (%v): %v", err, km)
	}

	// Beyond ASCII (an accent, an emoji, Chinese, Cyrillic): each character on a spare
	// key of its own, one press each, and the keyboard map as it was once the desktop
	// closed.
	beyond := "é🚀张В"
	d2, err := x11.Open(display)
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.Type(ctx, beyond); err != nil {
		t.Fatal(err)
	}
	xproto.GetInputFocus(c).Reply()
	presses, remaps := 0, 0
	for {
		ev, err := c.PollForEvent()
		if err != nil {
			t.Fatal(err)
		}
		if ev == nil {
			break
		}
		switch e := ev.(type) {
		case xproto.KeyPressEvent:
			if e.Event == win {
				presses++
			}
		case xproto.MappingNotifyEvent:
			remaps++
		}
	}
	if presses != len([]rune(beyond)) || remaps < len([]rune(beyond)) {
		t.Errorf("typing %q: %d key presses and %d keyboard map changes; want one press a character, each after its map change", beyond, presses, remaps)
	}
	d2.Close() // empties the spare keys again
	after, err := xproto.GetKeyboardMapping(c, setup.MinKeycode, byte(setup.MaxKeycode-setup.MinKeycode+1)).Reply()
	if err != nil || !slices.Equal(after.Keysyms, m.Keysyms) {
		t.Errorf("the keyboard map once the desktop closed differs from before (%v): the spare keys were not emptied again", err)
	}

	// CapsLock on: refused before any key, the window receives nothing.
	caps := xproto.Keycode(0)
	for code := setup.MinKeycode; code != 0 && code <= setup.MaxKeycode; code++ {
		if keysym(code, 0) == 0xffe5 { // Caps_Lock
			caps = code
			break
		}
	}
	if caps == 0 {
		t.Fatal("the test bed's keyboard map has no Caps_Lock key")
	}
	toggle := func() {
		xtest.FakeInput(c, xproto.KeyPress, byte(caps), 0, screen.Root, 0, 0, 0)
		xtest.FakeInputChecked(c, xproto.KeyRelease, byte(caps), 0, screen.Root, 0, 0, 0).Check()
	}
	toggle()
	defer func() {
		if p, err := xproto.QueryPointer(c, screen.Root).Reply(); err == nil && p.Mask&xproto.KeyButMaskLock != 0 {
			toggle()
		}
	}()
	if err := d.Type(ctx, "abc"); !errors.Is(err, x11.ErrModifierHeld) {
		t.Fatalf("typing with CapsLock on: %v; want ErrModifierHeld", err)
	}
	xproto.GetInputFocus(c).Reply()
	for {
		ev, _ := c.PollForEvent()
		if ev == nil {
			break
		}
		if k, ok := ev.(xproto.KeyPressEvent); ok && k.Detail != caps {
			t.Fatalf("typing refused, yet the window received a press of keycode %d", k.Detail)
		}
	}
}

// focusedWindow maps a window of c's that takes key presses (override-redirect: no
// window manager in between) and gives it the keyboard focus until the test ends, when
// the focus goes back where it was and the window is destroyed.
func focusedWindow(t *testing.T, c *xgb.Conn) xproto.Window {
	t.Helper()
	screen := xproto.Setup(c).DefaultScreen(c)
	win, err := xproto.NewWindowId(c)
	if err != nil {
		t.Fatal(err)
	}
	xproto.CreateWindow(c, screen.RootDepth, win, screen.Root, 0, 0, 400, 100, 0, xproto.WindowClassInputOutput, screen.RootVisual,
		xproto.CwOverrideRedirect|xproto.CwEventMask, []uint32{1, xproto.EventMaskKeyPress | xproto.EventMaskStructureNotify})
	xproto.MapWindow(c, win)
	t.Cleanup(func() { xproto.DestroyWindow(c, win) })
	for {
		ev, err := c.WaitForEvent()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := ev.(xproto.MapNotifyEvent); ok {
			break
		}
	}
	before, err := xproto.GetInputFocus(c).Reply()
	if err != nil {
		t.Fatal(err)
	}
	xproto.SetInputFocus(c, xproto.InputFocusPointerRoot, win, xproto.TimeCurrentTime)
	t.Cleanup(func() { xproto.SetInputFocus(c, before.RevertTo, before.Focus, xproto.TimeCurrentTime) })
	if now, err := xproto.GetInputFocus(c).Reply(); err != nil || now.Focus != win {
		t.Fatalf("the test's window did not get the keyboard focus (%v): keys now would reach another window", err)
	}
	return win
}

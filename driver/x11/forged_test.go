//go:build cgo && linux

package x11_test

// A real Xvfb of the test's own (Xvfb: testbed/up installs it), an "app" that is a
// process of its own (this test binary again: TestMain) with a window titled "Gajim",
// its session bus, and its tree on its accessibility bus (real dbus-daemons, atspitest);
// then another X client rewrites the window's _NET_WM_PID and the root window's
// AT_SPI_BUS to pass a fake bus's tree of the same title off as the app's.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/driver/x11"
	"github.com/sendonce/sendonce/vision/atspi"
	"github.com/sendonce/sendonce/vision/atspi/atspitest"
)

// appEnv, set, makes this test binary the app: it serves appTree on the accessibility
// bus at its value and shows a window titled "Gajim" on $DISPLAY, prints its bus name
// and window id, and runs until its stdin closes.
const appEnv = "SENDONCE_X11TEST_APP_BUS"

func TestMain(m *testing.M) {
	xgb.Logger.SetOutput(io.Discard) // it logs when there is no ~/.Xauthority; errors still return
	if addr := os.Getenv(appEnv); addr != "" {
		if err := runApp(addr); err != nil {
			fmt.Fprintln(os.Stderr, "the test's app:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// frame is a top-level window's tree titled "Gajim", holding one label.
func frame(label string) *atspi.Node {
	showing := []string{"showing", "visible"}
	return &atspi.Node{Role: "application", Name: "app", Children: []*atspi.Node{
		{Role: "frame", Name: "Gajim", States: showing, Children: []*atspi.Node{
			{Role: "label", Name: label, States: showing},
		}},
	}}
}

func runApp(addr string) error {
	conn, err := dbus.Connect(addr)
	if err != nil {
		return err
	}
	unique := atspitest.Serve(conn, frame("the app's own"), nil)
	x, err := xgb.NewConn()
	if err != nil {
		return err
	}
	id, err := xproto.NewWindowId(x)
	if err != nil {
		return err
	}
	screen := xproto.Setup(x).DefaultScreen(x)
	if err := xproto.CreateWindowChecked(x, screen.RootDepth, id, screen.Root, 0, 0, 400, 300, 0,
		xproto.WindowClassInputOutput, screen.RootVisual, 0, nil).Check(); err != nil {
		return err
	}
	setProperty(x, id, "_NET_WM_NAME", "UTF8_STRING", []byte("Gajim"))
	setProperty(x, id, "_NET_WM_PID", "CARDINAL", card(os.Getpid()))
	if err := xproto.MapWindowChecked(x, id).Check(); err != nil {
		return err
	}
	fmt.Printf("%s %d\n", unique, id)
	io.Copy(io.Discard, os.Stdin)
	return nil
}

func card(v int) []byte {
	b := make([]byte, 4)
	xgb.Put32(b, uint32(v))
	return b
}

func setProperty(x *xgb.Conn, w xproto.Window, name, typ string, value []byte) error {
	intern := func(n string) (xproto.Atom, error) {
		r, err := xproto.InternAtom(x, false, uint16(len(n)), n).Reply()
		if err != nil {
			return 0, err
		}
		return r.Atom, nil
	}
	a, err := intern(name)
	if err != nil {
		return err
	}
	tp, err := intern(typ)
	if err != nil {
		return err
	}
	format, n := byte(8), len(value)
	if typ == "CARDINAL" || typ == "WINDOW" {
		format, n = 32, len(value)/4
	}
	return xproto.ChangePropertyChecked(x, xproto.PropModeReplace, w, a, tp, format, uint32(n), value).Check()
}

// startXvfb starts an Xvfb of the test's own, with no listener but its local socket,
// and returns its display's name.
func startXvfb(t *testing.T) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("Xvfb", "-displayfd", "3", "-nolisten", "tcp", "-screen", "0", "1280x800x24")
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		t.Fatalf("Xvfb could not start (testbed/up installs it: apt-get install xvfb): %v", err)
	}
	w.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(r).ReadString('\n')
	r.Close()
	if err != nil {
		t.Fatalf("Xvfb printed no display number: %v", err)
	}
	return ":" + strings.TrimSpace(line)
}

// startApp starts the app on display, with its session bus at session (none when "")
// and its tree on the accessibility bus at a11y; it returns its pid, bus name and
// window.
func startApp(t *testing.T, display, session, a11y string) (int, string, xproto.Window) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "DISPLAY=" + display, appEnv + "=" + a11y}
	if session != "" {
		cmd.Env = append(cmd.Env, "DBUS_SESSION_BUS_ADDRESS="+session)
	}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the app printed no bus name and window: %v", err)
	}
	f := strings.Fields(line)
	if len(f) != 2 {
		t.Fatalf("the app printed %q", line)
	}
	id, err := strconv.ParseUint(f[1], 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid, f[0], xproto.Window(id)
}

// display is a connection to the test's Xvfb that plays the window manager and, later,
// the program that rewrites the properties.
type display struct {
	t    *testing.T
	conn *xgb.Conn
	root xproto.Window
}

func connect(t *testing.T, name string) *display {
	t.Helper()
	c, err := xgb.NewConnDisplay(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &display{t, c, xproto.Setup(c).DefaultScreen(c).Root}
}

func (d *display) set(w xproto.Window, name, typ string, value []byte) {
	d.t.Helper()
	if err := setProperty(d.conn, w, name, typ, value); err != nil {
		d.t.Fatalf("setting %s: %v", name, err)
	}
}

// honestDesktop is an Xvfb with the app on it (its session bus answering org.a11y.Bus
// with its accessibility bus, which the root window names too, as at-spi-bus-launcher
// does), listed in _NET_CLIENT_LIST.
type honestDesktop struct {
	display string
	x       *display
	app     int
	window  xproto.Window
	a11y    string
}

func newHonestDesktop(t *testing.T, withSession bool) honestDesktop {
	name := startXvfb(t)
	a11y := atspitest.PrivateBus(t)
	session := ""
	if withSession {
		session = atspitest.PrivateBus(t)
		atspitest.Launcher(t, session, a11y)
	}
	pid, unique, w := startApp(t, name, session, a11y)
	atspitest.Registry(t, a11y, unique)
	x := connect(t, name)
	x.set(x.root, "_NET_CLIENT_LIST", "WINDOW", card(int(w)))
	x.set(x.root, "AT_SPI_BUS", "STRING", []byte(a11y))
	return honestDesktop{name, x, pid, w, a11y}
}

// gajimLike is a profile whose process is the test's app (this test binary, as is the
// forger) and whose window is titled "Gajim".
func gajimLike(pid int) *driver.Profile {
	return &driver.Profile{App: "the test's app", Process: driver.ProcessName(pid), WindowTitle: "Gajim"}
}

// findAndRead finds the profile's window on the desktop as a delivery does, and reads
// its tree by the window's process.
func findAndRead(t *testing.T, d honestDesktop) (driver.Window, *atspi.Node, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	desk, err := x11.Open(d.display)
	if err != nil {
		t.Fatal(err)
	}
	defer desk.Close()
	w, err := driver.FindWindow(ctx, desk, gajimLike(d.app))
	if err != nil {
		return w, nil, err
	}
	tree, closeTree := driver.OpenAccessibility(ctx, d.display)
	defer closeTree()
	n, err := tree.Snapshot(ctx, w.PID, driver.TreeScope{Windows: &atspi.Match{Name: w.Title}})
	return w, n, err
}

// label is the text of the one label in a tree read.
func label(n *atspi.Node) string {
	var got []string
	n.Walk(func(n *atspi.Node, _ int) bool {
		if n.Role == "label" {
			got = append(got, n.Name)
		}
		return true
	})
	return strings.Join(got, ", ")
}

// TestTreeSourcesHonest: on an honest desktop the window's process is the X server's
// word, and the tree read by it is the app's own, found through its session bus.
func TestTreeSourcesHonest(t *testing.T) {
	d := newHonestDesktop(t, true)
	w, n, err := findAndRead(t, d)
	if err != nil {
		t.Fatalf("the honest desktop: %v", err)
	}
	if w.PID != d.app || w.PIDFrom != driver.PIDFromServer || w.ClaimedPID != 0 {
		t.Errorf("the window: pid %d from %q, claimed %d; want the app's %d from the X server, no other claim", w.PID, w.PIDFrom, w.ClaimedPID, d.app)
	}
	if got := label(n); got != "the app's own" {
		t.Errorf("the tree read holds %q; want the app's own", got)
	}
	ctx := context.Background()
	loc, err := atspi.Locate(ctx, d.display, d.app)
	if err != nil || loc.Address != d.a11y || loc.From != atspi.FromSessionBus {
		t.Errorf("Locate = %+v, %v; want %s from the session bus", loc, err, d.a11y)
	}
}

// TestTreeSourcesForged: another X client rewrites the app's window's _NET_WM_PID to a
// process of its own (this test's, which serves a tree titled "Gajim" too) and the root
// window's AT_SPI_BUS to its fake bus. Finding the window stops, naming the X server's
// pid against _NET_WM_PID; reading the tree by the true process stops, naming the
// session bus's answer against AT_SPI_BUS; nothing is read from the fake bus.
func TestTreeSourcesForged(t *testing.T) {
	d := newHonestDesktop(t, true)
	fake := atspitest.PrivateBus(t)
	atspitest.Registry(t, fake, atspitest.App(t, fake, frame("forged"), false))
	d.x.set(d.window, "_NET_WM_PID", "CARDINAL", card(os.Getpid()))
	d.x.set(d.x.root, "AT_SPI_BUS", "STRING", []byte(fake))

	w, n, err := findAndRead(t, d)
	if !errors.Is(err, driver.ErrWindow) || !errors.Is(err, driver.ErrPIDDisagrees) {
		t.Fatalf("finding the window: %+v (tree %q), %v; want ErrWindow, ErrPIDDisagrees", w, label0(n), err)
	}
	for _, want := range []string{"X server", "_NET_WM_PID", strconv.Itoa(d.app), strconv.Itoa(os.Getpid()), "nothing was chosen"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the window's error does not name %q: %v", want, err)
		}
	}

	// The tree by the process the X server names: the session bus and the root window
	// disagree.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tree, closeTree := driver.OpenAccessibility(ctx, d.display)
	defer closeTree()
	n, err = tree.Snapshot(ctx, d.app, driver.TreeScope{Windows: &atspi.Match{Name: "Gajim"}})
	if !errors.Is(err, atspi.ErrSourcesDisagree) {
		t.Fatalf("reading the tree of process %d: %q, %v; want ErrSourcesDisagree", d.app, label0(n), err)
	}
	for _, want := range []string{d.a11y, fake, "AT_SPI_BUS", "session bus", "nothing was read"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the tree's error does not name %q: %v", want, err)
		}
	}
}

func label0(n *atspi.Node) string {
	if n == nil {
		return ""
	}
	return label(n)
}

// busAs starts a dbus-daemon as user uid (root runs the tests: they play other users
// so) and returns its address.
func busAs(t *testing.T, uid uint32) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("this test starts a bus as another user (uid %d), which needs root (scripts/test runs as root)", uid)
	}
	// Not under t.TempDir(), whose parent only root may enter.
	dir, err := os.MkdirTemp("", "sendonce-bus-as-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, int(uid), int(uid)); err != nil {
		t.Fatal(err)
	}
	conf := dir + "/bus.conf"
	os.WriteFile(conf, []byte(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>accessibility</type><listen>unix:dir=`+dir+`</listen><auth>EXTERNAL</auth>
<policy context="default"><allow user="*"/><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy></busconfig>`), 0o644)
	cmd := exec.Command("dbus-daemon", "--config-file="+conf, "--nofork", "--print-address=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("dbus-daemon as uid %d: %v", uid, err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("dbus-daemon as uid %d printed no address: %v", uid, err)
	}
	return strings.TrimSpace(line)
}

// TestTreeSourcesRootWindowOnly: where the app's session bus cannot be asked (its
// environment names none here), the root window's AT_SPI_BUS is taken only while the
// bus it names is served by the app's user: the honest bus is read; a bus another user
// serves (AT_SPI_BUS rewritten to it) is refused, and nothing is read from it.
func TestTreeSourcesRootWindowOnly(t *testing.T) {
	d := newHonestDesktop(t, false)
	_, n, err := findAndRead(t, d)
	if err != nil || label(n) != "the app's own" {
		t.Fatalf("the honest desktop without a session bus: %q, %v; want the app's own tree", label0(n), err)
	}
	const nobody = 65534
	fake := busAs(t, nobody)
	atspitest.Registry(t, fake, atspitest.App(t, fake, frame("forged"), false))
	d.x.set(d.x.root, "AT_SPI_BUS", "STRING", []byte(fake))
	_, n, err = findAndRead(t, d)
	if !errors.Is(err, atspi.ErrUntrusted) {
		t.Fatalf("AT_SPI_BUS rewritten to another user's bus: %q, %v; want ErrUntrusted", label0(n), err)
	}
	for _, want := range []string{fake, "served by user 65534", "not by the app's user 0", "nothing was read"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %q: %v", want, err)
		}
	}
	// A bus whose server cannot be read from here (its socket out of this user's reach:
	// the barrier deployment's service user, neither root nor the app's) is no sign of
	// another's bus: the tree is unavailable, OCR reads in its place, nothing is read
	// from it. (It was ErrUntrusted, and every delivery through the service stopped.)
	gone := "unix:path=" + filepath.Join(t.TempDir(), "no-such-bus")
	d.x.set(d.x.root, "AT_SPI_BUS", "STRING", []byte(gone))
	_, n, err = findAndRead(t, d)
	if !errors.Is(err, atspi.ErrUnavailable) || errors.Is(err, atspi.ErrUntrusted) || n != nil {
		t.Fatalf("AT_SPI_BUS naming a bus that cannot be reached: %q, %v; want ErrUnavailable and nothing read", label0(n), err)
	}
}

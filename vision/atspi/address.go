package atspi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

// ErrSourcesDisagree: the two places that name an app's accessibility bus (its session
// bus's org.a11y.Bus, the display's root window) name different buses. Another client
// on the display may have rewritten AT_SPI_BUS to serve a tree of its own; nothing is
// read from either.
var ErrSourcesDisagree = errors.New("the accessibility bus's sources disagree")

// ErrUntrusted: the only source that named the accessibility bus is one any client on
// the display can write, and the bus it names cannot be shown to be the app's user's.
var ErrUntrusted = errors.New("the accessibility bus cannot be trusted")

// errServerUnknown: who serves a bus could not be read (its socket cannot be reached
// from here): no sign of another's bus, and nothing to read from it either.
var errServerUnknown = errors.New("who serves the bus could not be read")

// Located is where an app's accessibility bus was found, and by which source.
type Located struct {
	Address string `json:"address"`
	// From is the source taken: FromSessionBus (agreed with the root window's
	// AT_SPI_BUS where that is set) or FromRootWindow (the app's session bus could not
	// be asked; the bus's daemon runs as the app's user).
	From string `json:"from"`
	// Note says why the session bus was not asked, or that the root window names no bus.
	Note string `json:"note,omitempty"`
}

// The sources of Located.From.
const (
	FromSessionBus = "the app's session bus (org.a11y.Bus)"
	FromRootWindow = "the display's root window (AT_SPI_BUS), served by the app's user"
)

// sessionAskTime bounds asking the app's session bus for its accessibility bus.
const sessionAskTime = 3 * time.Second

// Locate finds the accessibility bus of the app whose process is pid (the process the
// X server says made its window) on display, from two sources:
//
//   - the app's session bus (DBUS_SESSION_BUS_ADDRESS in the process's environment,
//     else $XDG_RUNTIME_DIR/bus) answering org.a11y.Bus.GetAddress: a session bus admits
//     only its own user, so no display client of another user can change its answer
//     (nor can root ask it: reading the environment needs root, the asking the app's
//     user);
//   - the root window's AT_SPI_BUS property, which any client on the display can write.
//
// Both answering, they must name the same bus: else it stops (ErrSourcesDisagree),
// before any tree is read. The session bus answering alone, its answer is taken. The
// root window answering alone (the session bus cannot be read or refuses the caller:
// another user's session, or none), its bus is taken only when the daemon serving it
// (its socket's peer) runs as the app's user; else ErrUntrusted. Neither answering is
// ErrUnavailable, naming both reasons.
func Locate(ctx context.Context, display string, pid int) (Located, error) {
	return locate(ctx, display, pid, "/proc")
}

func locate(ctx context.Context, display string, pid int, proc string) (Located, error) {
	if pid <= 0 {
		return Located{}, fmt.Errorf("%w: no process to find the accessibility bus of", ErrUnavailable)
	}
	root, rootErr := AddressOnDisplay(display)
	session, sessionErr := sessionAddress(proc, pid)
	var asked string
	if sessionErr == nil {
		actx, cancel := context.WithTimeout(ctx, sessionAskTime)
		asked, sessionErr = AddressOf(actx, session)
		cancel()
		if sessionErr != nil && ctx.Err() != nil {
			return Located{}, fmt.Errorf("%w: asking process %d's session bus for its accessibility bus: %w", ErrUnavailable, pid, ctx.Err())
		}
	}
	switch {
	case sessionErr == nil && rootErr == nil:
		if asked != root {
			return Located{}, fmt.Errorf("%w: process %d's session bus (%s) says its accessibility bus is %s, while the root window of display %s names %s (AT_SPI_BUS): another program on the display may have rewritten AT_SPI_BUS to serve a tree of its own; nothing was read. Check which programs run on the display (xlsclients -l) and what set the property (xprop -root AT_SPI_BUS), then restart the app's session",
				ErrSourcesDisagree, pid, session, asked, display, root)
		}
		return Located{Address: asked, From: FromSessionBus}, nil
	case sessionErr == nil:
		return Located{Address: asked, From: FromSessionBus, Note: "the root window names no accessibility bus: " + rootErr.Error()}, nil
	case rootErr == nil:
		uid, err := processUID(proc, pid)
		if err != nil {
			return Located{}, fmt.Errorf("%w: the root window of display %s names the accessibility bus %s, and process %d's session bus could not be asked (%v), nor its user read (%v): nothing was read", ErrUnavailable, display, root, pid, sessionErr, err)
		}
		if err := servedBy(ctx, root, uid); errors.Is(err, errServerUnknown) {
			// Nothing says the bus is another's, and nothing can be read from a bus this
			// process cannot reach: the tree is missing, not forged (a service user
			// that is neither root nor the app's: the barrier deployment).
			return Located{}, fmt.Errorf("%w: the root window of display %s names the accessibility bus %s, process %d's session bus could not be asked (%v), and %v: nothing was read (run sendonce as the app's user, or as root, to read its tree)",
				ErrUnavailable, display, root, pid, sessionErr, err)
		} else if err != nil {
			return Located{}, fmt.Errorf("%w: the root window of display %s names the accessibility bus %s (AT_SPI_BUS, which any program on the display can write), process %d's session bus could not be asked (%v), and %v: nothing was read. Check what set the property (xprop -root AT_SPI_BUS) and restart the app's session; running sendonce as the app's user lets its session bus answer",
				ErrUntrusted, display, root, pid, sessionErr, err)
		}
		return Located{Address: root, From: FromRootWindow, Note: "the app's session bus was not asked: " + sessionErr.Error()}, nil
	}
	return Located{}, fmt.Errorf("%w: no accessibility bus for process %d: its session bus: %v; the display: %v", ErrUnavailable, pid, sessionErr, rootErr)
}

// sessionAddress is the address of the session bus of process pid: its environment's
// DBUS_SESSION_BUS_ADDRESS, else the bus socket in its XDG_RUNTIME_DIR (where systemd's
// user session puts it). Reading another user's environment needs root.
func sessionAddress(proc string, pid int) (string, error) {
	env, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "environ"))
	if err != nil {
		return "", fmt.Errorf("reading process %d's environment: %w", pid, err)
	}
	vars := map[string]string{}
	for _, kv := range bytes.Split(env, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			vars[k] = v
		}
	}
	if a := vars["DBUS_SESSION_BUS_ADDRESS"]; a != "" {
		return a, nil
	}
	if dir := vars["XDG_RUNTIME_DIR"]; dir != "" {
		if fi, err := os.Stat(filepath.Join(dir, "bus")); err == nil && fi.Mode().Type() == os.ModeSocket {
			return "unix:path=" + filepath.Join(dir, "bus"), nil
		}
	}
	return "", fmt.Errorf("process %d's environment names no session bus (no DBUS_SESSION_BUS_ADDRESS, no $XDG_RUNTIME_DIR/bus)", pid)
}

// processUID is the effective user id process pid runs as.
func processUID(proc string, pid int) (uint32, error) {
	f, err := os.Open(filepath.Join(proc, strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) < 2 {
				break
			}
			uid, err := strconv.ParseUint(f[1], 10, 32)
			if err != nil {
				break
			}
			return uint32(uid), nil
		}
	}
	return 0, fmt.Errorf("process %d's status has no readable Uid line", pid)
}

// servedBy checks that the bus at address is served by a process of user uid: the
// address is one local socket, whose peer's credentials say who listens on it.
func servedBy(ctx context.Context, address string, uid uint32) error {
	if strings.Contains(address, ";") {
		return fmt.Errorf("the bus's address lists more than one way to reach it (%s): only one local socket can be checked", address)
	}
	transport, params, _ := strings.Cut(address, ":")
	if transport != "unix" {
		return fmt.Errorf("the bus is not on a local socket (%s): who serves it cannot be checked", address)
	}
	var socket string
	for _, kv := range strings.Split(params, ",") {
		k, v, _ := strings.Cut(kv, "=")
		val, err := unescapeAddress(v)
		if err != nil {
			return fmt.Errorf("the bus's address %s: %v", address, err)
		}
		switch k {
		case "path":
			socket = val
		case "abstract":
			socket = "@" + val
		}
	}
	if socket == "" {
		return fmt.Errorf("the bus's address %s names no socket path", address)
	}
	peer, err := socketPeerUID(ctx, socket)
	if err != nil {
		return fmt.Errorf("%w: %v", errServerUnknown, err)
	}
	if peer != uid {
		return fmt.Errorf("the bus is served by user %d, not by the app's user %d", peer, uid)
	}
	return nil
}

// unescapeAddress undoes a D-Bus address value's %XX escapes.
func unescapeAddress(v string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '%' {
			b.WriteByte(v[i])
			continue
		}
		if i+2 >= len(v) {
			return "", fmt.Errorf("a %% escape is cut short in %q", v)
		}
		n, err := strconv.ParseUint(v[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("a bad %% escape in %q", v)
		}
		b.WriteByte(byte(n))
		i += 2
	}
	return b.String(), nil
}

// AddressOnDisplay reads the accessibility bus's address where the bus launcher of the
// session on that X display publishes it: the root window's AT_SPI_BUS property (as the
// toolkits' own bridges find it). Any client on the display can write it: Locate weighs
// it against the app's session bus.
func AddressOnDisplay(display string) (string, error) {
	x, err := xgb.NewConnDisplay(display)
	if err != nil {
		return "", fmt.Errorf("%w: the display %s: %v", ErrUnavailable, display, err)
	}
	defer x.Close()
	atom, err := xproto.InternAtom(x, true, uint16(len("AT_SPI_BUS")), "AT_SPI_BUS").Reply()
	if err != nil {
		return "", fmt.Errorf("%w: the display %s: %v", ErrUnavailable, display, err)
	}
	if atom.Atom == xproto.AtomNone {
		return "", fmt.Errorf("%w: no accessibility bus on display %s (no AT_SPI_BUS on its root window): start the app with its accessibility bridge (GTK 3: Debian's libatk-adaptor and no NO_AT_BRIDGE=1; Qt: QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1) in a session with at-spi2-core", ErrUnavailable, display)
	}
	root := xproto.Setup(x).DefaultScreen(x).Root
	p, err := xproto.GetProperty(x, false, root, atom.Atom, xproto.AtomString, 0, 1024).Reply()
	if err != nil || len(p.Value) == 0 {
		return "", fmt.Errorf("%w: no accessibility bus on display %s (AT_SPI_BUS is empty): %v", ErrUnavailable, display, err)
	}
	return string(p.Value), nil
}

// Package atspitest is a fake accessibility bus for tests: a real dbus-daemon on a
// private socket, and a registry and apps that serve trees given as atspi.Nodes over
// the AT-SPI interfaces package atspi calls.
package atspitest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/godbus/dbus/v5"

	"github.com/sendonce/sendonce/vision/atspi"
)

// PrivateBus starts a dbus-daemon of its own and returns its address.
func PrivateBus(t testing.TB) string {
	t.Helper()
	// A folder of a short name, not t.TempDir (whose name is the test's): the bus's
	// socket path must fit in 108 bytes, under a TMPDIR that is longer than /tmp too.
	dir, err := os.MkdirTemp("", "bus")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	conf := filepath.Join(dir, "bus.conf")
	os.WriteFile(conf, []byte(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>accessibility</type><listen>unix:dir=`+dir+`</listen><auth>EXTERNAL</auth>
<policy context="default"><allow user="*"/><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy></busconfig>`), 0o600)
	cmd := exec.Command("dbus-daemon", "--config-file="+conf, "--nofork", "--print-address=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("dbus-daemon (Debian's dbus package) could not start: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("dbus-daemon printed no address: %v", err)
	}
	return strings.TrimSpace(line)
}

// App serves a tree on its own connection; hang makes every call block until the
// test ends (an app that stopped answering).
func App(t testing.TB, addr string, root *atspi.Node, hang bool) (unique string) {
	t.Helper()
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	var wait func()
	if hang {
		wait = func() { <-stop }
	}
	return Serve(conn, root, wait)
}

// Serve serves the tree root on conn, as an app does (App, or a process of a test's
// own with no testing.TB); wait, when not nil, runs before every answer. It returns
// conn's unique name, by which a Registry lists the app.
func Serve(conn *dbus.Conn, root *atspi.Node, wait func()) (unique string) {
	if wait == nil {
		wait = func() {}
	}
	n := 0
	var export func(node *atspi.Node, path string)
	export = func(node *atspi.Node, path string) {
		var kids []childRef
		for _, c := range node.Children {
			n++
			p := fmt.Sprintf("/org/a11y/atspi/accessible/%d", n)
			kids = append(kids, childRef{conn.Names()[0], dbus.ObjectPath(p)})
			export(c, p)
		}
		conn.ExportMethodTable(map[string]any{
			"GetChildren": func() ([]childRef, *dbus.Error) { wait(); return kids, nil },
			"GetRoleName": func() (string, *dbus.Error) { wait(); return node.Role, nil },
			"GetState":    func() ([]uint32, *dbus.Error) { wait(); return atspi.StateBits(node.States), nil },
			"GetInterfaces": func() ([]string, *dbus.Error) {
				wait()
				ifaces := []string{atspi.IfaceAccessible}
				if node.Extents != nil {
					ifaces = append(ifaces, atspi.IfaceComponent)
				}
				if node.Text != "" {
					ifaces = append(ifaces, atspi.IfaceText)
				}
				return ifaces, nil
			},
		}, dbus.ObjectPath(path), atspi.IfaceAccessible)
		conn.ExportMethodTable(map[string]any{
			"GetExtents": func(uint32) (struct{ X, Y, W, H int32 }, *dbus.Error) {
				wait()
				e := node.Extents
				if e == nil { // no Component interface: what a real app answers
					return struct{ X, Y, W, H int32 }{}, dbus.NewError("org.freedesktop.DBus.Error.UnknownMethod", []any{"no Component interface here"})
				}
				return struct{ X, Y, W, H int32 }{int32(e.X), int32(e.Y), int32(e.W), int32(e.H)}, nil
			},
		}, dbus.ObjectPath(path), atspi.IfaceComponent)
		conn.ExportMethodTable(map[string]any{
			"GetText": func(int32, int32) (string, *dbus.Error) { return node.Text, nil },
		}, dbus.ObjectPath(path), atspi.IfaceText)
		conn.ExportMethodTable(map[string]any{
			"Get": func(iface, name string) (dbus.Variant, *dbus.Error) {
				wait()
				switch iface + "." + name {
				case atspi.IfaceAccessible + ".Name":
					return dbus.MakeVariant(node.Name), nil
				case atspi.IfaceApplication + ".ToolkitName":
					return dbus.MakeVariant("fake"), nil
				}
				return dbus.Variant{}, dbus.MakeFailedError(errors.New("no such property"))
			},
		}, dbus.ObjectPath(path), "org.freedesktop.DBus.Properties")
	}
	export(root, atspi.RootPath)
	return conn.Names()[0]
}

type childRef struct {
	Bus  string
	Path dbus.ObjectPath
}

// Registry owns the registry's name and lists the apps as its children.
func Registry(t testing.TB, addr string, apps ...string) {
	t.Helper()
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if reply, err := conn.RequestName(atspi.RegistryName, dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("owning %s: %v %v", atspi.RegistryName, reply, err)
	}
	var kids []childRef
	for _, a := range apps {
		kids = append(kids, childRef{a, atspi.RootPath})
	}
	conn.ExportMethodTable(map[string]any{
		"GetChildren": func() ([]childRef, *dbus.Error) { return kids, nil },
	}, atspi.RootPath, atspi.IfaceAccessible)
}

// Launcher owns org.a11y.Bus on the session bus at session and answers GetAddress with
// addr, as at-spi-bus-launcher does for a session's accessibility bus.
func Launcher(t testing.TB, session, addr string) {
	t.Helper()
	conn, err := dbus.Connect(session)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if reply, err := conn.RequestName("org.a11y.Bus", dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("owning org.a11y.Bus: %v %v", reply, err)
	}
	conn.ExportMethodTable(map[string]any{
		"GetAddress": func() (string, *dbus.Error) { return addr, nil },
	}, "/org/a11y/bus", "org.a11y.Bus")
}

package atspi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// A fake accessibility bus: a real dbus-daemon on a private socket, a registry and apps
// that export the AT-SPI interfaces this package calls, from trees given as Nodes.

// privateBus starts a dbus-daemon of its own and returns its address.
func privateBus(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
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

// fakeApp serves a tree on its own connection; hang makes every call block until the
// test ends (an app that stopped answering).
func fakeApp(t *testing.T, addr string, root *Node, hang bool) (unique string) {
	t.Helper()
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	n := 0
	var export func(node *Node, path string)
	export = func(node *Node, path string) {
		var kids []childRef
		for _, c := range node.Children {
			n++
			p := fmt.Sprintf("/org/a11y/atspi/accessible/%d", n)
			kids = append(kids, childRef{conn.Names()[0], dbus.ObjectPath(p)})
			export(c, p)
		}
		wait := func() {
			if hang {
				<-stop
			}
		}
		conn.ExportMethodTable(map[string]any{
			"GetChildren": func() ([]childRef, *dbus.Error) { wait(); return kids, nil },
			"GetRoleName": func() (string, *dbus.Error) { wait(); return node.Role, nil },
			"GetState":    func() ([]uint32, *dbus.Error) { wait(); return stateBits(node.States), nil },
			"GetInterfaces": func() ([]string, *dbus.Error) {
				wait()
				ifaces := []string{ifaceAccessible}
				if node.Extents != nil {
					ifaces = append(ifaces, ifaceComponent)
				}
				if node.Text != "" {
					ifaces = append(ifaces, ifaceText)
				}
				return ifaces, nil
			},
		}, dbus.ObjectPath(path), ifaceAccessible)
		conn.ExportMethodTable(map[string]any{
			"GetExtents": func(uint32) (struct{ X, Y, W, H int32 }, *dbus.Error) {
				e := node.Extents
				return struct{ X, Y, W, H int32 }{int32(e.X), int32(e.Y), int32(e.W), int32(e.H)}, nil
			},
		}, dbus.ObjectPath(path), ifaceComponent)
		conn.ExportMethodTable(map[string]any{
			"GetText": func(int32, int32) (string, *dbus.Error) { return node.Text, nil },
		}, dbus.ObjectPath(path), ifaceText)
		conn.ExportMethodTable(map[string]any{
			"Get": func(iface, name string) (dbus.Variant, *dbus.Error) {
				wait()
				switch iface + "." + name {
				case ifaceAccessible + ".Name":
					return dbus.MakeVariant(node.Name), nil
				case ifaceApplication + ".ToolkitName":
					return dbus.MakeVariant("fake"), nil
				}
				return dbus.Variant{}, dbus.MakeFailedError(errors.New("no such property"))
			},
		}, dbus.ObjectPath(path), "org.freedesktop.DBus.Properties")
	}
	export(root, rootPath)
	return conn.Names()[0]
}

type childRef struct {
	Bus  string
	Path dbus.ObjectPath
}

func stateBits(names []string) []uint32 {
	bits := make([]uint32, 2)
	for _, name := range names {
		for i, s := range states {
			if s == name {
				bits[i/32] |= 1 << (i % 32)
			}
		}
	}
	return bits
}

// fakeRegistry owns the registry's name and lists the apps as its children.
func fakeRegistry(t *testing.T, addr string, apps ...string) {
	t.Helper()
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if reply, err := conn.RequestName(registryName, dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("owning %s: %v %v", registryName, reply, err)
	}
	var kids []childRef
	for _, a := range apps {
		kids = append(kids, childRef{a, rootPath})
	}
	conn.ExportMethodTable(map[string]any{
		"GetChildren": func() ([]childRef, *dbus.Error) { return kids, nil },
	}, rootPath, ifaceAccessible)
}

// TestSnapshotOverDBus: the registry's applications, found by process id, and a
// snapshot of one with every field read over the bus (names and texts in their own
// scripts); what is not on screen is left out when asked.
func TestSnapshotOverDBus(t *testing.T) {
	addr := privateBus(t)
	want := tree()
	want.Children[0].Extents = &Box{X: 10, Y: 20, W: 300, H: 200}
	app := fakeApp(t, addr, want, false)
	fakeRegistry(t, addr, app)
	ctx := context.Background()
	b, err := Open(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a, err := b.Application(ctx, uint32(os.Getpid()))
	if err != nil || a.Name != "gajim" || a.Toolkit != "fake" {
		t.Fatalf("the application of this process: %+v %v", a, err)
	}
	if _, err := b.Application(ctx, 1); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "libatk-adaptor") {
		t.Fatalf("a process with no tree: %v; want ErrUnavailable saying what to install", err)
	}
	got, err := b.Snapshot(ctx, a.Ref, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(want, got); d != "" {
		t.Fatalf("the snapshot differs from the tree served: %s", d)
	}
	showing, err := b.Snapshot(ctx, a.Ref, Limits{ShowingOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := len((Match{Role: "frame"}).Find(showing)); n != 1 {
		t.Fatalf("a snapshot of what shows holds %d frames; want 1 (Воb's is not on screen)", n)
	}
	if _, err := b.Snapshot(ctx, a.Ref, Limits{Nodes: 5}); !errors.Is(err, ErrTooBig) {
		t.Fatalf("a snapshot over its node limit: %v; want ErrTooBig", err)
	}
	if _, err := b.Snapshot(ctx, a.Ref, Limits{Depth: 1}); !errors.Is(err, ErrTooBig) {
		t.Fatalf("a snapshot over its depth limit: %v; want ErrTooBig", err)
	}
}

// TestAnAppThatStopsAnswering: a snapshot of an app that never answers ends with its
// time limit, and a wait with its ctx: nothing hangs.
func TestAnAppThatStopsAnswering(t *testing.T) {
	addr := privateBus(t)
	app := fakeApp(t, addr, tree(), true)
	fakeRegistry(t, addr, app)
	ctx := context.Background()
	b, err := Open(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	start := time.Now()
	_, err = b.Snapshot(ctx, Ref{Bus: app, Path: rootPath}, Limits{Time: 300 * time.Millisecond})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("a snapshot of an app that does not answer: %v after %v; want its deadline", err, time.Since(start))
	}
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := b.Wait(wctx, Ref{Bus: app, Path: rootPath}, Limits{}, 0, func(*Node) bool { return true }); err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("a wait on an app that does not answer: %v after %v; want its ctx's end", err, time.Since(start))
	}
}

// diff names the first difference between two trees, or "".
func diff(want, got *Node) string {
	if got == nil {
		return fmt.Sprintf("%s %q missing", want.Role, want.Name)
	}
	w := fmt.Sprintf("%s|%s|%s|%v|%v", want.Role, want.Name, want.Text, slices.Sorted(slices.Values(want.States)), want.Extents)
	g := fmt.Sprintf("%s|%s|%s|%v|%v", got.Role, got.Name, got.Text, got.States, got.Extents)
	if want.Extents != nil && got.Extents != nil {
		w, g = strings.Replace(w, fmt.Sprint(want.Extents), fmt.Sprint(*want.Extents), 1), strings.Replace(g, fmt.Sprint(got.Extents), fmt.Sprint(*got.Extents), 1)
	}
	if w != g {
		return fmt.Sprintf("want %s, got %s", w, g)
	}
	if len(want.Children) != len(got.Children) {
		return fmt.Sprintf("%s %q: %d children, want %d", want.Role, want.Name, len(got.Children), len(want.Children))
	}
	for i := range want.Children {
		if d := diff(want.Children[i], got.Children[i]); d != "" {
			return d
		}
	}
	return ""
}

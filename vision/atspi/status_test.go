package atspi_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	. "github.com/sendonce/sendonce/vision/atspi"
	"github.com/sendonce/sendonce/vision/atspi/atspitest"
)

// fakeBrowser serves an app as Chromium does on the bus: its root, one frame, and under
// the frame a document, which shows only once a window was asked for its attributes
// (reveal) or from the start (docAtStart); never when neither.
type fakeBrowser struct {
	toolkit         string
	reveal          bool // the frame's GetAttributes turns the page's tree on
	docAtStart      bool
	docShows        bool // the document is in the showing state
	asked, revealed atomic.Bool
}

type ref struct {
	Bus  string
	Path dbus.ObjectPath
}

func (f *fakeBrowser) serve(t *testing.T, addr string) string {
	t.Helper()
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	me := conn.Names()[0]
	if f.docAtStart {
		f.revealed.Store(true)
	}
	export := func(path dbus.ObjectPath, role, name string, states []string, kids func() []ref) {
		conn.ExportMethodTable(map[string]any{
			"GetChildren":   func() ([]ref, *dbus.Error) { return kids(), nil },
			"GetRoleName":   func() (string, *dbus.Error) { return role, nil },
			"GetState":      func() ([]uint32, *dbus.Error) { return StateBits(states), nil },
			"GetInterfaces": func() ([]string, *dbus.Error) { return []string{IfaceAccessible}, nil },
			"GetAttributes": func() (map[string]string, *dbus.Error) {
				f.asked.Store(true)
				if f.reveal {
					f.revealed.Store(true)
				}
				return map[string]string{"class": "BrowserRootView"}, nil
			},
		}, path, IfaceAccessible)
		conn.ExportMethodTable(map[string]any{
			"Get": func(iface, prop string) (dbus.Variant, *dbus.Error) {
				switch iface + "." + prop {
				case IfaceAccessible + ".Name":
					return dbus.MakeVariant(name), nil
				case IfaceApplication + ".ToolkitName":
					return dbus.MakeVariant(f.toolkit), nil
				}
				return dbus.Variant{}, dbus.MakeFailedError(errors.New("no such property"))
			},
		}, path, "org.freedesktop.DBus.Properties")
	}
	shows := []string{"showing", "visible"}
	docStates := []string{"visible"}
	if f.docShows {
		docStates = shows
	}
	const frame, doc = "/org/a11y/atspi/accessible/1", "/org/a11y/atspi/accessible/2"
	export(RootPath, "application", "Chromium", nil, func() []ref { return []ref{{me, frame}} })
	export(frame, "frame", "Switch Probe", shows, func() []ref {
		if f.revealed.Load() {
			return []ref{{me, doc}}
		}
		return nil
	})
	export(doc, "document web", "Switch Probe", docStates, func() []ref { return nil })
	return me
}

// TestAskForTree: a Chromium-built app is asked for its pages' trees (its windows'
// attributes) and waited for until a document that shows is under one of its windows;
// one that never shows a page stops the read, naming the fix; an app of another
// toolkit is not asked.
func TestAskForTree(t *testing.T) {
	const within = 400 * time.Millisecond
	for _, tc := range []struct {
		name      string
		app       *fakeBrowser
		wantAsked bool
		wantErr   bool
	}{
		{name: "the ask turns the page on", app: &fakeBrowser{toolkit: ToolkitChromium, reveal: true, docShows: true}, wantAsked: true},
		{name: "the page is on from the start", app: &fakeBrowser{toolkit: ToolkitChromium, docAtStart: true, docShows: true}, wantAsked: true},
		{name: "the app ignores the ask", app: &fakeBrowser{toolkit: ToolkitChromium, docShows: true}, wantAsked: true, wantErr: true},
		{name: "the document does not show", app: &fakeBrowser{toolkit: ToolkitChromium, reveal: true}, wantAsked: true, wantErr: true},
		{name: "another toolkit is not asked", app: &fakeBrowser{toolkit: "GTK", docShows: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := atspitest.PrivateBus(t)
			atspitest.Registry(t, addr, tc.app.serve(t, addr))
			ctx := context.Background()
			b, err := Open(ctx, addr)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			app, err := b.Application(ctx, uint32(os.Getpid()))
			if err != nil {
				t.Fatal(err)
			}
			err = b.AskForTree(ctx, app, within)
			if got := tc.app.asked.Load(); got != tc.wantAsked {
				t.Errorf("asked %v; want %v", got, tc.wantAsked)
			}
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("AskForTree: %v; want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrNoDocument) || !errors.Is(err, ErrUnavailable) {
				t.Fatalf("AskForTree: %v; want ErrNoDocument and ErrUnavailable", err)
			}
			for _, want := range []string{"--force-renderer-accessibility", "ACCESSIBILITY_ENABLED=1", "document web"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q: %v", want, err)
				}
			}
		})
	}
}

// TestAskForTreeEndsWithItsCaller: the wait never outlives the caller's context, and
// says so rather than blaming the app.
func TestAskForTreeEndsWithItsCaller(t *testing.T) {
	addr := atspitest.PrivateBus(t)
	f := fakeBrowser{toolkit: ToolkitChromium, docShows: true}
	atspitest.Registry(t, addr, f.serve(t, addr))
	b, err := Open(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	app, err := b.Application(context.Background(), uint32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	err = b.AskForTree(ctx, app, time.Hour)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrNoDocument) {
		t.Fatalf("AskForTree after its caller ended: %v; want context.Canceled, not ErrNoDocument", err)
	}
}

// TestWhyAbsentChromium: a Chromium-built process (it maps chrome_100_percent.pak, as
// Chromium, Chrome and Electron apps do) that publishes no tree is told Chromium's fix,
// not GTK's: it maps GTK 3 and its bridge too, and its environment reads empty.
func TestWhyAbsentChromium(t *testing.T) {
	const gtk = "7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libgtk-3.so.0.2406.32\n" +
		"7f02-7f03 r-xp 0 08:01 2 /usr/lib/x86_64-linux-gnu/libatk-bridge-2.0.so.0.0.0\n"
	for _, tc := range []struct {
		name, maps string
		chromium   bool
	}{
		{name: "Debian's Chromium", maps: gtk + "7f04-7f05 r--p 0 08:01 3 /usr/lib/chromium/chrome_100_percent.pak\n", chromium: true},
		{name: "an Electron app", maps: "7f04-7f05 r--p 0 08:01 3 /opt/Signal/chrome_100_percent.pak\n" + gtk, chromium: true},
		{name: "a GTK app", maps: gtk},
		{name: "files of like names", maps: gtk + "7f04-7f05 r--p 0 08:01 3 /home/u/chrome_100_percent.pak.txt\n7f06-7f07 r--p 0 08:01 4 /home/u/my_chrome_100_percent.pak\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proc := t.TempDir()
			dir := filepath.Join(proc, "42")
			if err := errors.Join(os.Mkdir(dir, 0o755),
				os.WriteFile(filepath.Join(dir, "environ"), []byte("\x00\x00\x00"), 0o600),
				os.WriteFile(filepath.Join(dir, "maps"), []byte(tc.maps), 0o600)); err != nil {
				t.Fatal(err)
			}
			if got := IsChromium(proc, 42); got != tc.chromium {
				t.Errorf("IsChromium = %v; want %v", got, tc.chromium)
			}
			got := WhyAbsent(proc, 42)
			if says := strings.Contains(got, "--force-renderer-accessibility"); says != tc.chromium {
				t.Errorf("WhyAbsent = %q; naming --force-renderer-accessibility: %v, want %v", got, says, tc.chromium)
			}
		})
	}
	if IsChromium(t.TempDir(), 42) {
		t.Error("a process whose maps cannot be read is Chromium")
	}
}

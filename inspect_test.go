package sendonce_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/vision/atspi"
	"github.com/sendonce/sendonce/vision/atspi/atspitest"
)

// TestInspect: an app's tree read off a (fake) accessibility bus, by process id or name,
// one window of it, and what a person reads; naming the app two ways, or an app the bus
// does not have, is refused with what to do.
func TestInspect(t *testing.T) {
	addr := atspitest.PrivateBus(t)
	tree := &atspi.Node{Role: "application", Name: "gajim", Children: []*atspi.Node{
		{Role: "frame", Name: "张伟", States: []string{"showing", "visible"}, Extents: &atspi.Box{X: 0, Y: 0, W: 800, H: 600}, Children: []*atspi.Node{
			{Role: "push button", Name: "Send Files", States: []string{"sensitive", "showing"}},
		}},
		{Role: "dialog", Name: "Choose File to Send…", States: []string{"showing"}},
	}}
	atspitest.Registry(t, addr, atspitest.App(t, addr, tree, false))
	ctx := context.Background()
	self := driver.ProcessName(os.Getpid())
	for name, req := range map[string]sendonce.InspectRequest{
		"by pid":     {Bus: addr, PID: uint32(os.Getpid())},
		"by process": {Bus: addr, Process: self},
	} {
		res, err := sendonce.Inspect(ctx, req, sendonce.Options{})
		if err != nil || res.App.Name != "gajim" || res.Nodes != 4 {
			t.Fatalf("%s: %+v %v; want gajim's 4 nodes", name, res, err)
		}
	}
	res, err := sendonce.Inspect(ctx, sendonce.InspectRequest{Bus: addr, PID: uint32(os.Getpid()), Window: "张伟"}, sendonce.Options{})
	if err != nil || res.Nodes != 3 {
		t.Fatalf("one window: %+v %v; want the app, the window and its button", res, err)
	}
	var text bytes.Buffer
	res.WriteText(&text)
	for _, want := range []string{`frame "张伟" [showing visible] @0,0 800x600`, `    push button "Send Files" [sensitive showing]`} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text lacks %q:\n%s", want, text.String())
		}
	}
	if _, err := sendonce.Inspect(ctx, sendonce.InspectRequest{Bus: addr, PID: 1, Process: self}, sendonce.Options{}); !errors.Is(err, sendonce.ErrInvalid) {
		t.Errorf("the app named two ways: %v; want bad input", err)
	}
	if _, err := sendonce.Inspect(ctx, sendonce.InspectRequest{Bus: addr, Process: "psi-plus"}, sendonce.Options{}); !errors.Is(err, atspi.ErrUnavailable) || !strings.Contains(err.Error(), "registered: gajim") {
		t.Errorf("an app the bus does not have: %v; want ErrUnavailable listing what is registered", err)
	}
	if _, err := sendonce.Inspect(ctx, sendonce.InspectRequest{Bus: addr, PID: uint32(os.Getpid()), Window: "Bob"}, sendonce.Options{}); !errors.Is(err, sendonce.ErrInvalid) {
		t.Errorf("a window the app does not have: %v; want bad input", err)
	}
}

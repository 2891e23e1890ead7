package main

import (
	"context"
	"time"

	"github.com/sendonce/sendonce"
)

// cmdInspect prints an app's accessibility tree: the roles and names a profile's steps
// can address.
func cmdInspect(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("inspect", "(--app NAME | --process NAME | --pid PID) [--window TITLE] [--showing] [--display :N | --bus ADDRESS]")
	var req sendonce.InspectRequest
	var pid uint
	fs.StringVar(&req.App, "app", "", "the app by its profile's `NAME` (its process)")
	fs.StringVar(&req.Process, "process", "", "the app by its process `NAME` (e.g. gajim)")
	fs.UintVar(&pid, "pid", 0, "the app by its process `ID`")
	fs.StringVar(&req.Window, "window", "", "only the top-level window of this exact `TITLE`")
	fs.BoolVar(&req.ShowingOnly, "showing", false, "only what is on screen")
	fs.StringVar(&req.Display, "display", "", "the X display whose session's accessibility bus to read (default $DISPLAY)")
	fs.StringVar(&req.Bus, "bus", "", "the accessibility bus's `ADDRESS` (default: the display's, its root window's AT_SPI_BUS; or $SENDONCE_A11Y_BUS)")
	fs.DurationVar(&req.Limits.Time, "timeout", 10*time.Second, "give up on an app that does not answer after this long")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	req.PID = uint32(pid)
	if req.Bus == "" {
		req.Bus = env.getenv("SENDONCE_A11Y_BUS")
	}
	if req.Display == "" {
		req.Display = env.getenv("DISPLAY")
	}
	res, err := sendonce.Inspect(ctx, req, env.options())
	if err != nil {
		return err
	}
	env.print(res)
	return nil
}

package driver

import (
	"context"
	"fmt"
	"image"
	"math"

	"github.com/sendonce/sendonce/evidence"
)

// colorShareWanted is the share of a wait_color region's pixels that must be the step's
// colour: a text cursor or a pixel of anti-aliasing does not spoil it, a message does.
const colorShareWanted = 0.9

// defaultColorTolerance is how far (Euclidean distance in RGB) a pixel may be from a
// wait_color step's colour when the step gives no color_tolerance.
const defaultColorTolerance = 24

// waitColor waits until the step's region shows the step's colour (nine pixels in ten
// within its tolerance). It proves a state the app shows only as colour, such as a
// modal popup that dims the whole window, in a part of the window no peer's message
// can paint: nheko's room switcher turns the white top of its room list #696969, and
// only then may the room's name be typed (without the switcher it would go to the
// message field, where a Return sends it).
func (r *Runner) waitColor(ctx context.Context, s Step, res *evidence.Record) error {
	region, err := r.region(ctx, s)
	if err != nil {
		return err
	}
	want, tolerance := *s.Color, s.colorTolerance()
	deadline := r.now().Add(r.timeout(s))
	for {
		img, err := r.Driver.Capture(ctx, region)
		if err != nil {
			return err
		}
		share := colorShare(img, want, tolerance)
		if share >= colorShareWanted {
			res.Target = &evidence.Target{Method: "color", Box: ptr(box(region)),
				Words: []string{fmt.Sprintf("%.0f%% of the region within %.0f of rgb(%d,%d,%d)", 100*share, tolerance, want[0], want[1], want[2])}}
			return nil
		}
		if r.now().After(deadline) {
			return fmt.Errorf("the region %v did not turn rgb(%d,%d,%d) within %v (%.0f%% of its pixels within %.0f of it; want %.0f%%)",
				region, want[0], want[1], want[2], r.timeout(s), 100*share, tolerance, 100*colorShareWanted)
		}
		sleep(ctx, r.Reader.PollInterval())
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func (s Step) colorTolerance() float64 {
	if s.ColorTolerance > 0 {
		return s.ColorTolerance
	}
	return defaultColorTolerance
}

// colorShare is the share of img's pixels within tolerance of want (0 for no pixels).
func colorShare(img *image.RGBA, want [3]uint8, tolerance float64) float64 {
	if img == nil || img.Rect.Empty() {
		return 0
	}
	near, all := 0, 0
	for y := img.Rect.Min.Y; y < img.Rect.Max.Y; y++ {
		for x := img.Rect.Min.X; x < img.Rect.Max.X; x++ {
			o := img.PixOffset(x, y)
			var d float64
			for i := range want {
				c := float64(img.Pix[o+i]) - float64(want[i])
				d += c * c
			}
			all++
			if math.Sqrt(d) <= tolerance {
				near++
			}
		}
	}
	return float64(near) / float64(all)
}

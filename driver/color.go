package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"math"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/internal/clock"
)

// colorShareWanted is the share of a wait_color region's pixels that must be the step's
// colour: a text cursor or a pixel of anti-aliasing does not spoil it, a message does.
const colorShareWanted = 0.9

// defaultColorTolerance is how far (Euclidean distance in RGB) a pixel may be from a
// wait_color step's colour when the step gives no color_tolerance.
const defaultColorTolerance = 24

// waitColor waits until the step's region shows the step's colour (nine pixels in ten
// within its tolerance) in two captures in a row, a poll apart: a colour on its way out
// (a popup fading) does not count. It proves a state the app shows only as colour, such
// as a modal popup that dims the whole window, in a part of the window no peer's
// message can paint (validation keeps the region off the chat): nheko's room switcher
// turns the white top of its room list #696969, and only then may the room's name be
// typed (without the switcher it would go to the message field, where a Return sends
// it).
func (r *Runner) waitColor(ctx context.Context, s Step, res *evidence.Record) error {
	region, err := r.region(ctx, s)
	if err != nil {
		return err
	}
	want, tolerance := *s.Color, s.colorTolerance()
	deadline := r.now().Add(r.timeout(s))
	held := false
	for {
		img, err := r.Driver.Capture(ctx, region)
		if err != nil {
			return err
		}
		share := colorShare(img, want, tolerance)
		shows := share >= colorShareWanted
		if shows && held {
			res.Target = &evidence.Target{Method: "color", Box: ptr(box(region)),
				Words: []string{fmt.Sprintf("%.0f%% of the region within %.0f of rgb(%d,%d,%d), twice", 100*share, tolerance, want[0], want[1], want[2])}}
			return nil
		}
		held = shows
		if r.now().After(deadline) {
			return fmt.Errorf("the region %v did not turn rgb(%d,%d,%d) within %v (%.0f%% of its pixels within %.0f of it; want %.0f%%, in two captures in a row)",
				region, want[0], want[1], want[2], r.timeout(s), 100*share, tolerance, 100*colorShareWanted)
		}
		clock.Sleep(ctx, r.Reader.PollInterval())
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
func colorShare(img *image.RGBA, want RGB, tolerance float64) float64 {
	if img == nil || img.Rect.Empty() {
		return 0
	}
	near, all, w := 0, 0, want.float()
	for y := img.Rect.Min.Y; y < img.Rect.Max.Y; y++ {
		for x := img.Rect.Min.X; x < img.Rect.Max.X; x++ {
			o := img.PixOffset(x, y)
			all++
			if rgbDistance(RGB(img.Pix[o:o+3]).float(), w) <= tolerance {
				near++
			}
		}
	}
	return float64(near) / float64(all)
}

// RGB is a colour as a profile gives it: exactly three values of 0 to 255, red, green
// and blue: [105, 105, 105].
type RGB [3]uint8

func (c *RGB) UnmarshalJSON(b []byte) error {
	var v []int
	if err := json.Unmarshal(b, &v); err != nil || len(v) != 3 {
		return fmt.Errorf("a colour is three numbers, [red, green, blue], not %s", b)
	}
	for i, x := range v {
		if x < 0 || x > 255 {
			return fmt.Errorf("a colour's values are 0 to 255, not %d (in %s)", x, b)
		}
		c[i] = uint8(x)
	}
	return nil
}

// rgbDistance is how far apart two colours are: the Euclidean distance in RGB (0 to
// about 442).
func rgbDistance(a, b [3]float64) float64 {
	var d float64
	for i := range a {
		x := a[i] - b[i]
		d += x * x
	}
	return math.Sqrt(d)
}

func (c RGB) float() [3]float64 { return [3]float64{float64(c[0]), float64(c[1]), float64(c[2])} }

package x11

import (
	"context"
	"fmt"
	"image"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

// capturer reads the screen over the Desktop's one X connection: a GetImage of the root
// window, converted in one pass. Opening a connection for every capture (as
// kbinani/screenshot does, with a shared-memory segment set up and torn down each time
// and a per-pixel copy) cost 39 ms a full screen; captures are the runner's most
// frequent call. Only the common format is read this way: a 24- or 32-bit TrueColor root
// in 32-bit little-endian ZPixmap (Xvfb's and every current X server's); any other
// falls back to vision.X11Screen (ok is false).
type capturer struct {
	root   xproto.Window
	bounds image.Rectangle
	ok     bool
}

func newCapturer(c *xgb.Conn) capturer {
	setup := xproto.Setup(c)
	screen := setup.DefaultScreen(c)
	cp := capturer{root: screen.Root, bounds: image.Rect(0, 0, int(screen.WidthInPixels), int(screen.HeightInPixels))}
	if setup.ImageByteOrder != xproto.ImageOrderLSBFirst || (screen.RootDepth != 24 && screen.RootDepth != 32) {
		return cp
	}
	for _, f := range setup.PixmapFormats {
		if f.Depth == screen.RootDepth && f.BitsPerPixel == 32 {
			cp.ok = true
		}
	}
	for _, d := range screen.AllowedDepths {
		for _, v := range d.Visuals {
			if v.VisualId == screen.RootVisual && (v.Class != xproto.VisualClassTrueColor || v.RedMask != 0xff0000 || v.GreenMask != 0xff00 || v.BlueMask != 0xff) {
				cp.ok = false
			}
		}
	}
	return cp
}

// capture reads r (screen coordinates; the image keeps them) from the root window. The
// part of r outside the screen is black.
func (cp capturer) capture(ctx context.Context, c *xgb.Conn, r image.Rectangle) (*image.RGBA, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	img := image.NewRGBA(r)
	in := r.Intersect(cp.bounds)
	if in.Empty() {
		return img, nil
	}
	reply, err := xproto.GetImage(c, xproto.ImageFormatZPixmap, xproto.Drawable(cp.root),
		int16(in.Min.X), int16(in.Min.Y), uint16(in.Dx()), uint16(in.Dy()), 0xffffffff).Reply()
	if err != nil {
		return nil, fmt.Errorf("capturing %v: %w", in, err)
	}
	if len(reply.Data) < in.Dx()*in.Dy()*4 {
		return nil, fmt.Errorf("capturing %v: %d bytes for %d pixels", in, len(reply.Data), in.Dx()*in.Dy())
	}
	src := reply.Data
	for y := in.Min.Y; y < in.Max.Y; y++ {
		row := img.Pix[img.PixOffset(in.Min.X, y):]
		line := src[(y-in.Min.Y)*in.Dx()*4:]
		for x := 0; x < in.Dx(); x++ {
			b, g, r := line[4*x], line[4*x+1], line[4*x+2] // BGRX
			row[4*x], row[4*x+1], row[4*x+2], row[4*x+3] = r, g, b, 255
		}
	}
	if in != r { // outside the screen: opaque black (a capture inside it skips this pass)
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				if !(image.Point{x, y}).In(in) {
					img.Pix[img.PixOffset(x, y)+3] = 255
				}
			}
		}
	}
	return img, nil
}

//go:build unix

package x11

import (
	"context"
	"encoding/binary"
	"fmt"
	"image"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/shm"
	"github.com/jezek/xgb/xproto"
	"golang.org/x/sys/unix"
)

// capturer reads the screen over the Desktop's one X connection: a GetImage of the root
// window, converted in one pass. Opening a connection for every capture (as
// kbinani/screenshot does, with a shared-memory segment set up and torn down each time
// and a per-pixel copy) cost 39 ms a full screen; captures are the runner's most
// frequent call. Only the common format is read this way: a 24- or 32-bit TrueColor root
// in 32-bit little-endian ZPixmap (Xvfb's and every current X server's); any other
// falls back to vision.X11Screen (ok is false).
//
// Where the server shares memory with us (MIT-SHM: a local display), the server writes
// the pixels into one segment set up once, instead of through the socket into a new
// buffer each time; otherwise (a remote display, the extension off, no SysV IPC) the
// pixels come in the GetImage reply.
type capturer struct {
	root   xproto.Window
	bounds image.Rectangle
	ok     bool
	shared *segment // nil: GetImage over the socket
}

// segment is a SysV shared-memory segment the X server has attached, as large as the
// screen. Its id is already marked for removal: it goes when both sides detach (or exit).
type segment struct {
	seg shm.Seg
	buf []byte
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
	if cp.ok {
		cp.shared = attachSegment(c, screen.Root, cp.bounds.Dx()*cp.bounds.Dy()*4)
	}
	return cp
}

// attachSegment sets up a shared segment of size bytes with the X server, or returns
// nil when it cannot (the captures then use the socket).
func attachSegment(c *xgb.Conn, root xproto.Window, size int) *segment {
	if size <= 0 || shm.Init(c) != nil {
		return nil
	}
	id, err := unix.SysvShmGet(unix.IPC_PRIVATE, size, unix.IPC_CREAT|0o600)
	if err != nil {
		return nil
	}
	defer unix.SysvShmCtl(id, unix.IPC_RMID, nil) // freed once both sides detach
	buf, err := unix.SysvShmAttach(id, 0, 0)
	if err != nil {
		return nil
	}
	seg, err := shm.NewSegId(c)
	if err == nil {
		err = shm.AttachChecked(c, seg, uint32(id), false).Check()
	}
	if err != nil {
		unix.SysvShmDetach(buf)
		return nil
	}
	sg := &segment{seg: seg, buf: buf}
	if !sg.sharedWith(c, root) {
		shm.Detach(c, seg)
		unix.SysvShmDetach(buf)
		return nil
	}
	return sg
}

// sharedWith reports whether the server writes into this process's memory: a server in
// another IPC namespace attaches a segment of its own with the same id. A few pixels
// read through the segment (over bytes set to 0xff first) must be those of a GetImage
// over the socket, read twice in case the screen changed between the reads.
func (sg *segment) sharedWith(c *xgb.Conn, root xproto.Window) bool {
	const w = 16
	for range 2 {
		for i := range 4 * w {
			sg.buf[i] = 0xff
		}
		viaShm, err := shm.GetImage(c, xproto.Drawable(root), 0, 0, w, 1, 0xffffffff, xproto.ImageFormatZPixmap, sg.seg, 0).Reply()
		if err != nil || viaShm.Size < 4*w {
			return false
		}
		viaSocket, err := xproto.GetImage(c, xproto.ImageFormatZPixmap, xproto.Drawable(root), 0, 0, w, 1, 0xffffffff).Reply()
		if err != nil || len(viaSocket.Data) < 4*w {
			return false
		}
		same := true
		for i := 0; i < 4*w; i += 4 { // B, G, R; the fourth byte is padding
			same = same && sg.buf[i] == viaSocket.Data[i] && sg.buf[i+1] == viaSocket.Data[i+1] && sg.buf[i+2] == viaSocket.Data[i+2]
		}
		if same {
			return true
		}
	}
	return false
}

// unmap unmaps the shared segment, if any, on the connection's end; the server detaches
// its end when the connection closes.
func (cp *capturer) unmap() {
	if cp.shared != nil {
		unix.SysvShmDetach(cp.shared.buf)
		cp.shared = nil
	}
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
	src, err := cp.read(c, in)
	if err != nil {
		return nil, fmt.Errorf("capturing %v: %w", in, err)
	}
	if len(src) < in.Dx()*in.Dy()*4 {
		return nil, fmt.Errorf("capturing %v: %d bytes for %d pixels", in, len(src), in.Dx()*in.Dy())
	}
	n := in.Dx() * 4
	for y := in.Min.Y; y < in.Max.Y; y++ {
		o := img.PixOffset(in.Min.X, y)
		bgrxToRGBA(img.Pix[o:o+n], src[(y-in.Min.Y)*n:])
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

// read returns the pixels of in (inside the screen), BGRX, row after row. With a shared
// segment the bytes are the segment's: valid until the next read.
func (cp capturer) read(c *xgb.Conn, in image.Rectangle) ([]byte, error) {
	if cp.shared == nil {
		reply, err := xproto.GetImage(c, xproto.ImageFormatZPixmap, xproto.Drawable(cp.root),
			int16(in.Min.X), int16(in.Min.Y), uint16(in.Dx()), uint16(in.Dy()), 0xffffffff).Reply()
		if err != nil {
			return nil, err
		}
		return reply.Data, nil
	}
	reply, err := shm.GetImage(c, xproto.Drawable(cp.root), int16(in.Min.X), int16(in.Min.Y), uint16(in.Dx()), uint16(in.Dy()),
		0xffffffff, xproto.ImageFormatZPixmap, cp.shared.seg, 0).Reply()
	if err != nil {
		return nil, err
	}
	return cp.shared.buf[:min(int(reply.Size), len(cp.shared.buf))], nil
}

// bgrxToRGBA converts a row of 32-bit little-endian BGRX pixels (src) into opaque RGBA
// (dst, whose length is the row's), two pixels at a time.
func bgrxToRGBA(dst, src []byte) {
	src = src[:len(dst)]
	i := 0
	for ; i+8 <= len(dst); i += 8 {
		v := binary.LittleEndian.Uint64(src[i:])
		binary.LittleEndian.PutUint64(dst[i:], v>>16&0x000000ff000000ff|v&0x0000ff000000ff00|(v&0x000000ff000000ff)<<16|0xff000000ff000000)
	}
	if i+4 <= len(dst) {
		v := binary.LittleEndian.Uint32(src[i:])
		binary.LittleEndian.PutUint32(dst[i:], v>>16&0xff|v&0xff00|(v&0xff)<<16|0xff000000)
	}
}

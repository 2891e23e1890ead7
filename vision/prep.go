package vision

import (
	"image"
	"image/color"

	xdraw "golang.org/x/image/draw"
)

// Prep is how an image is prepared for OCR. Light text on coloured buttons is read only
// after grayscale, upscaling and, where needed, inversion and a threshold.
type Prep struct {
	Gray      bool
	Scale     int   // 0 or 1: none; 2: twice the size
	Smooth    bool  // scale bilinearly (small text) rather than by nearest neighbour (text on buttons)
	Invert    bool  // light text on a dark or coloured background
	Threshold uint8 // 0: none; else black below, white at or above (after Invert)
}

// Apply returns the prepared image, at the origin; the zero Prep returns img itself.
// Which upscaling reads better depends on the text: bilinear for small gray text
// (nearest-neighbour blocks read "22 bytes" as "27 bytes"), nearest neighbour for light
// text on a coloured button (bilinear blurs "Send Files" away).
func (p Prep) Apply(img *image.RGBA) image.Image {
	if !p.Gray && p.Scale <= 1 && !p.Invert && p.Threshold == 0 {
		return img
	}
	b := img.Bounds()
	gray := image.NewGray(image.Rect(0, 0, b.Dx(), b.Dy()))
	for y := 0; y < b.Dy(); y++ {
		for x := 0; x < b.Dx(); x++ {
			o := img.PixOffset(b.Min.X+x, b.Min.Y+y)
			r, g, bl := uint32(img.Pix[o]), uint32(img.Pix[o+1]), uint32(img.Pix[o+2])
			v := uint8((299*r + 587*g + 114*bl) / 1000)
			if p.Invert {
				v = 255 - v
			}
			gray.Pix[y*gray.Stride+x] = v
		}
	}
	out := gray
	if s := max(p.Scale, 1); s > 1 {
		out = image.NewGray(image.Rect(0, 0, b.Dx()*s, b.Dy()*s))
		var scaler xdraw.Scaler = xdraw.NearestNeighbor
		if p.Smooth {
			scaler = xdraw.BiLinear
		}
		scaler.Scale(out, out.Bounds(), gray, gray.Bounds(), xdraw.Src, nil)
	}
	if p.Threshold != 0 {
		for i, v := range out.Pix {
			if v < p.Threshold {
				out.Pix[i] = 0
			} else {
				out.Pix[i] = 255
			}
		}
	}
	return out
}

// Crop returns the part of img inside r (in img's coordinates), sharing pixels.
func Crop(img *image.RGBA, r image.Rectangle) *image.RGBA {
	return img.SubImage(r.Intersect(img.Bounds())).(*image.RGBA)
}

// MeanColor is the average colour of a region: a cheap way to tell that a page changed.
func MeanColor(img *image.RGBA, r image.Rectangle) color.RGBA {
	r = r.Intersect(img.Bounds())
	var sr, sg, sb, n uint64
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			o := img.PixOffset(x, y)
			sr, sg, sb, n = sr+uint64(img.Pix[o]), sg+uint64(img.Pix[o+1]), sb+uint64(img.Pix[o+2]), n+1
		}
	}
	if n == 0 {
		return color.RGBA{}
	}
	return color.RGBA{uint8(sr / n), uint8(sg / n), uint8(sb / n), 255}
}

package vision

import (
	"image"
	"image/color"
	"math"
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
//
// The pixels are x/image/draw's (BiLinear, NearestNeighbor) into an *image.Gray, which
// TestPrepMatchesDraw holds it to; draw has no fast path that writes gray pixels, and
// these take a third (bilinear) and a twentieth (nearest neighbour) of its time.
func (p Prep) Apply(img *image.RGBA) image.Image {
	if !p.Gray && p.Scale <= 1 && !p.Invert && p.Threshold == 0 {
		return img
	}
	gray := p.gray(img)
	out := gray
	if s := max(p.Scale, 1); s > 1 && p.Smooth {
		out = scaleBiLinear(gray, s)
	} else if s > 1 {
		out = scaleNearest(gray, s)
	}
	p.threshold(out)
	return out
}

// threshold makes g black below p.Threshold and white at or above it (none when 0).
func (p Prep) threshold(g *image.Gray) {
	if p.Threshold == 0 {
		return
	}
	for i, v := range g.Pix {
		if v < p.Threshold {
			g.Pix[i] = 0
		} else {
			g.Pix[i] = 255
		}
	}
}

// gray is img's luma (inverted when p says so), at the origin.
func (p Prep) gray(img *image.RGBA) *image.Gray {
	b := img.Bounds()
	gray := image.NewGray(image.Rect(0, 0, b.Dx(), b.Dy()))
	for y := 0; y < b.Dy(); y++ {
		o := img.PixOffset(b.Min.X, b.Min.Y+y)
		src := img.Pix[o : o+4*b.Dx()]
		dst := gray.Pix[y*gray.Stride : y*gray.Stride+b.Dx()]
		for x := range dst {
			r, g, bl := uint32(src[4*x]), uint32(src[4*x+1]), uint32(src[4*x+2])
			v := uint8((299*r + 587*g + 114*bl) / 1000)
			if p.Invert {
				v = 255 - v
			}
			dst[x] = v
		}
	}
	return gray
}

// scaleBiLinear is xdraw.BiLinear's scale of g (at the origin) by s into an
// *image.Gray, pixel for pixel: the same weights, summed in the same order, for the one
// channel a gray image has (draw sums four, and writes each pixel through an interface).
func scaleBiLinear(g *image.Gray, s int) *image.Gray {
	sw, sh := g.Rect.Dx(), g.Rect.Dy()
	dw, dh := sw*s, sh*s
	across, down := newTent(dw, sw), newTent(dh, sh)
	tmp := make([]float64, dw*sh) // the rows scaled across, 0..1
	for y := range sh {
		row := g.Pix[y*g.Stride : y*g.Stride+sw]
		for x := range dw {
			var v float64
			for _, c := range across.taps[across.from[x]:across.from[x+1]] {
				v += float64(float64(uint32(row[c.coord])*0x101) * c.weight)
			}
			tmp[y*dw+x] = v * (across.inv[x] / 0xffff)
		}
	}
	out := image.NewGray(image.Rect(0, 0, dw, dh))
	for y := range dh {
		taps := down.taps[down.from[y]:down.from[y+1]]
		dst := out.Pix[y*out.Stride : y*out.Stride+dw]
		for x := range dst {
			var v, a float64
			for _, c := range taps {
				v += float64(tmp[int(c.coord)*dw+x] * c.weight)
				a += float64(1 * c.weight)
			}
			v = min(v, a)
			dst[x] = uint8(ftou(v*down.inv[y]) >> 8) // draw's gray of an RGBA64 with R = G = B
		}
	}
	return out
}

// tent is one axis of the tent (bilinear) kernel as x/image/draw lays it out: for
// each destination column or row, the source ones it draws on (taps[from[i]:from[i+1]])
// and the inverse of their total weight.
type tent struct {
	from []int
	taps []tap
	inv  []float64
}

type tap struct {
	coord  int32
	weight float64
}

// newTent is draw's newDistrib for BiLinear (support 1, weight 1-t), for dw >= sw.
func newTent(dw, sw int) tent {
	scale := float64(sw) / float64(dw)
	t := tent{from: make([]int, dw+1), inv: make([]float64, dw)}
	for x := range dw {
		center := float64((float64(x)+0.5)*scale) - 0.5
		i := max(int32(math.Floor(center-1)), 0)
		j := min(int32(math.Ceil(center+1)), int32(sw))
		j = max(j, i)
		total := 0.0
		for coord := i; coord < j; coord++ {
			d := math.Abs(center - float64(coord))
			if d >= 1 || 1-d == 0 {
				continue
			}
			total += 1 - d
			t.taps = append(t.taps, tap{coord, 1 - d})
		}
		t.from[x+1], t.inv[x] = len(t.taps), 1/total
	}
	return t
}

// ftou is draw's conversion of a 0..1 value to 16 bits.
func ftou(f float64) uint16 {
	i := int32(float64(0xffff*f) + 0.5)
	if i > 0xffff {
		return 0xffff
	}
	if i > 0 {
		return uint16(i)
	}
	return 0
}

// scaleNearest is xdraw.NearestNeighbor's scale of g by s: each pixel s times across,
// each row s times down.
func scaleNearest(g *image.Gray, s int) *image.Gray {
	b := g.Bounds()
	out := image.NewGray(image.Rect(0, 0, b.Dx()*s, b.Dy()*s))
	for y := 0; y < b.Dy(); y++ {
		src := g.Pix[(y)*g.Stride : y*g.Stride+b.Dx()]
		row := out.Pix[y*s*out.Stride : y*s*out.Stride+out.Stride]
		for x, v := range src {
			for k := range s {
				row[x*s+k] = v
			}
		}
		for k := 1; k < s; k++ {
			copy(out.Pix[(y*s+k)*out.Stride:], row)
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

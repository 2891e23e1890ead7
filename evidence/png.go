package evidence

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/png"
	"io"
)

// encodePNG writes img as a PNG. An opaque *image.RGBA (every screen capture) is
// written as 8-bit RGB with no row filter and the fastest deflate: about twice as
// fast as image/png's encoder at its fastest level, which tries five filters on every
// row, for about 7% more bytes (over the 96 recorded fixture frames, 2026-12-02: 10 ms
// against 21 ms a frame). Any other image goes through image/png. Either way the file
// is a standard PNG that decodes to the same pixels.
func encodePNG(w io.Writer, img image.Image) error {
	if m, ok := img.(*image.RGBA); ok {
		if b, ok := encodeOpaqueRGBA(m); ok {
			_, err := w.Write(b)
			return err
		}
	}
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	return enc.Encode(w, img)
}

// encodeOpaqueRGBA encodes m as an RGB PNG, or reports false if a pixel is not opaque
// (or m is empty) and so needs the alpha channel.
func encodeOpaqueRGBA(m *image.RGBA) ([]byte, bool) {
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	if w <= 0 || h <= 0 {
		return nil, false
	}
	var idat bytes.Buffer
	z, err := zlib.NewWriterLevel(&idat, zlib.BestSpeed)
	if err != nil {
		return nil, false
	}
	row := make([]byte, 1+3*w) // filter type 0 (none), then R, G, B per pixel
	for y := b.Min.Y; y < b.Max.Y; y++ {
		px := m.Pix[m.PixOffset(b.Min.X, y):][:4*w]
		for x, o := 0, 1; x < w; x, o = x+1, o+3 {
			p := px[4*x : 4*x+4 : 4*x+4]
			if p[3] != 0xff {
				return nil, false
			}
			row[o], row[o+1], row[o+2] = p[0], p[1], p[2]
		}
		if _, err := z.Write(row); err != nil {
			return nil, false
		}
	}
	if err := z.Close(); err != nil {
		return nil, false
	}
	var out bytes.Buffer
	out.Grow(idat.Len() + 64)
	out.WriteString("\x89PNG\r\n\x1a\n")
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:4], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:8], uint32(h))
	ihdr[8], ihdr[9] = 8, 2 // 8 bits a sample, colour type 2 (RGB); deflate, no filter method, no interlace
	writeChunk(&out, "IHDR", ihdr[:])
	writeChunk(&out, "IDAT", idat.Bytes())
	writeChunk(&out, "IEND", nil)
	return out.Bytes(), true
}

// writeChunk appends one PNG chunk: length, type, data, CRC of type and data.
func writeChunk(out *bytes.Buffer, typ string, data []byte) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(data)))
	out.Write(n[:])
	out.WriteString(typ)
	out.Write(data)
	crc := crc32.NewIEEE()
	crc.Write([]byte(typ))
	crc.Write(data)
	binary.BigEndian.PutUint32(n[:], crc.Sum32())
	out.Write(n[:])
}

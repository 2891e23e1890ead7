package driver

import (
	"image"
	"image/color"
	"image/draw"
	"testing"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/sendonce/sendonce/vision"
)

func word(text string, x, y, line int) vision.Word {
	return vision.Word{Text: text, Box: image.Rect(x, y, x+8*len(text), y+14), Confidence: 90, Line: line}
}

func TestItemsReadsFileCards(t *testing.T) {
	r := &Runner{Vars: Vars{FileName: "report.txt"}}
	ws := []vision.Word{
		word("alice", 480, 207, 1), word("11:33", 520, 208, 1),
		word("report.txt", 565, 267, 2), word("17", 565, 282, 3), word("bytes", 585, 281, 3),
		word("alice", 480, 325, 4),
		word("ql.txt", 565, 385, 5), // another file
		word("rep0rt.txt", 565, 445, 6), word("26", 565, 460, 7), word("bytes", 585, 459, 7),
		word("report.txt", 900, 500, 8), word("4.2", 1200, 515, 9), word("kB", 1230, 515, 9), // a size far to the side is not its size
	}
	got := r.items(vision.Look{Words: ws})
	want := []string{"report.txt|17 bytes", "rep0rt.txt|26 bytes", "report.txt|"}
	if len(got) != len(want) {
		t.Fatalf("items %+v; want %v", got, want)
	}
	for i, it := range got {
		if it.Name+"|"+it.Size != want[i] {
			t.Errorf("item %d = %s|%s; want %s", i, it.Name, it.Size, want[i])
		}
		if it.Ours || it.Finished {
			t.Errorf("item %d is ours or finished without confirm rules: %+v", i, it)
		}
	}
}

// chatFrame draws lines of text, each in its colour, and returns the frame with the
// words as OCR would report them.
func chatFrame(lines []struct {
	text string
	ink  color.RGBA
	x, y int
}) (*image.RGBA, []vision.Word) {
	img := image.NewRGBA(image.Rect(0, 0, 700, 500))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.RGBA{255, 255, 255, 255}}, image.Point{}, draw.Src)
	var ws []vision.Word
	for i, l := range lines {
		d := &font.Drawer{Dst: img, Src: image.NewUniform(l.ink), Face: basicfont.Face7x13}
		x := l.x
		for _, w := range splitWords(l.text) {
			d.Dot = fixed.P(x, l.y)
			d.DrawString(w)
			ws = append(ws, vision.Word{Text: w, Box: image.Rect(x, l.y-11, x+7*len(w), l.y+2), Confidence: 90, Line: i})
			x += 7 * (len(w) + 1)
		}
	}
	return img, ws
}

func splitWords(s string) []string {
	var out []string
	w := ""
	for _, r := range s {
		if r == ' ' {
			if w != "" {
				out = append(out, w)
			}
			w = ""
			continue
		}
		w += string(r)
	}
	if w != "" {
		out = append(out, w)
	}
	return out
}

// TestItemsTellOursAndFinished: with the Gajim profile's confirm rules, an item under
// our author (drawn in the outgoing colour) is ours and finished; under the peer's
// author (another colour, even with our name) it is not ours; under a transfer row (a
// time without an author, progress shown) it is not finished.
func TestItemsTellOursAndFinished(t *testing.T) {
	p, err := LoadProfile("gajim")
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Profile: p, Vars: Vars{FileName: "report.txt", Size: 17}}
	ours, peer, text := color.RGBA{50, 90, 140, 255}, color.RGBA{200, 40, 40, 255}, color.RGBA{30, 30, 30, 255}
	frame, ws := chatFrame([]struct {
		text string
		ink  color.RGBA
		x, y int
	}{
		{"alice 11:33", ours, 10, 20}, {"report.txt", text, 80, 50}, {"17 bytes", text, 80, 65},
		{"alice 11:35", peer, 10, 120}, {"report.txt", text, 80, 150}, {"17 bytes", text, 80, 165}, // a peer named alice
		{"alice 11:36", text, 10, 220}, {"report.txt", text, 80, 250}, {"17 bytes", text, 80, 265}, // a message text reading like a header
		{"11:40", text, 10, 320}, {"report.txt", text, 80, 350}, {"17 bytes", text, 80, 365}, {"42 % (1 s remaining)", text, 80, 380},
		{"alice 11:41", ours, 10, 420}, {"report.txt", text, 80, 450}, {"17 bytes", text, 80, 465},
	})
	got := r.items(vision.Look{Frame: frame, Words: ws})
	want := []struct{ ours, finished bool }{{true, true}, {false, true}, {false, true}, {false, false}, {true, true}}
	if len(got) != len(want) {
		t.Fatalf("items %+v", got)
	}
	for i, it := range got {
		if it.Ours != want[i].ours || it.Finished != want[i].finished || it.Size != "17 bytes" || it.Y == 0 {
			t.Errorf("item %d: %+v; want ours %v finished %v", i, it, want[i].ours, want[i].finished)
		}
	}
}

func TestBlank(t *testing.T) {
	img := image.NewRGBA(image.Rect(10, 10, 60, 60))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.RGBA{250, 250, 250, 255}}, image.Point{}, draw.Src)
	if !blank(img) {
		t.Fatal("a uniform region is not blank")
	}
	img.Set(40, 40, color.RGBA{120, 120, 120, 255}) // a button's edge
	if blank(img) {
		t.Fatal("a region with a drawn pixel is blank")
	}
}

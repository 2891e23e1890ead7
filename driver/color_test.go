package driver

import (
	"context"
	"errors"
	"image"
	"image/color"
	"strings"
	"testing"
)

func TestColorShare(t *testing.T) {
	grey := color.RGBA{105, 105, 105, 255}
	for _, c := range []struct {
		name  string
		paint func(*image.RGBA)
		want  float64
	}{
		{"all grey", func(*image.RGBA) {}, 1},
		{"a cursor's column", func(m *image.RGBA) {
			for y := 0; y < 10; y++ {
				m.Set(3, y, color.Black)
			}
		}, 0.9},
		{"slightly off, within tolerance", func(m *image.RGBA) { fill(m, color.RGBA{115, 110, 100, 255}) }, 1},
		{"white", func(m *image.RGBA) { fill(m, color.White) }, 0},
		{"half white", func(m *image.RGBA) {
			for y := 0; y < 5; y++ {
				for x := 0; x < 10; x++ {
					m.Set(x, y, color.White)
				}
			}
		}, 0.5},
	} {
		m := image.NewRGBA(image.Rect(0, 0, 10, 10))
		fill(m, grey)
		c.paint(m)
		if got := colorShare(m, [3]uint8{105, 105, 105}, defaultColorTolerance); got != c.want {
			t.Errorf("%s: share %v; want %v", c.name, got, c.want)
		}
	}
	if got := colorShare(image.NewRGBA(image.Rectangle{}), [3]uint8{}, 10); got != 0 {
		t.Errorf("an empty capture: share %v; want 0", got)
	}
}

func fill(m *image.RGBA, c color.Color) {
	for y := m.Rect.Min.Y; y < m.Rect.Max.Y; y++ {
		for x := m.Rect.Min.X; x < m.Rect.Max.X; x++ {
			m.Set(x, y, c)
		}
	}
}

// dimsOnShortcut is an app whose ctrl+k opens a modal popup that dims the window (when
// it works), and which remembers what was typed.
type dimsOnShortcut struct {
	*sendsOnChoose
	works, dimmed bool
	flickers      bool // the dimming shows in every other capture only
	captures      int
	typed         []string
}

func (d *dimsOnShortcut) Key(ctx context.Context, chord string) error {
	if chord == "ctrl+k" && d.works {
		d.dimmed = true
	}
	return d.sendsOnChoose.Key(ctx, chord)
}

func (d *dimsOnShortcut) Type(_ context.Context, text string) error {
	d.typed = append(d.typed, text)
	return nil
}

func (d *dimsOnShortcut) Capture(_ context.Context, r image.Rectangle) (*image.RGBA, error) {
	m := image.NewRGBA(r)
	d.captures++
	if d.dimmed && (!d.flickers || d.captures%2 == 0) {
		fill(m, color.RGBA{105, 105, 105, 255})
	} else {
		fill(m, color.White)
	}
	return m, nil
}

const colorProfile = `{"app":"x","process":"x","window_title":"X",
 "title":{"region":{"x":0,"y":0,"w":100,"h":30}},"chat":{"region":{"x":0,"y":30,"w":0,"h":0}},
 "send_page":{"region":{"x":0,"y":30,"w":0,"h":0}},"sent_item_timeout":"300ms",
 "open_conversation":[
   {"name":"open the switcher","do":"key","class":"safe","keys":"ctrl+k"},
   {"name":"wait for it to dim the window","do":"wait_color","class":"safe","region":{"x":0,"y":0,"w":50,"h":8},"color":[105,105,105],"timeout":"300ms"},
   {"name":"type the title","do":"type_text","class":"safe","text":"{{title}}"}],
 "choose_file":[{"name":"choose and send","do":"key","keys":"Return","class":"submit","crosses":"choose_file,send"}]}`

// TestWaitColorGatesTyping: the title is typed only once the window shows the popup's
// colour in two captures in a row; a shortcut that opened nothing, or a colour that
// shows in one capture and not the next, stops the delivery before anything is typed.
func TestWaitColorGatesTyping(t *testing.T) {
	for _, c := range []struct{ works, flickers bool }{{true, false}, {false, false}, {true, true}} {
		works := c.works && !c.flickers
		desk := &dimsOnShortcut{sendsOnChoose: treeDesk(), works: c.works, flickers: c.flickers}
		r, crossed := runnerOn(t, desk, desk.sendsOnChoose, readsBob{}, colorProfile)
		_, err := r.Deliver(context.Background())
		if works {
			if err != nil && !strings.Contains(err.Error(), "sent item") {
				t.Fatalf("deliver: %v", err)
			}
			if len(desk.typed) != 1 || desk.typed[0] != "Bob" || len(crossed()) != 2 {
				t.Errorf("typed %q, crossings %v; want the title typed once the window dimmed, then the crossing", desk.typed, crossed())
			}
			continue
		}
		want := "did not turn rgb(105,105,105)"
		if !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), want) || len(desk.typed) != 0 || len(crossed()) != 0 {
			t.Errorf("the shortcut opened nothing: %v, typed %q, crossings %v; want a stop naming %q, nothing typed", err, desk.typed, crossed(), want)
		}
	}
}

func TestProfileColorFields(t *testing.T) {
	base := `{"app":"x","process":"x","chat":{"region":{"x":0,"y":100,"w":0,"h":0}},"choose_file":[%s,{"name":"c","do":"key","keys":"Return","class":"may_submit","crosses":"choose_file"}],"send":[{"name":"s","do":"key","keys":"Return","class":"submit","crosses":"send"}]}`
	for step, want := range map[string]string{
		`{"name":"w","do":"wait_color","class":"safe","region":{"x":0,"y":0,"w":9,"h":9},"color":[1,2,3]}`:                        "",
		`{"name":"w","do":"wait_color","class":"safe","region":{"x":0,"y":0,"w":9,"h":9},"color":[1,2,3],"color_tolerance":40}`:   "",
		`{"name":"w","do":"wait_color","class":"safe","region":{"x":0,"y":0,"w":9,"h":9}}`:                                        "needs a color and a region",
		`{"name":"w","do":"wait_color","class":"safe","color":[1,2,3]}`:                                                           "needs a color and a region",
		`{"name":"w","do":"wait_color","class":"safe","region":{"x":0,"y":0,"w":9,"h":9},"color":[1,2,3],"color_tolerance":-1}`:   "color_tolerance -1",
		`{"name":"w","do":"wait_text","class":"safe","text":"x","color":[1,2,3]}`:                                                 "for wait_color steps only",
		`{"name":"w","do":"key","class":"safe","keys":"a","color_tolerance":3}`:                                                   "for wait_color steps only",
		`{"name":"w","do":"wait_color","class":"safe","region":{"x":0,"y":0,"w":9,"h":9,"from":{"text":"a"}},"color":[1,2,3]}`:    "fixed place",
		`{"name":"w","do":"wait_color","class":"safe","region":{"x":0,"y":0,"w":9,"h":9},"color":[1,2,3],"color_tolerance":500}`:  "0 to 442",
		`{"name":"w","do":"wait_color","class":"safe","region":{"x":0,"y":0,"w":9,"h":9},"color":[105]}`:                          "three numbers",
		`{"name":"w","do":"wait_color","class":"safe","region":{"x":0,"y":0,"w":9,"h":9},"color":[1,2,3,4]}`:                      "three numbers",
		`{"name":"w","do":"wait_color","class":"safe","region":{"x":0,"y":0,"w":9,"h":9},"color":[300,0,0]}`:                      "0 to 255",
		`{"name":"w","do":"wait_color","class":"safe","region":{"x":0,"y":90,"w":9,"h":20},"color":[1,2,3]}`:                      "reads the chat region",
		`{"name":"w","do":"wait_color","class":"safe","region":{"x":0,"y":0,"w":9,"h":9,"centred":true},"color":[1,2,3]}`:         "fixed place",
		`{"name":"w","do":"wait_color","class":"may_submit","region":{"x":0,"y":0,"w":9,"h":9},"color":[1,2,3],"crosses":"send"}`: "must send input",
	} {
		_, err := ParseProfile([]byte(strings.Replace(base, "%s", step, 1)))
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v; want %q", step, err, want)
		}
	}
}

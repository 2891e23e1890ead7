package sendonce_test

import (
	"context"
	"image"
	"image/color"
	"image/draw"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/vision"
)

// lookOnly is a desktop with one app window that counts every input it is sent.
type lookOnly struct {
	win    driver.Window
	inputs int
}

func (d *lookOnly) Windows(context.Context) ([]driver.Window, error) {
	return []driver.Window{d.win}, nil
}
func (d *lookOnly) Activate(context.Context, driver.Window) error  { d.inputs++; return nil }
func (d *lookOnly) Click(context.Context, image.Point) error       { d.inputs++; return nil }
func (d *lookOnly) Key(context.Context, string) error              { d.inputs++; return nil }
func (d *lookOnly) Type(context.Context, string) error             { d.inputs++; return nil }
func (d *lookOnly) Move(context.Context, image.Point) error        { d.inputs++; return nil }
func (d *lookOnly) Bounds() image.Rectangle                        { return image.Rect(0, 0, 1280, 800) }
func (d *lookOnly) Focused(context.Context) (driver.Window, error) { return d.win, nil }
func (d *lookOnly) FieldText(context.Context, driver.Window) (string, error) {
	d.inputs++
	return "", nil
}
func (d *lookOnly) Capture(_ context.Context, r image.Rectangle) (*image.RGBA, error) {
	img := image.NewRGBA(r)
	draw.Draw(img, r, image.NewUniform(color.White), image.Point{}, draw.Src)
	return img, nil
}

// oneWord reads "Gajim" anywhere.
type oneWord struct{}

func (oneWord) Recognize(context.Context, image.Image, vision.Mode) ([]vision.Word, error) {
	return []vision.Word{{Text: "Gajim", Box: image.Rect(10, 10, 60, 30), Confidence: 95}}, nil
}

// doctorSetup makes a store and loads the first built-in profile: a folder, the store's
// location, the profile.
func doctorSetup(t *testing.T) (string, string, *driver.Profile) {
	t.Helper()
	dir := t.TempDir()
	loc := filepath.Join(dir, "sendonce.db")
	if _, err := sendonce.Init(context.Background(), loc, sendonce.InitRequest{}, sendonce.Options{}); err != nil {
		t.Fatal(err)
	}
	p, err := driver.LoadProfile("gajim") // a window found by its exact title, and a mark of our side no peer can produce
	if err != nil {
		t.Fatal(err)
	}
	return dir, loc, p
}

// TestDoctorSendsNoInput: a doctor run that passes every check sends the desktop no
// input at all: it only lists windows and captures the screen.
func TestDoctorSendsNoInput(t *testing.T) {
	ctx := context.Background()
	dir, loc, p := doctorSetup(t)
	desk := &lookOnly{win: driver.Window{ID: 1, Title: p.WindowTitle, Process: p.Process, Viewable: true, Bounds: image.Rect(0, 19, 1280, 800)}}
	res := sendonce.Doctor(ctx, sendonce.DoctorRequest{Store: loc, Profile: p, Display: ":fake", Staging: filepath.Join(dir, "staging")}, sendonce.Options{},
		sendonce.Desktop{OpenDesktop: func(context.Context, string) (driver.Driver, func(), error) { return desk, func() {}, nil }, OCR: oneWord{}})
	if !res.Ready {
		t.Fatalf("doctor: %+v; want every check to pass on this desktop", res)
	}
	if desk.inputs != 0 {
		t.Fatalf("doctor sent %d input event(s) to the desktop; want none", desk.inputs)
	}
}

// TestDoctorProviderChoice: doctor checks the provider the destination names, else the
// one whose account it is given; a destination named without an account is said (not
// a failure: a delivery needs no provider), and no password is ever printed.
func TestDoctorProviderChoice(t *testing.T) {
	ctx := context.Background()
	dir, loc, p := doctorSetup(t)
	matrixAccount := filepath.Join(dir, "matrix.json")
	if err := os.WriteFile(matrixAccount, []byte(`{"homeserver": "http://127.0.0.1:1", "user": "@alice:localhost", "password": "pw-NOT-PRINTED", "allow_http": true, "timeout": "2s"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, dest, config string
		ok                 bool
		saw                string
	}{
		{"a Matrix destination, no account", "matrix:@bob:localhost", "", true, "no matrix account given: deliveries to matrix:@bob:localhost are confirmed on screen only"},
		{"a Matrix account, no destination", "", matrixAccount, false, "127.0.0.1:1"},
		{"both", "matrix:@bob:localhost", matrixAccount, false, "127.0.0.1:1"},
	} {
		desk := &lookOnly{win: driver.Window{ID: 1, Title: p.WindowTitle, Process: p.Process, Viewable: true, Bounds: image.Rect(0, 19, 1280, 800)}}
		res := sendonce.Doctor(ctx, sendonce.DoctorRequest{Store: loc, Profile: p, Display: ":fake", Staging: filepath.Join(dir, "staging"), Destination: c.dest, ProviderConfig: c.config},
			sendonce.Options{Getenv: func(string) string { return "" }},
			sendonce.Desktop{OpenDesktop: func(context.Context, string) (driver.Driver, func(), error) { return desk, func() {}, nil }, OCR: oneWord{}})
		var got *sendonce.DoctorCheck
		for i := range res.Checks {
			if res.Checks[i].Name == "provider" {
				got = &res.Checks[i]
			}
		}
		switch {
		case got == nil:
			t.Errorf("%s: no provider check in %+v", c.name, res.Checks)
		case got.OK != c.ok || !strings.Contains(got.Saw, c.saw) || strings.Contains(got.Saw, "xmpp") || strings.Contains(got.Saw+got.Fix, "pw-NOT-PRINTED"):
			t.Errorf("%s: %+v; want ok %v, saw naming %q, nothing of XMPP, no password", c.name, *got, c.ok, c.saw)
		case res.Ready != c.ok:
			t.Errorf("%s: ready %v; want %v", c.name, res.Ready, c.ok)
		}
	}
}

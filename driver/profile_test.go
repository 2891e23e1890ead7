package driver

import (
	"image"
	"strings"
	"testing"
)

func TestBuiltinProfilesLoad(t *testing.T) {
	for _, app := range KnownApps() {
		if _, err := LoadProfile(app); err != nil {
			t.Errorf("%s: %v", app, err)
		}
	}
	_, err := LoadProfile("nope")
	for _, app := range KnownApps() {
		if err == nil || !strings.Contains(err.Error(), app) {
			t.Errorf("an unknown app: %v; want every known one named (%s)", err, app)
		}
	}
}

func TestProfileValidation(t *testing.T) {
	base := `{"app":"x","process":"x",
	 "choose_file":[{"name":"c","do":"key","keys":"Return","class":"may_submit","crosses":"choose_file"}],
	 "send":[{"name":"s","do":"key","keys":"Return","class":"submit","crosses":"send"}]`
	if _, err := ParseProfile([]byte(base + `}`)); err != nil {
		t.Fatalf("minimal profile: %v", err)
	}
	for name, tail := range map[string]string{
		"submit step in open_picker":  `,"open_picker":[{"name":"x","do":"key","keys":"a","class":"submit","crosses":"open_picker"}]}`,
		"unknown kind":                `,"clean":[{"name":"x","do":"teleport","class":"safe"}]}`,
		"unknown class":               `,"clean":[{"name":"x","do":"key","class":"harmless"}]}`,
		"click in clean":              `,"clean":[{"name":"x","do":"click_text","text":"Send","class":"safe"}]}`,
		"click in dismiss":            `,"dismiss":[{"name":"x","do":"click_text","text":"Cancel","class":"safe"}]}`,
		"safe step claiming to cross": `,"clean":[{"name":"x","do":"key","keys":"a","class":"safe","crosses":"send"}]}`,
		"unknown field":               `,"colour":"red"}`,
	} {
		if _, err := ParseProfile([]byte(base + tail)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ParseProfile([]byte(base + `,"title":{"region":{"x":0,"y":0,"w":10,"h":10},"alt_preps":[{"Gray":true}]}}`)); err == nil || !strings.Contains(err.Error(), "title.alt_preps") {
		t.Errorf("alt_preps for the title: %v, want it refused by name", err)
	}
	for _, tail := range []string{
		`,"open_picker":[{"name":"x","do":"key","keys":"a","class":"safe","after_change":true}]}`,       // not a wait
		`,"open_picker":[{"name":"x","do":"wait_text","text":"a","class":"safe","after_change":true}]}`, // no input before it
	} {
		if _, err := ParseProfile([]byte(base + tail)); err == nil || !strings.Contains(err.Error(), "after_change") {
			t.Errorf("%s: %v; want it refused, naming after_change", tail, err)
		}
	}
	for _, tail := range []string{
		`,"open_picker":[{"name":"x","do":"wait_gone","text":"a","class":"safe","whole_line":true}]}`,               // not wait_text
		`,"open_picker":[{"name":"x","do":"wait_text","text":"a","class":"safe","whole_line":true,"suffix":true}]}`, // both
	} {
		if _, err := ParseProfile([]byte(base + tail)); err == nil || !strings.Contains(err.Error(), "whole_line") {
			t.Errorf("%s: %v; want it refused, naming whole_line", tail, err)
		}
	}
	twoSubmits := `{"app":"x","process":"x",
	 "choose_file":[{"name":"c","do":"key","keys":"Return","class":"may_submit","crosses":"choose_file"}],
	 "send":[{"name":"s","do":"key","keys":"Return","class":"submit","crosses":"send"},{"name":"t","do":"key","keys":"Return","class":"submit","crosses":"send"}]}`
	if _, err := ParseProfile([]byte(twoSubmits)); err == nil {
		t.Error("two submit steps in send: accepted")
	}
}

func TestRegionIn(t *testing.T) {
	w := rect(0, 19, 1280, 800)
	if got := (Region{X: 480, Y: 24, W: -20, H: 58}).In(w); got != rect(480, 43, 1260, 101) {
		t.Errorf("header region %v", got)
	}
	if got := (Region{X: 425, Y: 88, W: 520, H: -45}).In(w); got != rect(425, 107, 945, 755) {
		t.Errorf("chat region %v", got)
	}
	if got := (Region{X: -100, Y: -50, W: 50, H: 20}).In(w); got != rect(1180, 750, 1230, 770) {
		t.Errorf("from the far edges %v", got)
	}
}

func rect(x0, y0, x1, y1 int) image.Rectangle { return image.Rect(x0, y0, x1, y1) }

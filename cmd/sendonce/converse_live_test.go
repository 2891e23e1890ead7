//go:build cgo

package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// Live tests of a Chromium app: Converse.js, a web XMPP client, in Debian's Chromium as
// an app window (testbed/up --app converse), logged in as alice/converse.testbed over
// Prosody's WebSocket. The profile (driver/profiles/converse.json) names the page's
// nodes by role and name as Chromium's accessibility tree gives them; choosing the file
// in Chromium's file chooser sends it; the XMPP archive confirms. The tests shared with
// the other apps (a second run refused, a wrong title, names in their own scripts, a
// look-alike title) run through it too (live_test.go, tree_live_test.go).

func newConverseLive(t *testing.T) *liveRun {
	t.Helper()
	l := newLiveWith(t, converseApp)
	l.bed.get(t, "CONVERSE_DISPLAY") // fails clearly when the test bed has no Converse.js
	return l
}

// TestLiveConverseDeliverKinds: a text file, a PNG (Converse shows it as a preview)
// and a 9 MB file (an upload that takes a while: no confirmation before it is done)
// are each sent_verified through Converse.js, with exactly one copy of each on the
// server, the bundle verifying, and the store agreeing.
func TestLiveConverseDeliverKinds(t *testing.T) {
	for _, c := range []struct {
		name string
		make func(l *liveRun) (path, sum string)
	}{
		{"text", func(l *liveRun) (string, string) { return l.file("converse-report.txt") }},
		{"png", func(l *liveRun) (string, string) { return l.bytesFile("converse-photo.png", pngBytes(t)) }},
		{"9 MB", func(l *liveRun) (string, string) {
			b := make([]byte, 9<<20+777)
			if _, err := rand.Read(b); err != nil {
				t.Fatal(err)
			}
			return l.bytesFile("converse-big.bin", b)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newConverseLive(t)
			file, sum := c.make(l)
			before := uploads(t, l.uploadDir())
			m, code, _ := l.deliver(file, "Bob")
			l.wantSentVerified(m, code)
			l.wantExactlyOneCopyEach(before, sum)
			l.verifyBundle(m)
			if st := l.status(m["key"].(string)); st["status"] != "sent_verified" {
				t.Fatalf("status after the delivery: %v; want sent_verified", st)
			}
			if m["title_sources"] != "accessibility_tree+ocr" {
				t.Errorf("title_sources %v; want accessibility_tree+ocr (the page's own words, the screen agreeing)", m["title_sources"])
			}
		})
	}
}

// converseCrashPoints: choosing the file sends it (Converse uploads the moment the
// chooser gives it the file), so a kill right after that act leaves an upload that may
// land; reconcile settles it from alice's archive.
var converseCrashPoints = []crashPoint{
	{name: "file_chosen", crossed: true, pressed: true, settled: []string{"send_status_unknown"}},
	{name: "send_pressed", crossed: true, pressed: true, settled: []string{"send_status_unknown"}},
}

// TestLiveConverseCrash kills a Converse.js delivery (SIGKILL) after choose_file and
// after send: never two copies, the rerun refused, and the store saying what the
// server supports once reconcile has asked alice's archive.
func TestLiveConverseCrash(t *testing.T) { crashMatrix(t, converseApp, converseCrashPoints) }

// bytesFile writes content as name in the test's folder and returns its path and SHA-256.
func (l *liveRun) bytesFile(name string, content []byte) (string, string) {
	l.t.Helper()
	path := filepath.Join(l.dir, name)
	if err := os.WriteFile(path, content, 0o644); err != nil {
		l.t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	l.files[hex.EncodeToString(sum[:])] = name
	return path, hex.EncodeToString(sum[:])
}

// pngBytes is a small PNG of pixels of its own.
func pngBytes(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 96, 64))
	if _, err := rand.Read(img.Pix); err != nil {
		t.Fatal(err)
	}
	for i := 3; i < len(img.Pix); i += 4 {
		img.Pix[i] = 255
	}
	img.Set(0, 0, color.RGBA{1, 2, 3, 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

//go:build cgo

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Live tests of the second built-in app, Psi+ (Qt), logged in as carol@psi.localhost on
// a display of its own (testbed/up --app psi-plus): the same CLI, the same Prosody, a
// profile whose chat opens in a window of its own, whose upload dialog sends the file
// when it is chosen (choose_file and send are crossed together), and whose sent file
// shows only as its download link. Nothing in the code knows it is Psi+: the profile does.

func newPsiLive(t *testing.T) *liveRun {
	t.Helper()
	l := newLiveWith(t, psiApp)
	l.bed.get(t, "PSI_DISPLAY") // fails clearly when the test bed has no Psi+
	return l
}

// wantLinkInBobsArchive fails the test unless Bob's archive holds a message linking the
// upload (SLOT/NAME in the http_upload folder).
func (l *liveRun) wantLinkInBobsArchive(upload string) {
	l.t.Helper()
	l.waitLinkInBobsArchive("/upload/" + filepath.ToSlash(upload))
}

// TestLivePsiDeliverTextFile: through Psi+, a text file is sent_verified, the server
// holds exactly one file whose SHA-256 is the file's, Bob's archive links it, the
// bundle verifies, and the store says sent_verified.
func TestLivePsiDeliverTextFile(t *testing.T) {
	l := newPsiLive(t)
	file, sum := l.file("psi-report.txt")
	before := uploads(t, l.uploadDir())

	m, code, _ := l.deliver(file, "Bob")
	l.wantSentVerified(m, code)
	for upload := range l.wantExactlyOneCopyEach(before, sum) {
		if filepath.Base(upload) != "psi-report.txt" {
			t.Errorf("the server stored the upload as %s; want the file's name", upload)
		}
		l.wantLinkInBobsArchive(upload)
	}
	l.verifyBundle(m)
	l.wantFieldReadBack(m)
	if st := l.status(m["key"].(string)); st["status"] != "sent_verified" {
		t.Fatalf("status after the delivery: %v; want sent_verified", st)
	}
}

// TestLivePsiDeliverImage: an image goes the same way (Psi+'s basic build shows it as
// its link, no preview), byte for byte.
func TestLivePsiDeliverImage(t *testing.T) {
	l := newPsiLive(t)
	img := image.NewRGBA(image.Rect(0, 0, 64, 48))
	seed := time.Now().UnixNano()
	for i := range img.Pix {
		img.Pix[i] = byte(seed >> (i % 7 * 8))
		seed = seed*6364136223846793005 + 1442695040888963407
	}
	img.Set(0, 0, color.RGBA{1, 2, 3, 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(l.dir, "psi-photo.png")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256(buf.Bytes())
	sum := hex.EncodeToString(digest[:])
	l.files[sum] = "psi-photo.png"
	before := uploads(t, l.uploadDir())

	m, code, _ := l.deliver(path, "Bob")
	l.wantSentVerified(m, code)
	for upload := range l.wantExactlyOneCopyEach(before, sum) {
		l.wantLinkInBobsArchive(upload)
	}
	l.verifyBundle(m)
}

// TestLivePsiLeftoverDialog: an upload dialog left open (by a person, or a run that
// died) is dismissed with Escape before the delivery, which is then sent_verified once.
func TestLivePsiLeftoverDialog(t *testing.T) {
	l := newPsiLive(t)
	l.psiLeaveUploadDialog("psi-warm.txt")

	file, sum := l.file("psi-after-leftover.txt")
	before := uploads(t, l.uploadDir())
	m, code, _ := l.deliver(file, "Bob")
	l.wantSentVerified(m, code)
	l.wantExactlyOneCopyEach(before, sum)
}

// psiLeaveUploadDialog delivers a first file (named warm) to Bob, which opens his chat
// window, and then leaves its upload dialog open there, as a person or a run that died
// would.
func (l *liveRun) psiLeaveUploadDialog(warm string) {
	l.t.Helper()
	file, _ := l.file(warm)
	if m, code, _ := l.deliver(file, "Bob"); code != exitOK {
		l.t.Fatalf("the first delivery exited %d\n%s", code, describe(m))
	}
	l.psiOpenUploadDialog()
}

// psiOpenUploadDialog opens Psi+'s "Upload file" dialog in Bob's chat window, as a
// person would, and waits for it.
func (l *liveRun) psiOpenUploadDialog() {
	l.t.Helper()
	env := append(os.Environ(), "DISPLAY="+l.display())
	xdo := func(args ...string) string {
		cmd := exec.Command("xdotool", args...)
		cmd.Env = env
		out, _ := cmd.Output()
		return strings.TrimSpace(string(out))
	}
	win := strings.Fields(xdo("search", "--onlyvisible", "--name", "^Bob$"))
	if len(win) == 0 {
		l.t.Fatal("no Psi+ chat window titled Bob to open the upload dialog in")
	}
	xdo("windowactivate", "--sync", win[0])
	xdo("mousemove", "--window", win[0], "121", "726", "click", "1")
	deadline := time.Now().Add(5 * time.Second)
	for xdo("search", "--onlyvisible", "--name", "^Upload file$") == "" {
		if time.Now().After(deadline) {
			l.t.Fatal("Psi+'s upload dialog did not open")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// psiCrashPoints: Psi+ sends as the file is chosen, so a kill right after that act (at
// file_chosen, and at send_pressed, which comes at once) leaves an upload that may land.
var psiCrashPoints = []crashPoint{
	{name: "file_chosen", crossed: true, pressed: true, settled: []string{"send_status_unknown"}},
	{name: "send_pressed", crossed: true, pressed: true, settled: []string{"send_status_unknown"}},
}

// TestLivePsiCrash kills a Psi+ delivery after choose_file and after send, and checks
// what the crash matrix checks for Gajim: never two copies, the rerun refused, and the
// store saying what the server supports once reconcile has asked carol's archive.
func TestLivePsiCrash(t *testing.T) { crashMatrix(t, psiApp, psiCrashPoints) }

package evidence

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"image"
	"image/color"
	"image/draw"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/gate"
	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

const bundlesDir = "../testdata/bundles"

// synthFrame draws a small fake chat window with labelled texts and returns it with the
// word boxes of what it drew, as OCR would report them.
func synthFrame(lines ...string) (image.Image, []OCRWord) {
	img := image.NewRGBA(image.Rect(0, 0, 480, 300))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.RGBA{245, 245, 245, 255}}, image.Point{}, draw.Src)
	draw.Draw(img, image.Rect(0, 0, 480, 40), &image.Uniform{color.RGBA{60, 90, 160, 255}}, image.Point{}, draw.Src)
	var words []OCRWord
	for i, line := range lines {
		y := 26 + i*40
		col := color.Color(color.Black)
		if i == 0 {
			col = color.White
		}
		d := &font.Drawer{Dst: img, Src: image.NewUniform(col), Face: basicfont.Face7x13, Dot: fixed.P(20, y)}
		x := 20
		for _, w := range strings.Fields(line) {
			d.Dot = fixed.P(x, y)
			d.DrawString(w)
			words = append(words, OCRWord{Text: w, Box: Box{X: x, Y: y - 11, W: 7 * len(w), H: 13}, Confidence: 91})
			x += 7 * (len(w) + 1)
		}
	}
	return img, words
}

var testSigner = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))

// buildIntact writes a sealed, signed bundle of a verified text-file delivery.
func buildIntact(t *testing.T, dir string) {
	t.Helper()
	r, err := Create(dir, testManifest("report.txt", content), newStepClock())
	if err != nil {
		t.Fatal(err)
	}
	frame := func(lines ...string) (string, []OCRWord) {
		img, words := synthFrame(lines...)
		h, err := r.Frame(img)
		if err != nil {
			t.Fatal(err)
		}
		return h, words
	}
	chat, chatWords := frame("Bob", "hello there")
	mustAppend(t, r, Record{Kind: KindObserve, After: chat, OCR: []OCRRegion{{Frame: chat, Region: Box{0, 0, 480, 40}, Words: chatWords[:1]}},
		Observed: &Observation{What: "conversation_title", DispatchID: testDispatch, Title: "Bob"}})
	page, pageWords := frame("Bob", "Add Files", "Cancel Send Files")
	mustAppend(t, r, Record{Kind: KindStep, Intent: "open picker", Class: Safe, Target: &Target{Method: "shortcut"}, Inputs: []Input{KeyInput("ctrl+shift+u")}, Before: chat})
	mustAppend(t, r, Record{Kind: KindResult, Step: 2, After: page, OCR: []OCRRegion{{Frame: page, Region: Box{0, 40, 480, 260}, Words: pageWords[1:]}}})
	mustAppend(t, r, Record{Kind: KindGate, Gate: &GateUse{Action: "cross", Boundary: "choose_file", Token: 7, Decision: "crossed"}})
	chosen, chosenWords := frame("Bob", "report.txt 17 B", "Cancel Send Files")
	mustAppend(t, r, Record{Kind: KindStep, Intent: "choose file", Class: MaySubmit, Target: &Target{Method: "chooser_path"}, Inputs: []Input{KeyInput("ctrl+l"), TypedPath("/var/lib/sendonce/staging/ab/report.txt"), KeyInput("Return")}, Before: page})
	mustAppend(t, r, Record{Kind: KindResult, Step: 5, After: chosen, OCR: []OCRRegion{{Frame: chosen, Region: Box{0, 40, 480, 260}, Words: chosenWords[1:]}}})
	mustAppend(t, r, Record{Kind: KindObserve, Before: chat, Observed: &Observation{What: "sent_items", Phase: "before_send", DispatchID: testDispatch, Title: "Bob", AtBottom: true}})
	mustAppend(t, r, Record{Kind: KindGate, Gate: &GateUse{Action: "cross", Boundary: "send", Token: 7, Decision: "crossed"}})
	sendBox := chosenWords[len(chosenWords)-2]
	mustAppend(t, r, Record{Kind: KindStep, Intent: "press send", Class: Submit, Target: &Target{Method: "ocr_anchor", Words: []string{"Send", "Files"}, Box: &sendBox.Box, Confidence: 91}, Inputs: []Input{ClickInput(sendBox.Box.X+10, sendBox.Box.Y+6)}, Before: chosen})
	sent, sentWords := frame("Bob", "hello there", "report.txt 17 B")
	mustAppend(t, r, Record{Kind: KindResult, Step: 9, After: sent})
	for i := 0; i < 2; i++ { // two reads 500ms apart: the item held for the settle time
		mustAppend(t, r, Record{Kind: KindObserve, Intent: "look for the sent item", After: sent, OCR: []OCRRegion{{Frame: sent, Region: Box{0, 40, 480, 260}, Words: sentWords[3:]}},
			Observed: &Observation{What: "sent_items", Phase: "after_send", DispatchID: testDispatch, Title: "Bob", AtBottom: true, Items: []Item{{Name: "report.txt", Size: "17 B", Y: 109, Ours: true, Finished: true}}}})
		if i == 0 {
			mustAppend(t, r, Record{Kind: KindObserve, Intent: "read the conversation title", After: sent, Observed: &Observation{What: "conversation_title", DispatchID: testDispatch, Title: "Bob"}})
		}
	}
	b, err := Verify(dir, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := Classify(Transcript{Manifest: b.Manifest, Records: b.Records, Complete: true, Profile: b.Profile})
	if _, err := r.Seal(string(c.Outcome), c.Reasons, testSigner); err != nil {
		t.Fatal(err)
	}
}

func readRecords(t *testing.T, dir string) []Record {
	b, err := Verify(dir, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return b.Records
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func stepsLines(t *testing.T, dir string) []string {
	b, _ := os.ReadFile(filepath.Join(dir, "steps.jsonl"))
	return strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
}

func writeLines(dir string, lines []string) {
	s := strings.Join(lines, "")
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	os.WriteFile(filepath.Join(dir, "steps.jsonl"), []byte(s), 0o600)
}

func firstFrame(t *testing.T, dir string) string {
	m, _ := filepath.Glob(filepath.Join(dir, "frames", "*.png"))
	sort.Strings(m)
	return m[0]
}

// tamperCases: each makes one change to a copy of the intact bundle; verify must name it.
func tamperCases() []struct {
	name, want string
	tamper     func(t *testing.T, dir string)
} {
	return []struct {
		name, want string
		tamper     func(t *testing.T, dir string)
	}{
		{"edited-frame-byte", "was edited", func(t *testing.T, dir string) {
			p := firstFrame(t, dir)
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 1
			os.WriteFile(p, b, 0o600)
		}},
		{"edited-step-byte", "does not chain", func(t *testing.T, dir string) {
			l := stepsLines(t, dir)
			l[1] = strings.Replace(l[1], `"open picker"`, `"open pickle"`, 1)
			l[2] = strings.Replace(l[2], `"step":2`, `"step":2 `, 1) // keep later lines: the chain breaks at 3
			writeLines(dir, l)
		}},
		{"deleted-step", "was deleted", func(t *testing.T, dir string) {
			l := stepsLines(t, dir)
			writeLines(dir, append(l[:3], l[4:]...))
		}},
		{"reordered-steps", "reordered", func(t *testing.T, dir string) {
			l := stepsLines(t, dir)
			l[3], l[4] = l[4], l[3]
			writeLines(dir, l)
		}},
		{"duplicated-step", "was duplicated", func(t *testing.T, dir string) {
			l := stepsLines(t, dir)
			writeLines(dir, append(l[:5], append([]string{l[4]}, l[5:]...)...))
		}},
		{"missing-file", "missing file frames/", func(t *testing.T, dir string) { os.Remove(firstFrame(t, dir)) }},
		{"extra-file", "extra file notes.txt", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hi"), 0o600)
		}},
		{"truncated-log", "truncated", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "steps.jsonl")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-25], 0o600)
		}},
		{"dropped-last-steps-after-seal", "after sealing", func(t *testing.T, dir string) {
			l := stepsLines(t, dir)
			writeLines(dir, l[:len(l)-2])
		}},
		{"wrong-signature", "wrong signature", func(t *testing.T, dir string) {
			editFile(t, filepath.Join(dir, "seal.json"), `"outcome": "sent_verified"`, `"outcome": "not_sent"`)
		}},
		{"edited-profile", "profile.json was edited", func(t *testing.T, dir string) {
			editFile(t, filepath.Join(dir, "profile.json"), `"400ms"`, `"1ms"`)
		}},
		{"edited-manifest", "does not chain", func(t *testing.T, dir string) {
			editFile(t, filepath.Join(dir, "manifest.json"), `"task": "task-1"`, `"task": "task-2"`)
		}},
	}
}

// TestBundles regenerates (with -update) and verifies testdata/bundles: the intact
// bundle verifies, and each tamper folder fails with its problem named.
func TestBundles(t *testing.T) {
	intact := filepath.Join(bundlesDir, "intact")
	if *update { // testdata/bundles/v1 holds bundles of the older format: never rewritten
		os.RemoveAll(intact)
		os.RemoveAll(filepath.Join(bundlesDir, "tampered"))
		buildIntact(t, intact)
		for _, tc := range tamperCases() {
			dir := filepath.Join(bundlesDir, "tampered", tc.name)
			copyDir(t, intact, dir)
			tc.tamper(t, dir)
		}
	}
	b, err := Verify(intact, VerifyOptions{PublicKey: testSigner.Public().(ed25519.PublicKey)})
	if err != nil {
		t.Fatalf("intact bundle: %v", err)
	}
	if !b.Sealed() || len(b.Records) != 13 || ClassifyBundle(b).Outcome != "sent_verified" || b.Seal.KeyID != "ws-test" {
		t.Fatalf("intact bundle: sealed %v, %d records, %s", b.Sealed(), len(b.Records), ClassifyBundle(b).Outcome)
	}
	other := ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey)
	if _, err := Verify(intact, VerifyOptions{PublicKey: other}); err == nil || !strings.Contains(err.Error(), "another key") {
		t.Fatalf("verify with another key: %v", err)
	}
	cases := tamperCases()
	dirs, _ := filepath.Glob(filepath.Join(bundlesDir, "tampered", "*"))
	if len(dirs) != len(cases) {
		t.Fatalf("%d tamper folders, %d cases (go test ./evidence -update)", len(dirs), len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Verify(filepath.Join(bundlesDir, "tampered", tc.name), VerifyOptions{})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("verify: %v; want an error naming %q", err, tc.want)
			}
		})
	}
}

// TestOlderFormatStillVerifies: a bundle written in format v1 (before the recorded
// profile and the workstation key) still verifies, with its signature; it classifies
// by today's rules, and with no recorded profile no screen read can confirm it, so the
// delivery it once called sent_verified reads send_status_unknown now.
func TestOlderFormatStillVerifies(t *testing.T) {
	dir := filepath.Join(bundlesDir, "v1", "intact")
	b, err := Verify(dir, VerifyOptions{PublicKey: testSigner.Public().(ed25519.PublicKey)})
	if err != nil {
		t.Fatal(err)
	}
	if b.Manifest.Format != FormatV1 || b.Seal.Outcome != "sent_verified" || b.Profile != nil {
		t.Fatalf("format %s, sealed as %s, profile %q", b.Manifest.Format, b.Seal.Outcome, b.Profile)
	}
	if c := ClassifyBundle(b); c.Outcome != gate.SendStatusUnknown || c.FailClosed {
		t.Fatalf("classified %+v", c)
	}
}

func TestUnsealedBundleAfterCrashIsReadable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	r, err := Create(dir, testManifest("report.txt", content), newStepClock())
	if err != nil {
		t.Fatal(err)
	}
	h1 := mustAppend(t, r, step("open picker", Safe))
	h2 := mustAppend(t, r, step("choose file", MaySubmit))
	// No Close, no Seal: as a SIGKILL leaves it (every Append was flushed).
	b, err := Verify(dir, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Sealed() || len(b.Records) != 2 || b.Head() != h2 || !b.HasHead(h1) {
		t.Fatalf("unsealed bundle: sealed %v, %d records, head %s", b.Sealed(), len(b.Records), b.Head())
	}
	if c := ClassifyBundle(b); c.Outcome != "send_status_unknown" {
		t.Fatalf("crash after a may_submit step: %s", c.Outcome)
	}
}

func TestPrivacyModesAndTypedText(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	r, err := Create(dir, testManifest("report.txt", content), newStepClock())
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, r, Record{Kind: KindStep, Intent: "type a message", Class: Safe, Inputs: []Input{TypedText("secret words")}})
	img, _ := synthFrame("Bob")
	if _, err := r.Frame(img); err != nil {
		t.Fatal(err)
	}
	r.Seal("not_sent", nil, nil)
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		fi, _ := d.Info()
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %v; want %v", p, fi.Mode().Perm(), want)
		}
		return nil
	})
	b, _ := os.ReadFile(filepath.Join(dir, "steps.jsonl"))
	if strings.Contains(string(b), "secret") || !strings.Contains(string(b), `"length":12`) {
		t.Fatalf("typed text must be stored as its length only: %s", b)
	}
}

func TestFramesAreDeduplicated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	r, _ := Create(dir, testManifest("report.txt", content), newStepClock())
	img, _ := synthFrame("Bob")
	h1, _ := r.Frame(img)
	h2, _ := r.Frame(img)
	frames, _ := filepath.Glob(filepath.Join(dir, "frames", "*"))
	if h1 != h2 || len(frames) != 1 {
		t.Fatalf("same frame twice: %s %s, %d files", h1, h2, len(frames))
	}
}

// TestFrameHashFollowsThePixels: a frame equal to the last one is not hashed again, but
// that shortcut compares pixels, not images: the same image changed in place, changed
// back, copied, or seen two frames ago gets the hash of what it shows.
func TestFrameHashFollowsThePixels(t *testing.T) {
	r, _ := Create(filepath.Join(t.TempDir(), "b"), testManifest("report.txt", content), newStepClock())
	shown, _ := synthFrame("Bob")
	other, _ := synthFrame("Alice")
	img := shown.(*image.RGBA)
	h1, _ := r.Frame(img)
	img.Pix[0] ^= 0xff
	h2, _ := r.Frame(img)
	img.Pix[0] ^= 0xff
	again, _ := r.Frame(img)
	cp := *img
	cp.Pix = append([]byte(nil), img.Pix...)
	copied, _ := r.Frame(&cp)
	h3, _ := r.Frame(other)
	back, _ := r.Frame(img)
	if h1 == h2 || again != h1 || copied != h1 || h3 == h1 || h3 == h2 || back != h1 {
		t.Fatalf("hashes: first %s, changed %s, changed back %s, copied %s, other %s, first again %s", h1, h2, again, copied, h3, back)
	}
	for _, h := range []string{h1, h2, h3} {
		b, err := os.ReadFile(filepath.Join(r.dir, "frames", h+".png"))
		if err != nil || sum(b) != h {
			t.Fatalf("frame %s: %v", h, err)
		}
	}
}

func TestExportRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	if err := Export(filepath.Join(bundlesDir, "intact"), &buf); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "intact.tar.gz")
	os.WriteFile(archive, buf.Bytes(), 0o600)
	b, cleanup, err := Open(archive, VerifyOptions{})
	if err != nil {
		t.Fatalf("verify exported archive: %v", err)
	}
	defer cleanup()
	if !b.Sealed() || ClassifyBundle(b).Outcome != "sent_verified" {
		t.Fatal("archive does not round-trip")
	}
	// A truncated archive is refused.
	os.WriteFile(archive, buf.Bytes()[:buf.Len()/2], 0o600)
	if _, _, err := Open(archive, VerifyOptions{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("truncated archive: %v", err)
	}
}

func TestReportGolden(t *testing.T) {
	html := verifiedReport(t, filepath.Join(bundlesDir, "intact"))
	for _, want := range []string{"Outcome: SENT VERIFIED", "WEAK IDENTITY", "press send", "data:image/png;base64,", `class="box"`, "typed path /var/lib/sendonce/staging/ab/report.txt"} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	goldenCompare(t, "../testdata/report.golden.html", []byte(html))
}

// TestFramesAheadOfTheirRecord: a process killed after writing a frame and before
// appending the record that names it leaves the frame (whole, or cut short) in an
// unsealed bundle. Verify accepts the bundle and lists the file as unrecorded; any other
// extra file, and any unrecorded frame in a sealed bundle, still fails it.
func TestFramesAheadOfTheirRecord(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	r := bundleWithTitle(t, dir, "Bob")
	ahead, err := r.FramePNG([]byte("a frame whose record was never appended"))
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "frames", strings.Repeat("c", 64)+".png")
	if err := os.WriteFile(cut, []byte("\x89PNG cut sh"), 0o600); err != nil { // a write the kill cut short
		t.Fatal(err)
	}
	b, err := Verify(dir, VerifyOptions{})
	if err != nil {
		t.Fatalf("an unsealed bundle with frames ahead of their record: %v", err)
	}
	want := []string{"frames/" + ahead + ".png", "frames/" + strings.Repeat("c", 64) + ".png"}
	sort.Strings(want)
	if len(b.Records) != 1 || strings.Join(b.Unrecorded, " ") != strings.Join(want, " ") {
		t.Fatalf("%d records, unrecorded %v; want 1 record and %v", len(b.Records), b.Unrecorded, want)
	}

	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hi"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir, VerifyOptions{}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "extra file notes.txt") {
		t.Fatalf("an unsealed bundle with an extra file outside frames/: %v; want it refused", err)
	}
	os.Remove(filepath.Join(dir, "notes.txt"))

	os.Remove(cut)
	os.Remove(filepath.Join(dir, "frames", ahead+".png"))
	if _, err := r.Seal("not_sent", nil, testSigner); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir, VerifyOptions{}); err != nil {
		t.Fatalf("the sealed bundle: %v", err)
	}
	extra := filepath.Join(dir, "frames", sum([]byte("added after the seal"))+".png")
	if err := os.WriteFile(extra, []byte("added after the seal"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir, VerifyOptions{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a sealed bundle with a frame no record names: %v; want it refused", err)
	}
}

// TestCreateIsWholeOrAbsent: a bundle appears whole (manifest and steps file made in a
// hidden folder beside it, then renamed into place), with nothing else left beside it;
// a second bundle of the same name is refused as existing, and leaves nothing either.
func TestCreateIsWholeOrAbsent(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "b")
	r, err := Create(dir, testManifest("report.txt", content), newStepClock())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, name := range []string{"manifest.json", "steps.jsonl", "frames", "ocr"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("the new bundle lacks %s: %v", name, err)
		}
	}
	if _, err := Create(dir, testManifest("report.txt", content), newStepClock()); !errors.Is(err, fs.ErrExist) {
		t.Errorf("a second Create of %s: %v; want it refused as existing", dir, err)
	}
	entries, _ := os.ReadDir(parent)
	if len(entries) != 1 || entries[0].Name() != "b" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("beside the bundle: %v; want the bundle alone", names)
	}
}

// TestSealIsWholeOrAbsent: the seal is written beside the bundle and renamed into place,
// so a crash while sealing leaves the bundle unsealed (and verifiable), never with a
// seal cut short. What such a crash leaves beside it does not stop a later seal; a
// second sealer cannot replace the first's seal; a seal leaves nothing behind.
func TestSealIsWholeOrAbsent(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "b")
	bundleWithTitle(t, dir, "Bob").Close()
	leftover := filepath.Join(parent, ".b.seal-12345")
	if err := os.WriteFile(leftover, []byte(`{"format": "sendonce-evid`), 0o600); err != nil { // a seal the crash cut short
		t.Fatal(err)
	}
	if b, err := Verify(dir, VerifyOptions{}); err != nil || b.Sealed() {
		t.Fatalf("the bundle with a cut-short seal beside it: sealed %v, %v; want it verified, unsealed", b != nil && b.Sealed(), err)
	}

	first, err := Reopen(dir, newStepClock())
	if err != nil {
		t.Fatal(err)
	}
	second, err := Reopen(dir, newStepClock())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Seal("not_sent", nil, testSigner); err != nil {
		t.Fatalf("sealing beside a crash's leftover: %v", err)
	}
	want, err := os.ReadFile(filepath.Join(dir, "seal.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := second.Seal("sent_verified", nil, testSigner); !errors.Is(err, fs.ErrExist) {
		t.Errorf("a second seal: %v; want it refused, the first seal standing", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "seal.json")); !bytes.Equal(got, want) {
		t.Errorf("the second sealer changed seal.json")
	}
	if b, err := Verify(dir, VerifyOptions{}); err != nil || !b.Sealed() || b.Seal.Outcome != "not_sent" {
		t.Fatalf("after sealing: %v; want the first seal, verified", err)
	}
	entries, _ := os.ReadDir(parent)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != ".b.seal-12345 b" {
		t.Errorf("beside the bundle: %v; want the bundle and the crash's leftover only", names)
	}
}

// TestReportDrawsTreeReads: the report draws, on the frame after a step, the node the
// app's tree gave the step, and on an observation's frame the place of the tree's
// reading; it says what each source read and the cross-check's verdict.
func TestReportDrawsTreeReads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	r, err := Create(dir, testManifest("report.txt", content), newStepClock())
	if err != nil {
		t.Fatal(err)
	}
	img, _ := synthFrame("Bob")
	h, err := r.Frame(img)
	if err != nil {
		t.Fatal(err)
	}
	step := mustAppend(t, r, Record{Kind: KindStep, Intent: "wait for Open", Class: Safe})
	_ = step
	mustAppend(t, r, Record{Kind: KindResult, Step: 1, After: h, Target: &Target{Method: "accessibility_tree",
		Words: []string{`push button "Open" [sensitive showing] in file chooser "Choose File to Send…"`}, Box: &Box{X: 11, Y: 12, W: 13, H: 14}}})
	mustAppend(t, r, Record{Kind: KindObserve, After: h, Observed: &Observation{What: "conversation_title", DispatchID: testDispatch, Title: "Воb",
		Readings: []Reading{{Source: "accessibility_tree", Text: "Воb", Node: `label "Воb"`, Box: &Box{X: 21, Y: 22, W: 23, H: 24}},
			{Source: "ocr", Text: "Bob", Box: &Box{X: 20, Y: 20, W: 30, H: 30}, Verdict: "ocr_cannot_read", Why: "the text is in Cyrillic"}}}})
	r.Close()
	html := verifiedReport(t, dir)
	for _, want := range []string{
		`<rect class="node" x="11" y="12" width="13" height="14">`,
		`<rect class="node" x="21" y="22" width="23" height="24">`,
		`accessibility tree read &#34;Воb&#34;`,
		`ocr read &#34;Bob&#34; (ocr cannot read: the text is in Cyrillic)`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the report lacks %s", want)
		}
	}
}

// verifiedReport verifies the bundle in dir and returns its HTML report.
func verifiedReport(t *testing.T, dir string) string {
	t.Helper()
	b, err := Verify(dir, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteReport(&out, b, ClassifyBundle(b)); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

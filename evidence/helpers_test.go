package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata (corpus bundles, goldens) from the generators")

// stepClock advances 250ms on every reading, so generated bundles are byte-identical.
type stepClock struct{ t time.Time }

func newStepClock() *stepClock { return &stepClock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)} }
func (c *stepClock) Now() time.Time {
	c.t = c.t.Add(250 * time.Millisecond)
	return c.t
}

const testDispatch = "5f2c9a7e0b1d4c3a8e6f7a9b0c1d2e3f"

// testProfile is the profile the generated bundles record: the classifier reads its
// settle time (two reads 400ms apart; records are 250ms apart on the step clock).
var testProfile = []byte(`{"app": "gajim", "sizes_shown": false, "confirm": {"settle": "400ms"}}` + "\n")

func testManifest(name string, content []byte) Manifest {
	h := sha256.Sum256(content)
	return Manifest{
		Format: Format, Workstation: "ws-test", Profile: &ProfileUse{Source: "built-in", Text: testProfile},
		Keys:     []string{"v1:title:Bob:" + hex.EncodeToString(h[:])},
		Identity: "title:Bob", IdentityStrength: "weak", Title: "Bob", App: "gajim",
		Task: "task-1", Token: 7, DispatchID: testDispatch,
		ContentSHA256: hex.EncodeToString(h[:]), Size: int64(len(content)), FileName: name,
		ToolVersion: "sendonce test", Host: "testhost",
	}
}

// rawAppend appends a record given as a map, correctly chained, bypassing the
// recorder's checks: for unknown kinds and classes in the corpus.
func rawAppend(t *testing.T, dir string, rec map[string]any) {
	t.Helper()
	mb, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	sb, _ := os.ReadFile(filepath.Join(dir, "steps.jsonl"))
	head, seq := sum(mb), 0
	for _, line := range bytes.Split(bytes.TrimSuffix(sb, []byte("\n")), []byte("\n")) {
		if len(line) > 0 {
			head, seq = sum(line), seq+1
		}
	}
	rec["seq"], rec["prev"] = seq+1, head
	line, _ := json.Marshal(rec)
	f, err := os.OpenFile(filepath.Join(dir, "steps.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(append(line, '\n'))
	f.Close()
}

// bundleWithTitle creates a bundle at dir holding one record: the conversation title
// observed on a frame that shows it.
func bundleWithTitle(t *testing.T, dir, title string) *Recorder {
	t.Helper()
	r, err := Create(dir, testManifest("report.txt", content), newStepClock())
	if err != nil {
		t.Fatal(err)
	}
	observeTitle(t, r, title)
	return r
}

// observeTitle records title as observed on a frame that shows it.
func observeTitle(t *testing.T, r *Recorder, title string) {
	t.Helper()
	img, _ := synthFrame(title)
	h, err := r.Frame(img)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, r, Record{Kind: KindObserve, After: h, Observed: &Observation{What: "conversation_title", DispatchID: testDispatch, Title: title}})
}

func mustAppend(t *testing.T, r *Recorder, rec Record) string {
	t.Helper()
	h, err := r.Append(rec)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func goldenCompare(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./evidence -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

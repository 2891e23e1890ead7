package replay

import (
	"context"
	"errors"
	"image"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/vision"
	"github.com/sendonce/sendonce/vision/atspi"
)

// TestReplaceTyped: the recorded path reads as this run's wherever OCR read it as the
// recording typed it (split into words, a cursor after it, OCR's 0/O folded); a reading
// that is not the recorded path is left alone.
func TestReplaceTyped(t *testing.T) {
	const recorded, shown = "/tmp/a/0f3c/x.txt", "/run/b/77aa/x.txt"
	for _, tc := range []struct {
		read, want string
	}{
		{"/tmp/a/0f3c/x.txt", shown},
		{"/tmp/a/ 0f3c/x.txt|", shown + "|"},
		{"Open /tmp/a/O f3c/x.txt", "Open " + shown},
		{"/tmp/a/0f3/x.txt", "/tmp/a/0f3/x.txt"},     // a character short: not the recorded path
		{"/tmp/a/0f3cc/x.txt", "/tmp/a/0f3cc/x.txt"}, // one more, not at the end
		{"Cancel Open", "Cancel Open"},
	} {
		var ws []vision.Word
		for i, s := range strings.Fields(tc.read) {
			ws = append(ws, vision.Word{Text: s, Box: image.Rect(10+i*100, 5, 90+i*100, 20), Line: 1})
		}
		var got []string
		for _, w := range replaceTyped(ws, recorded, shown) {
			got = append(got, w.Text)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%q reads as %q; want %q", tc.read, strings.Join(got, " "), tc.want)
		}
	}
	// "m" for "rn": a file name's match folds it, the live read-back does not, so the
	// replay does not replace it either.
	ws := []vision.Word{{Text: "/tmp/a/m/x.txt", Box: image.Rect(10, 5, 90, 20), Line: 1}}
	if got := replaceTyped(ws, "/tmp/a/rn/x.txt", shown); got[0].Text != "/tmp/a/m/x.txt" {
		t.Errorf("a misread the live check rejects was replaced: %q", got[0].Text)
	}
}

// TestFieldText: the replay reads back what the run typed last (or what Shows makes of
// it), and moves past a recorded read_field input where the recording has one, staying
// put where an older recording has none; reading before anything was typed fails.
func TestFieldText(t *testing.T) {
	ctx := context.Background()
	chooser := driver.Window{ID: 7, Title: "Choose File to Send"}
	for _, tc := range []struct {
		name   string
		inputs []Input
		shows  func(string) string
		want   string
		after  int // inputs replayed after the read
	}{
		{"recorded", []Input{{Kind: "type", Text: "/tmp/a/x.txt"}, {Kind: "read_field", Text: chooser.Title}, {Kind: "key", Keys: "Return"}}, nil, "/tmp/b/x.txt", 2},
		{"recorded before read_field was", []Input{{Kind: "type", Text: "/tmp/a/x.txt"}, {Kind: "key", Keys: "Return"}}, nil, "/tmp/b/x.txt", 1},
		{"an app that lost a key", []Input{{Kind: "type", Text: "/tmp/a/x.txt"}}, func(s string) string { return strings.Replace(s, "b", "", 1) }, "/tmp//x.txt", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Driver{fx: &Fixture{Inputs: tc.inputs, States: make([]State, len(tc.inputs)+1)}, frames: map[string]*image.RGBA{}, Shows: tc.shows}
			if _, err := d.FieldText(ctx, chooser); err == nil {
				t.Fatal("a field read back before anything was typed")
			}
			if err := d.Type(ctx, "/tmp/b/x.txt"); err != nil {
				t.Fatal(err)
			}
			got, err := d.FieldText(ctx, chooser)
			if err != nil || got != tc.want {
				t.Fatalf("FieldText = %q, %v; want %q", got, err, tc.want)
			}
			if d.Inputs() != tc.after {
				t.Fatalf("%d inputs replayed after the read; want %d", d.Inputs(), tc.after)
			}
		})
	}
}

// fakeDesk is a live driver that does nothing: the recorder's inputs only count.
type fakeDesk struct{ driver.Driver }

func (fakeDesk) Bounds() image.Rectangle                  { return image.Rect(0, 0, 100, 100) }
func (fakeDesk) Key(context.Context, string) error        { return nil }
func (fakeDesk) Type(context.Context, string) error       { return nil }
func (fakeDesk) Click(context.Context, image.Point) error { return nil }
func (fakeDesk) Move(context.Context, image.Point) error  { return nil }

// fieldTree is an app whose field holds text, by scope: what each read was asked for.
type fieldTree struct{ text *string }

func (f fieldTree) Snapshot(_ context.Context, _ int, scope driver.TreeScope) (*atspi.Node, error) {
	name := "all"
	if scope.Windows != nil {
		name = scope.Windows.Name
	}
	return &atspi.Node{Role: "application", Children: []*atspi.Node{{Role: "frame", Name: name, Children: []*atspi.Node{{Role: "text", Text: *f.text}}}}}, nil
}

// TestTreesRecordedAndReplayed: a recording keeps, after each input, the last tree read
// for each scope; the replay answers a read with the last one recorded at or before the
// inputs replayed so far, with this run's typed text in place of the recording's, and a
// read the recording never made is ErrNoTree.
func TestTreesRecordedAndReplayed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rec, err := NewRecorder(fakeDesk{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	text := ""
	tree := rec.Tree(fieldTree{&text})
	chooser := driver.TreeScope{Windows: &atspi.Match{Name: "Choose File"}}
	tree.Snapshot(ctx, 1, chooser) // the empty field, before any input
	rec.Type(ctx, "/tmp/a/0f3c/x.txt")
	text = "/tmp/a/0f3c/x.txt"
	tree.Snapshot(ctx, 1, chooser)
	rec.Key(ctx, "Return")
	if err := rec.Save(Fixture{Name: "t", FileName: "x.txt"}, []byte("x")); err != nil {
		t.Fatal(err)
	}
	d, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !d.HasTrees() {
		t.Fatal("the fixture holds no tree")
	}
	read := func(scope driver.TreeScope) (string, error) {
		n, err := d.Tree().Snapshot(ctx, 0, scope)
		if err != nil {
			return "", err
		}
		return n.Children[0].Children[0].Text, nil
	}
	if got, err := read(chooser); err != nil || got != "" {
		t.Fatalf("before any input: %q, %v; want the empty field", got, err)
	}
	d.Type(ctx, "/run/b/77aa/x.txt")
	if got, err := read(chooser); err != nil || got != "/run/b/77aa/x.txt" {
		t.Fatalf("after typing: %q, %v; want this run's path where the recording shows its own", got, err)
	}
	d.Key(ctx, "Return")
	if got, err := read(chooser); err != nil || got != "/run/b/77aa/x.txt" {
		t.Fatalf("after the last input: %q, %v; want the last tree recorded before it", got, err)
	}
	if _, err := read(driver.TreeScope{Windows: &atspi.Match{Name: "Other"}}); !errors.Is(err, ErrNoTree) {
		t.Fatalf("a read never recorded: %v; want ErrNoTree", err)
	}
}

// TestMoveTheRecordingLacks: a pointer move the recording has is checked (its point
// too) and replayed like any input; one it lacks (a rest a profile gained after the recording) moves to
// no recorded state, while a click or key it lacks still diverges.
func TestMoveTheRecordingLacks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rec, err := NewRecorder(fakeDesk{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	rec.Move(ctx, image.Pt(10, 10))
	rec.Key(ctx, "Return")
	if err := rec.Save(Fixture{Name: "t", FileName: "x.txt"}, []byte("x")); err != nil {
		t.Fatal(err)
	}
	d, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Move(ctx, image.Pt(200, 200)); err == nil {
		t.Fatal("a move far from the recorded one replayed; want it to diverge")
	}
	if err := d.Move(ctx, image.Pt(10, 10)); err != nil || d.Inputs() != 1 {
		t.Fatalf("the recorded move: %v, %d inputs replayed; want it replayed", err, d.Inputs())
	}
	if err := d.Move(ctx, image.Pt(34, 400)); err != nil || d.Inputs() != 1 {
		t.Fatalf("a move the recording lacks: %v, %d inputs replayed; want no error and nothing replayed", err, d.Inputs())
	}
	if err := d.Key(ctx, "Return"); err != nil || d.Inputs() != 2 {
		t.Fatalf("the recorded key after it: %v; want it replayed", err)
	}
	if err := d.Click(ctx, image.Pt(1, 1)); err == nil {
		t.Fatal("a click the recording lacks replayed; want it to diverge")
	}
}

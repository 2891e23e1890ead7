package driver

import (
	"context"
	"errors"
	"fmt"
	"image"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/vision"
)

// TestConversationWindow: a profile whose app opens each conversation in a window of its
// own works in the one window titled exactly as the conversation, once open_conversation
// has run; none, or two, stop the delivery before any boundary.
func TestConversationWindow(t *testing.T) {
	roster := Window{ID: 1, Process: "x", Title: "X", Viewable: true, Bounds: image.Rect(0, 0, 200, 300)}
	bob := Window{ID: 2, Process: "x", Title: "Bob", Viewable: true, Bounds: image.Rect(0, 20, 1280, 800)}
	bobby := Window{ID: 3, Process: "x", Title: "Bobby", Viewable: true, Bounds: image.Rect(0, 20, 1280, 800)}
	otherApp := Window{ID: 4, Process: "y", Title: "Bob", Viewable: true}
	hidden := Window{ID: 5, Process: "x", Title: "Bob", Viewable: false}
	for name, tc := range map[string]struct {
		ws   []Window
		want uint32 // 0: stopped
	}{
		"the one titled exactly so":         {[]Window{roster, bobby, bob, otherApp, hidden}, 2},
		"a prefix is not the title":         {[]Window{roster, bobby}, 0},
		"two of them":                       {[]Window{roster, bob, {ID: 6, Process: "x", Title: "Bob", Viewable: true}}, 0},
		"another app's window of that name": {[]Window{roster, otherApp}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			r := &Runner{Driver: windowsOnly{ws: tc.ws}, Profile: &Profile{App: "x", Process: "x", ConversationWindow: "{{title}}",
				Timings: Timings{TitleDeadline: Duration{300 * time.Millisecond}}}, Vars: Vars{Title: "Bob"}}
			r.window = roster
			err := r.enterConversation(context.Background())
			switch {
			case tc.want == 0 && !errors.Is(err, ErrStopped):
				t.Fatalf("%v; want the delivery stopped", err)
			case tc.want != 0 && (err != nil || r.window.ID != tc.want):
				t.Fatalf("window %d, %v; want window %d", r.window.ID, err, tc.want)
			}
		})
	}
}

// TestHoverOffsetMovesWithoutClicking: hover_offset puts the pointer at an offset of the
// window (from its bottom when negative) and clicks nothing.
func TestHoverOffsetMovesWithoutClicking(t *testing.T) {
	desk := &pointer{windowsOnly: windowsOnly{ws: []Window{{ID: 1, Process: "x", Title: "X", Viewable: true, Bounds: image.Rect(0, 19, 1280, 800)}}}}
	rec, err := evidence.Create(t.TempDir()+"/bundle", evidence.Manifest{Keys: []string{"v2:title:Bob:" + strings.Repeat("a", 64)}, Identity: "title:Bob", IdentityStrength: "weak",
		Title: "Bob", App: "x", Task: "t", Token: 1, DispatchID: strings.Repeat("b", 32), ContentSHA256: strings.Repeat("a", 64), Size: 1, FileName: "f", ToolVersion: "test", Host: "test"}, evidence.SystemClock())
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	r := &Runner{Driver: desk, Reader: &vision.Reader{Screen: desk, OCR: readsBob{}}, Rec: rec, Profile: &Profile{App: "x", Process: "x"}}
	r.window = desk.ws[0]
	if err := r.run(context.Background(), Step{Name: "point at the button", Do: "hover_offset", Offset: &image.Point{X: 121, Y: -55}, Class: evidence.Safe}); err != nil {
		t.Fatal(err)
	}
	if len(desk.clicks) != 0 || len(desk.moves) != 1 || desk.moves[0] != image.Pt(121, 800-55) {
		t.Fatalf("moves %v, clicks %v; want one move to (121,745) and no click", desk.moves, desk.clicks)
	}
}

// TestNameInLinks: an app that shows a sent file as its download link names the file
// in the link's last segment, however OCR splits the link; another name, or the name
// inside a segment, is not it.
func TestNameInLinks(t *testing.T) {
	for line, want := range map[string]string{
		"[20:00:12] <carol> https://localhost:22329/upload/DHzEzeg/report.txt":         "report.txt",
		"[20:00:12] <carol> https://localhost:22329/upload/DhfzdczAm2 7feOZ/photo.png": "photo.png",
		"<carol> https://h/upload/x/my%20report.txt":                                   "my report.txt",
		"<carol> https://h/upload/x/report.txt.exe":                                    "",
		"<carol> https://h/upload/report.txt/other.txt":                                "",
		"report.txt and nothing else":                                                  "report.txt",
	} {
		name := want
		if want == "" {
			name = "report.txt"
		}
		got, ok := nameIn(line, name)
		if ok != (want != "") || got != want {
			t.Errorf("nameIn(%q, %q) = %q, %v; want %q", line, name, got, ok, want)
		}
	}
}

// TestInlineHeaders: with inline headers an item belongs to the header on its own line;
// without, only to one above it.
func TestInlineHeaders(t *testing.T) {
	line := func(y int) vision.Line { return vision.Line{Box: image.Rect(10, y, 700, y+16)} }
	heads := []header{{line: line(100), author: "<carol>"}, {line: line(140), author: "<bob>"}}
	if h, ok := headerAbove(heads, line(140), true); !ok || h.author != "<bob>" {
		t.Errorf("inline: the item on bob's line belongs to %q, %v; want <bob>", h.author, ok)
	}
	if h, ok := headerAbove(heads, line(140), false); !ok || h.author != "<carol>" {
		t.Errorf("not inline: the item below carol's header belongs to %q, %v; want <carol>", h.author, ok)
	}
	if _, ok := headerAbove(heads, line(60), true); ok {
		t.Errorf("an item above every header belongs to none")
	}
}

// reads is an OCR that reads the same words everywhere.
type reads []vision.Word

func (w reads) Recognize(context.Context, image.Image, vision.Mode) ([]vision.Word, error) {
	return append([]vision.Word(nil), w...), nil
}

// TestRegionFromAnchor: a region placed from an anchor follows where the anchor's text
// shows; an anchor that does not show, or shows twice, places nothing; a profile that
// asks for one without a size is refused.
func TestRegionFromAnchor(t *testing.T) {
	win := Window{ID: 1, Process: "x", Title: "X", Viewable: true, Bounds: image.Rect(0, 0, 1280, 800)}
	desk := &pointer{windowsOnly: windowsOnly{ws: []Window{win}}}
	// Words as OCR gives them: in the searched image (the window's bottom 200 pixels).
	attach := vision.Word{Text: "Attach", Box: image.Rect(300, 100, 350, 115), Confidence: 95, Line: 1}
	reg := &Region{X: -10, Y: -40, W: 200, H: 30, From: &RegionAnchor{Text: "Attach", Region: Region{X: 0, Y: -200, W: 0, H: 0}}}
	for name, tc := range map[string]struct {
		words reads
		want  image.Rectangle // empty: an error
	}{
		"found once":  {reads{attach}, image.Rect(290, 660, 490, 690)},
		"not showing": {reads{{Text: "Send", Box: image.Rect(10, 10, 40, 20), Line: 1}}, image.Rectangle{}},
		"twice":       {reads{attach, {Text: "Attach", Box: image.Rect(300, 150, 350, 165), Line: 2}}, image.Rectangle{}},
	} {
		t.Run(name, func(t *testing.T) {
			r := &Runner{Driver: desk, Reader: &vision.Reader{Screen: desk, OCR: tc.words}, Profile: &Profile{App: "x", Process: "x"}}
			r.window = win
			got, err := r.region(context.Background(), Step{Region: reg})
			if tc.want.Empty() != (err != nil) || got != tc.want {
				t.Fatalf("region %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	bad := strings.Replace(minimal("x"), `"choose_file":[`, `"choose_file":[{"name":"wait","do":"wait_text","class":"safe","text":"a","region":{"x":0,"y":0,"w":0,"h":10,"from":{"text":"b","region":{"x":0,"y":0,"w":0,"h":0}}}},`, 1)
	if _, err := ParseProfile([]byte(bad)); err == nil || !strings.Contains(err.Error(), "positive w and h") {
		t.Fatalf("a region from an anchor without a width: %v; want it refused", err)
	}
}

// TestPeerMessageCannotBeClicked: a step that searches for a control to click may not
// search the chat while the conversation shows: profile check refuses it, and a profile
// given as a value (unvalidated) is refused at the click, with no input sent, when only
// a peer's message shows the label. A send page that covers the chat lifts the rule.
func TestPeerMessageCannotBeClicked(t *testing.T) {
	profile := func(sendRegion string, covers bool) string {
		return `{"app":"x","process":"x","send_page_covers_chat":` + strconv.FormatBool(covers) + `,
		 "chat":{"region":{"x":0,"y":50,"w":0,"h":-100}},
		 "choose_file":[{"name":"c","do":"key","keys":"Return","class":"may_submit","crosses":"choose_file"}],
		 "send":[{"name":"press send","do":"click_text","text":"Send","region":` + sendRegion + `,"class":"submit","crosses":"send"}]}`
	}
	if _, err := ParseProfile([]byte(profile(`{"x":0,"y":-60,"w":0,"h":0}`, false))); err != nil {
		t.Fatalf("a send button searched for below the chat: %v; want it accepted", err)
	}
	if _, err := ParseProfile([]byte(profile(`{"x":0,"y":0,"w":0,"h":0}`, false))); err == nil || !strings.Contains(err.Error(), "peer's message") || !strings.Contains(err.Error(), "send step 1 (press send)") {
		t.Fatalf("a send button searched for over the whole window: %v; want it refused, naming the step", err)
	}
	if _, err := ParseProfile([]byte(profile(`{"x":0,"y":0,"w":0,"h":0}`, true))); err != nil {
		t.Fatalf("the same with a send page that covers the chat: %v; want it accepted", err)
	}

	// At run time: only a peer's message in the chat reads "Send".
	win := Window{ID: 1, Process: "x", Title: "X", Viewable: true, Bounds: image.Rect(0, 0, 800, 600)}
	desk := &pointer{windowsOnly: windowsOnly{ws: []Window{win}}}
	rec, err := evidence.Create(t.TempDir()+"/bundle", evidence.Manifest{Keys: []string{"v2:title:Bob:" + strings.Repeat("a", 64)}, Identity: "title:Bob", IdentityStrength: "weak",
		Title: "Bob", App: "x", Task: "t", Token: 1, DispatchID: strings.Repeat("b", 32), ContentSHA256: strings.Repeat("a", 64), Size: 1, FileName: "f", ToolVersion: "test", Host: "test"}, evidence.SystemClock())
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	peer := reads{{Text: "Send", Box: image.Rect(100, 300, 140, 315), Confidence: 95, Line: 1}}
	r := &Runner{Driver: desk, Reader: &vision.Reader{Screen: desk, OCR: peer}, Rec: rec,
		Profile: &Profile{App: "x", Process: "x", Chat: Read{Region: Region{X: 0, Y: 50, W: 0, H: -100}}}}
	r.window, r.phase = win, "send"
	err = r.act(context.Background(), Step{Name: "press send", Do: "click_text", Text: "Send", Class: evidence.Submit, Timeout: Duration{time.Second}}, 1)
	if err == nil || !strings.Contains(err.Error(), "peer's message") || len(desk.clicks) != 0 {
		t.Fatalf("%v, clicks %v; want the click refused before any search, none sent", err, desk.clicks)
	}
}

// TestSendPageProof: which proof a profile has for a file, and what profile check says
// of the files it cannot prove.
func TestSendPageProof(t *testing.T) {
	names := &Profile{App: "x"}
	previews := &Profile{App: "x", NamesShownFor: []string{"*.txt", "*.PDF"}, ItemMark: `\d+ kB`}
	blind := &Profile{App: "x", NamesShownFor: []string{"*.txt"}}
	choosing := &Profile{App: "x", NamesShownFor: []string{"*.txt"}, ChooseFile: []Step{{Crosses: choosingSends}}}
	narrow := &Profile{App: "x", NameShownChars: 12}
	for _, tc := range []struct {
		p          *Profile
		file, want string
	}{
		{names, "chart.png", ProofName},
		{previews, "notes.TXT", ProofName},
		{previews, "report.pdf", ProofName},
		{previews, "chart.png", ProofDifference},
		{blind, "chart.png", ""},
		{blind, "a.txt", ProofName},
		{choosing, "chart.png", ProofTypedPath},
		{narrow, "twelve.chars", ProofName},
		{narrow, "报告-第三季度-最终版.pdf", ""}, // 15 characters, 24 cells
		{narrow, "报告-第三.pdf", ""},       // 9 characters, 13 cells
		{narrow, "报告-三.pdf", ProofName}, // 8 characters, 11 cells
		{narrow, "thirteen.char", ""},
		{narrow, "café-noël.txt", ""},                     // 13 characters
		{narrow, "cafe\u0301-noe\u0308l.tx", ProofName},   // 14 code points, 12 cells: two combining accents
		{narrow, "отчёт-2026.txt", ""},                    // 14 cells: Cyrillic is narrow
		{narrow, "отчёт-26.txt", ProofName},               // 12
		{narrow, "🎉🎉-party.txt", ""},                      // 13 characters, 15 cells
		{narrow, "\u2764\ufe0f\u2764\ufe0f-love.txt", ""}, // 11 characters and 2 selectors, 13 cells: two hearts drawn as emoji
		{narrow, "\u2764\u2764-love.txt", ProofName},      // 12 cells: the hearts as text
	} {
		if got := tc.p.SendPageProof(tc.file); got != tc.want {
			t.Errorf("%+v: SendPageProof(%s) = %q; want %q", tc.p.NamesShownFor, tc.file, got, tc.want)
		}
	}
	if s := blind.Summary().OneItemOurs; !strings.Contains(s, "NOTHING can prove it") || !strings.Contains(s, "refuses such a file before the claim") {
		t.Errorf("profile check of a profile that cannot prove previews says: %s", s)
	}
	if s := previews.Summary().OneItemOurs; !strings.Contains(s, "by difference") {
		t.Errorf("profile check of a profile that proves previews by difference says: %s", s)
	}
	if _, err := ParseProfile([]byte(strings.Replace(minimal("x"), `"process":"x",`, `"process":"x","item_mark":"(",`, 1))); err == nil || !strings.Contains(err.Error(), "item_mark") {
		t.Errorf("a bad item_mark: %v; want it refused", err)
	}
}

// TestNameShownCharsIsCells: a negative name_shown_chars is refused, saying what it is.
func TestNameShownCharsIsCells(t *testing.T) {
	base := `{"app":"x","process":"x","name_shown_chars":%d,"choose_file":[{"name":"c","do":"key","keys":"Return","class":"may_submit","crosses":"choose_file"}],"send":[{"name":"s","do":"key","keys":"Return","class":"submit","crosses":"send"}]}`
	if _, err := ParseProfile([]byte(fmt.Sprintf(base, -1))); err == nil || !strings.Contains(err.Error(), "name_shown_chars -1") {
		t.Errorf("name_shown_chars -1: %v; want it refused", err)
	}
	if p, err := ParseProfile([]byte(fmt.Sprintf(base, 16))); err != nil || p.NameShownChars != 16 {
		t.Errorf("name_shown_chars 16: %v", err)
	}
}

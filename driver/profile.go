package driver

import (
	"encoding/json"
	"fmt"
	"image"
	"regexp"
	"slices"
	"time"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/vision"
)

// Profile is how to deliver a file through one chat app, as data: a new app needs a new
// profile, not new Go code.
type Profile struct {
	App         string `json:"app"`
	Process     string `json:"process"`      // the app's process name, to pick its window
	WindowTitle string `json:"window_title"` // the main window's title
	// Processes and ProcessPattern match other process names too (apps name their
	// processes differently from their packages); WindowTitlePattern matches the main
	// window's title instead of WindowTitle. Patterns match the whole name.
	Processes          []string `json:"processes,omitempty"`
	ProcessPattern     string   `json:"process_pattern,omitempty"`
	WindowTitlePattern string   `json:"window_title_pattern,omitempty"`
	UploadLimitBytes   int64    `json:"upload_limit_bytes"`
	// ConversationWindow is the exact title (templates allowed: "{{title}}") of the
	// window an app opens each conversation in, when that is not the main window: once
	// open_conversation has run, the runner works in that window (every read, click and
	// region), and there must be exactly one.
	ConversationWindow string `json:"conversation_window,omitempty"`
	// Timings are the runner's waits, for an app slower or faster than the defaults.
	Timings Timings `json:"timings"`
	// Title is where the conversation's visible title is read.
	Title Read `json:"title"`
	// RegionsIn says what the profile's regions (title, chat, send page, and the steps'
	// own in the app's window) are placed in: "" the app's window; "page" the web page
	// that shows in it, as its tree's one showing "document web" gives it (a Chromium or
	// Electron app, or a web app in a browser tab: the tab strip, the address bar and a
	// warning bar move the page, not what is on it). "page" needs the tree.
	RegionsIn string `json:"regions_in,omitempty"`
	// Tree says whether deliveries need the app's accessibility tree: "required" stops
	// a delivery, before anything is touched, when the app publishes none; "" (the
	// default) lets OCR read in its place (the steps that name a node fall back to their
	// OCR fields; wait_node and click_node steps, which have none, stop), and the result
	// and the evidence say so.
	Tree string `json:"tree,omitempty"`
	// OCRLanguages are the OCR languages this app's deliveries read in when the user
	// names none (--ocr-lang, SENDONCE_OCR_LANGS): Tesseract's names joined by +
	// ("eng+chi_sim"); English when empty.
	OCRLanguages string `json:"ocr_languages,omitempty"`
	// Chat is where sent items show; SendPage is where the send page lists chosen files.
	Chat     Read `json:"chat"`
	SendPage Read `json:"send_page"`
	// SizesShown: the app shows a file item's size; a sent item confirms only with it.
	SizesShown bool `json:"sizes_shown"`
	// SendPageCoversChat: once the send page is open (choose_file and send), it covers
	// the conversation, so a peer's message cannot show through it. Without it, a step
	// that searches for a control to click while the conversation shows may not search
	// the chat region: a peer's message quoting the control's label could be clicked.
	SendPageCoversChat bool `json:"send_page_covers_chat,omitempty"`
	// NamesShownFor are the files (path.Match patterns of the base name, in lower case)
	// whose name the send page shows; every file when empty. An app that shows some
	// files (images, say) only as a preview proves "exactly one item, ours" for them by
	// difference, with ItemMark, or cannot send them at all.
	NamesShownFor []string `json:"names_shown_for,omitempty"`
	// NameShownChars is the longest name, in character cells (a CJK character or an
	// emoji takes two, a combining accent none), the send page shows whole (0: any). A
	// longer name shows cut (a one-line field scrolled to its end), so the page
	// cannot prove it by name: it takes ItemMark, or deliver refuses the file before
	// the claim.
	NameShownChars int `json:"name_shown_chars,omitempty"`
	// ItemMark is a regular expression that each item on the send page shows once,
	// whatever the file (a size, a type label, a caption). With it, a file whose name
	// the send page does not show is proven the one item by difference: the send page
	// holds no mark when choose_file begins and exactly one when it ends, with no input
	// in between but choose_file's own steps.
	ItemMark string `json:"item_mark,omitempty"`
	// SentItemTimeout bounds the look for the sent item after the send.
	SentItemTimeout Duration `json:"sent_item_timeout"`
	// Confirm is how the screen shows a sent item of ours, finished. Without it no
	// screen read can confirm a delivery (only the provider can).
	Confirm *Confirm `json:"confirm,omitempty"`
	// SendPageMark is text that shows while the send page is open: the final read after
	// a stop reads the send page's items only then.
	SendPageMark *Mark `json:"send_page_mark,omitempty"`
	// Phases, in order. open_picker, choose_file and send are the gate's boundaries:
	// choose_file holds exactly one may_submit step and send exactly one submit step.
	Clean            []Step `json:"clean"`
	OpenConversation []Step `json:"open_conversation"`
	OpenPicker       []Step `json:"open_picker"`
	ChooseFile       []Step `json:"choose_file"`
	Send             []Step `json:"send"`
	// Dismiss closes the send page without sending (Escape only), after a stop.
	Dismiss []Step `json:"dismiss"`

	// Text is the profile as written, and Source where it came from ("built-in"): the
	// evidence bundle records both.
	Text   []byte `json:"-"`
	Source string `json:"-"`
}

// Timings are the waits the runner makes; zero keeps each default.
type Timings struct {
	StepTimeout   Duration `json:"step_timeout"`   // a step's wait when it names none (10s)
	TitleDeadline Duration `json:"title_deadline"` // how long the title may take to read the same twice (4s)
	EscapeSettle  Duration `json:"escape_settle"`  // after each Escape of escape_text (400ms)
	WindowClose   Duration `json:"window_close"`   // for a window to close after its Escape (3s)
	// FocusSettle is no longer waited: a key waits for the keyboard focus to be in its
	// window (the focus guard). Kept so that profiles that set it still load.
	FocusSettle Duration `json:"focus_settle"`
}

func or(d Duration, def time.Duration) time.Duration {
	if d.Duration > 0 {
		return d.Duration
	}
	return def
}

func (t Timings) stepTimeout() time.Duration   { return or(t.StepTimeout, 10*time.Second) }
func (t Timings) titleDeadline() time.Duration { return or(t.TitleDeadline, 4*time.Second) }

// SentItemWait is how long the look for the sent item goes on: its
// sent_item_timeout, 20 s when not set.
func (p *Profile) SentItemWait() time.Duration {
	return or(p.SentItemTimeout, 20*time.Second)
}

func (t Timings) escapeSettle() time.Duration { return or(t.EscapeSettle, 400*time.Millisecond) }
func (t Timings) windowClose() time.Duration  { return or(t.WindowClose, 3*time.Second) }

// MatchesProcess says whether a process name (ProcessName) is the app's.
func (p *Profile) MatchesProcess(name string) bool {
	if name == p.Process || slices.Contains(p.Processes, name) {
		return true
	}
	return p.ProcessPattern != "" && regexp.MustCompile(`^(?:`+p.ProcessPattern+`)$`).MatchString(name)
}

// matchesTitle says whether a window's title is the app's main window's.
func (p *Profile) matchesTitle(title string) bool {
	if p.WindowTitlePattern != "" {
		return regexp.MustCompile(`^(?:` + p.WindowTitlePattern + `)$`).MatchString(title)
	}
	return p.WindowTitle == "" || title == p.WindowTitle
}

// Mark is text that shows in a region while something is on screen.
type Mark struct {
	Text   string      `json:"text"`
	Region Region      `json:"region"`
	Prep   vision.Prep `json:"prep"`
	// AltPreps are tried in turn, on the same capture, when Prep does not find the text.
	AltPreps []vision.Prep `json:"alt_preps,omitempty"`
}

// Read is a region of the app window and how to read it.
type Read struct {
	Region Region      `json:"region"`
	Prep   vision.Prep `json:"prep"`
	// AltPreps (the chat only) are tried in turn, on the same capture, when a read after
	// send with Prep does not show the new item: OCR of one frame may join or split a
	// file's name where another preparation of it does not.
	AltPreps []vision.Prep `json:"alt_preps,omitempty"`
	Mode     string        `json:"mode"` // "sparse" (default), "block", "single_line"
	// Window reads Region in the window with this title prefix (an app that shows its
	// send page, say, in a window of its own) instead of the main window.
	Window string `json:"window,omitempty"`
	// Node (send_page) names one item of the send page's list in the app's tree: each
	// node that shows, matches and has its middle inside Region is an item, named by its first label that is not a
	// size, sized by the first that is; the check wants exactly one, named exactly as
	// the file, and OCR of the name where it shows must agree with it.
	//
	//	"send_page": {..., "node": {"role": "list item", "under": {"role": "list box"}}}
	//
	// Node (title) reads the text from the app's accessibility tree: the one
	// node that shows, matches, and has its middle inside Region. Its name is the exact
	// value compared; OCR of its extents (with Prep and Mode) must agree with it as far
	// as OCR can (vision.Check). Without a tree, the title is read by OCR of Region, and
	// the result says so.
	//
	//	"title": {"region": {"x": 480, "y": 24, "w": -20, "h": 58}, "mode": "single_line",
	//	          "node": {"role": "label", "states": ["has-tooltip"]}}
	//
	// Node (chat) names one message row of the conversation: each node that shows,
	// matches and has its middle inside Region is a row, and the text of every node in
	// it is read as a word where it shows, the app's exact words in place of OCR's. The
	// confirm rules then apply as they do to OCR's words (the author's ink is read from
	// the same capture). An item's name is compared exactly, and OCR of its row on the
	// same capture must agree with it (OCR reads no other row, except in the last look
	// after a stop); after the send, an item whose two readings disagree confirms
	// nothing.
	//
	//	"chat": {..., "node": {"role": "list item", "under": {"role": "list box"}}}
	Node *NodeMatch `json:"node,omitempty"`
}

// OCRMode is the vision mode a Read names.
func (r Read) OCRMode() vision.Mode { return ocrMode(r.Mode) }

func ocrMode(s string) vision.Mode {
	switch s {
	case "block":
		return vision.Block
	case "single_line":
		return vision.SingleLine
	}
	return vision.Sparse
}

// Region is a rectangle in window coordinates. A negative X or Y counts from the
// window's right or bottom edge; a W or H of zero or less reaches to that edge minus |W|.
// A Centred region is a W×H overlay centred in the window (a dialog drawn over it),
// offset by X and Y: it follows the window's size, where fixed offsets would not.
// A region From an anchor is W×H at X, Y from the top-left of the anchor's text, found
// (exactly once) where From says: it follows what the screen shows. Steps and the
// title, chat and send page reads take one; the confirm and mark regions do not.
type Region struct {
	X       int           `json:"x"`
	Y       int           `json:"y"`
	W       int           `json:"w"`
	H       int           `json:"h"`
	Centred bool          `json:"centred,omitempty"`
	From    *RegionAnchor `json:"from,omitempty"`
}

// RegionAnchor is the text a region is placed from, and where (and how) to find it.
type RegionAnchor struct {
	Text   string      `json:"text"` // templates allowed
	Region Region      `json:"region"`
	Prep   vision.Prep `json:"prep"`
}

// In resolves the region inside window bounds w, in screen coordinates.
func (r Region) In(w image.Rectangle) image.Rectangle {
	if r.Centred {
		wd, ht := min(max(r.W, 0), w.Dx()), min(max(r.H, 0), w.Dy())
		x0 := w.Min.X + (w.Dx()-wd)/2 + r.X
		y0 := w.Min.Y + (w.Dy()-ht)/2 + r.Y
		return image.Rect(x0, y0, x0+wd, y0+ht).Intersect(w)
	}
	x, y := r.X, r.Y
	if x < 0 {
		x += w.Dx()
	}
	if y < 0 {
		y += w.Dy()
	}
	wd, ht := r.W, r.H
	if wd <= 0 {
		wd = w.Dx() + wd - x
	}
	if ht <= 0 {
		ht = w.Dy() + ht - y
	}
	return image.Rect(w.Min.X+x, w.Min.Y+y, w.Min.X+x+wd, w.Min.Y+y+ht).Intersect(w)
}

// String is a region as a profile writes it.
func (r Region) String() string { return fmt.Sprintf("x %d, y %d, w %d, h %d", r.X, r.Y, r.W, r.H) }

// Step is one action of a phase. Every field, with an example (the built-in profiles in
// driver/profiles hold many more):
type Step struct {
	// Name is what the progress lines and the evidence call the step:
	// "name": "open the file chooser".
	Name string `json:"name"`
	// Do is the step's kind (the stepKinds table): "do": "click_text".
	Do string `json:"do"`
	// Class is what the step can do to the delivery: "safe", "may_submit" (it may send
	// the file: choosing it, in an app that sends on choosing) or "submit" (it sends).
	// A may_submit or submit step runs only with a fresh pass from the store, and the
	// evidence judges its inputs whatever its class says: "class": "safe".
	Class evidence.Class `json:"class"`
	// Crosses names the boundary a may_submit or submit step crosses; "choose_file,send"
	// is an app whose choosing of the file already sends it (no separate send control):
	// that one submit step crosses both, durably, before its single act, and the send
	// phase is empty: "crosses": "choose_file".
	Crosses string `json:"crosses,omitempty"`
	// Keys (key) is the chord to press: "keys": "ctrl+shift+u".
	Keys string `json:"keys,omitempty"`
	// Text is the text to type (type_text, recorded as its length only), to find
	// (click_text, hover_text, wait_text, wait_gone, escape_text) or to read back
	// (read_field), with templates {{address}} {{file_name}} {{file_path}} {{title}}:
	// "text": "{{address}}".
	Text string `json:"text,omitempty"`
	// Window is a window's title prefix. wait_window, wait_window_gone and
	// escape_window wait for or dismiss that window; read_field reads its focused
	// field. On a step that types (key, type_text, type_path, read_field, escape_text)
	// it is the window the keyboard focus must be in before any key goes out (the main
	// window when absent); a step that reads the screen reads inside it:
	// "window": "Choose File to Send".
	Window string `json:"window,omitempty"`
	// Region is where the step looks, in the window's coordinates; the whole window when
	// absent: "region": {"x": 420, "y": 560, "w": 0, "h": 160}.
	Region *Region `json:"region,omitempty"`
	// Prep prepares the capture for OCR: "prep": {"Gray": true, "Scale": 2}.
	Prep vision.Prep `json:"prep"`
	// AltPreps are tried in turn when Prep does not find the text (OCR of light text on
	// a coloured button depends on the scale): "alt_preps": [{"Gray": true, "Scale": 3}].
	AltPreps []vision.Prep `json:"alt_preps,omitempty"`
	// Mode is OCR's layout: "sparse" (default), "block" or "single_line":
	// "mode": "single_line".
	Mode string `json:"mode,omitempty"`
	// Exact matches a line that is the text and nothing else, not a phrase within a
	// line: "exact": true ("Open" alone, not "Open With…").
	Exact bool `json:"exact,omitempty"`
	// Timeout bounds a waiting step (the profile's default when absent): "timeout": "5s".
	Timeout Duration `json:"timeout,omitempty"`
	// Offset (click_offset, hover_offset) is where to act, from the window's top-left
	// (negative: from the right or bottom edge): "offset": {"X": -60, "Y": -30}.
	Offset *image.Point `json:"offset,omitempty"`
	// Repeat (escape_window, escape_text) is at most how many Escapes: "repeat": 2.
	Repeat int `json:"repeat,omitempty"`
	// Confusable matches words the way file names are matched: OCR's 1/l and 0/O
	// confusions folded (never for a destination's title, which must match exactly):
	// "confusable": true.
	Confusable bool `json:"confusable,omitempty"`
	// Suffix matches a word that ends with the wanted text (a path in a location field
	// ends with the file name): "suffix": true.
	Suffix bool `json:"suffix,omitempty"`
	// WholeLine (wait_text) matches a line that is the wanted text and nothing else, spaces
	// and a trailing text cursor removed, character for character (as evidence.PathMatches
	// compares them): the location field read back in full before the file is chosen,
	// "{{file_path}}", so that a character the app lost anywhere in the path stops the
	// delivery, not only one of the file's name: "whole_line": true.
	WholeLine bool `json:"whole_line,omitempty"`
	// AfterChange (wait_text): the text counts only in a frame whose region differs from
	// the same region captured before the phase's last input step. A check that gates a
	// boundary (the typed path) cannot then pass on what the field showed before the
	// input (a name the chooser filled in, from an earlier attempt): "after_change": true.
	AfterChange bool `json:"after_change,omitempty"`
	// If makes the step conditional: it runs only when this text shows (read once, no
	// wait); otherwise it is skipped, and the evidence says so. Only a safe step may be:
	// "if": {"text": "Replace", "window": "Choose File"}.
	If *Condition `json:"if,omitempty"`
	// Node names a node of the app's accessibility tree: the app's own words, where OCR
	// reads its pixels (sendonce inspect prints the tree). wait_node waits until exactly
	// one node that shows matches it, wait_node_gone until none does, click_node clicks
	// the middle of the one that does. On wait_text, click_text and wait_gone it is read
	// in place of the step's text, and on click_offset and hover_offset the node's middle
	// is where they act, where the app's tree answered when the delivery began; the
	// step's OCR fields or offset are its fallback. On wait_node, wait_node_gone and
	// click_node, a region narrows the nodes to those whose middle shows inside it: a web
	// page names many controls alike (a "Menu" button on every row). E.g. the chooser's
	// Open button once it can be pressed:
	//
	//	{"name": "wait for Open", "do": "wait_node", "class": "safe", "timeout": "5s",
	//	 "node": {"role": "push button", "name": "Open", "states": ["sensitive"],
	//	          "under": {"role": "dialog", "name": "Choose File to Send…"}}}
	Node *NodeMatch `json:"node,omitempty"`
	// Color (wait_color) is the colour the step's region must turn, nine pixels in ten
	// within ColorTolerance (Euclidean distance in RGB; 24 when absent): a state the app
	// shows only as colour, such as a modal popup dimming the window, read where no
	// peer's message can paint: "color": [105, 105, 105].
	Color          *RGB    `json:"color,omitempty"`
	ColorTolerance float64 `json:"color_tolerance,omitempty"`
	// AppearsAfterChoosing marks a step after the choosing (a click, or a wait for a
	// control to go) whose control shows only once the file is chosen, such as nheko's
	// upload bar. Every other such control is looked for before the file is chosen
	// (look before the leap), unless its step is conditional (if), names the chosen
	// file ({{file_name}}, {{file_path}}) or acts in a window of its own: one that
	// cannot be found or read then stops the delivery not_sent, where after the
	// choosing it would use up the key:
	// "appears_after_choosing": true.
	AppearsAfterChoosing bool `json:"appears_after_choosing,omitempty"`
}

// Condition is text that shows in a region (of the main window, or of the window
// named) for a conditional step to run.
type Condition struct {
	Text   string      `json:"text"`
	Region *Region     `json:"region,omitempty"`
	Window string      `json:"window,omitempty"`
	Prep   vision.Prep `json:"prep"`
	Mode   string      `json:"mode,omitempty"`
}

// TreeRequired is Profile.Tree for a profile that reads nothing without the tree.
const TreeRequired = "required"

// RegionsInPage is Profile.RegionsIn for a profile whose regions are a web page's.
const RegionsInPage = "page"

// choosingSends is the Crosses of a step that chooses the file and thereby sends it.
const choosingSends = "choose_file,send"

// ReadsTree says whether the profile reads the app's accessibility tree: its title, or
// a step.
func (p *Profile) ReadsTree() bool {
	if p.Title.Node != nil || p.SendPage.Node != nil || p.Chat.Node != nil {
		return true
	}
	for _, ph := range [][]Step{p.Clean, p.OpenConversation, p.OpenPicker, p.ChooseFile, p.Send, p.Dismiss} {
		for _, s := range ph {
			if s.Node != nil {
				return true
			}
		}
	}
	return false
}

// ChoosingSends says whether choosing the file already sends it: choose_file's one
// crossing step crosses choose_file and send.
func (p *Profile) ChoosingSends() bool {
	for _, s := range p.ChooseFile {
		if s.Crosses == choosingSends {
			return true
		}
	}
	return false
}

// Duration is a time.Duration written as "5s" in JSON.
type Duration struct{ time.Duration }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

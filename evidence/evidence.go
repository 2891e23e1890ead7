// Package evidence records what a delivery attempt did, step by step, in a bundle a
// person can verify and read, and decides an attempt's outcome from that record.
//
// A bundle is a directory:
//
//	manifest.json        the attempt: keys, identity and its strength, task, token,
//	                     dispatch id, the content's SHA-256, size and name, tool, host,
//	                     workstation, and the SHA-256 of the profile that drove the app
//	profile.json         (v2) the full text of that profile, as it was used
//	steps.jsonl          one record a line, hash-chained: each line carries the SHA-256
//	                     of the line before (the first, of manifest.json)
//	frames/<sha256>.png  screenshots, stored once by content
//	ocr/<sha256>.json    OCR output too large to keep in a line
//	seal.json            once sealed: the outcome, the chain head, every file's SHA-256,
//	                     and the ed25519 signature of the workstation that sealed it
//
// Each record is written and flushed to disk before the action it announces, so a crash
// leaves a readable, unsealed bundle, and a crossing written to the gate store carries
// the chain head of that moment, so steps dropped from an unsealed bundle are detected
// against the store. Classify decides an outcome from the records alone, and side-effect
// evidence outranks any label a transcript carries about itself.
package evidence

import (
	"errors"
	"time"
)

// Format is the bundle format this package writes. v2 added the recorded profile
// (profile.json, Manifest.Profile), the workstation id (Manifest.Workstation,
// Seal.KeyID), and what the screen showed of each item (Item.Y, Ours, Finished;
// Observation.AtBottom). A reader accepts every format in Formats and refuses any other.
const Format = FormatV2

const (
	FormatV1 = "sendonce-evidence/v1"
	FormatV2 = "sendonce-evidence/v2"
)

// Formats are the bundle formats this package reads, oldest first.
var Formats = []string{FormatV1, FormatV2}

func knownFormat(f string) bool { return f == FormatV1 || f == FormatV2 }

// ErrInvalid marks a bundle or transcript that cannot be trusted: unreadable, truncated,
// tampered, of an unknown version, or holding an unknown record kind.
var ErrInvalid = errors.New("evidence cannot be trusted")

// Manifest is the attempt a bundle records.
type Manifest struct {
	Format           string    `json:"format"`
	Keys             []string  `json:"keys"`
	Identity         string    `json:"identity"`          // "title:Bob" or "xmpp:bob@localhost"
	IdentityStrength string    `json:"identity_strength"` // "strong" or "weak"
	Title            string    `json:"title,omitempty"`   // the exact visible title expected on screen
	App              string    `json:"app,omitempty"`
	Task             string    `json:"task"`
	Token            uint64    `json:"token"`
	DispatchID       string    `json:"dispatch_id"`
	ContentSHA256    string    `json:"content_sha256"`
	Size             int64     `json:"size"`
	FileName         string    `json:"file_name"`
	ToolVersion      string    `json:"tool_version"`
	Host             string    `json:"host"`
	StartedAt        time.Time `json:"started_at"`
	// Workstation is the id of the workstation that made the bundle: its sealing key is
	// registered in the store under this id (v2).
	Workstation string `json:"workstation,omitempty"`
	// Profile is the profile that drove the app (v2): its text is profile.json.
	Profile *ProfileUse `json:"profile,omitempty"`
}

// ProfileUse names the profile an attempt used. Its text is kept in the bundle, under
// the chain: the manifest holds its SHA-256, and the manifest's hash starts the chain.
type ProfileUse struct {
	Source     string `json:"source"` // "built-in"
	SHA256     string `json:"sha256"` // of profile.json
	AppVersion string `json:"app_version,omitempty"`
	// Text is the profile's full text, written to profile.json by Create.
	Text []byte `json:"-"`
}

// Kind is a record's kind. Persisted: append-only, spelling never changes.
type Kind string

const (
	KindStep    Kind = "step"    // an action is about to run: written before any input
	KindResult  Kind = "result"  // what an action left on screen
	KindObserve Kind = "observe" // something read from the screen, no input sent
	KindLookup  Kind = "lookup"  // a provider lookup for this dispatch
	KindGate    Kind = "gate"    // a gate decision or crossing
	KindLabel   Kind = "label"   // a status the executor states about itself (never decides)
)

func knownKind(k Kind) bool {
	switch k {
	case KindStep, KindResult, KindObserve, KindLookup, KindGate, KindLabel:
		return true
	}
	return false
}

// Class is how close a step comes to sending.
type Class string

const (
	Safe      Class = "safe"       // cannot submit anything
	MaySubmit Class = "may_submit" // may submit (a picker accepting a file: some apps send at once)
	Submit    Class = "submit"     // submits (pressing send)
)

func knownClass(c Class) bool { return c == Safe || c == MaySubmit || c == Submit }

// Record is one line of steps.jsonl. Which fields are set depends on Kind.
type Record struct {
	Seq  int       `json:"seq"`
	Prev string    `json:"prev"` // SHA-256 of the previous line, or of manifest.json for the first
	Kind Kind      `json:"kind"`
	Wall time.Time `json:"wall"`
	Mono int64     `json:"mono_ns"` // nanoseconds since the attempt began, from a monotonic clock

	// step
	Intent string  `json:"intent,omitempty"` // "open picker", "choose file", "press send", "look for the sent item"
	Class  Class   `json:"class,omitempty"`
	Target *Target `json:"target,omitempty"`
	Inputs []Input `json:"inputs,omitempty"`

	// step, result, observe
	Before string      `json:"before,omitempty"` // frame SHA-256
	After  string      `json:"after,omitempty"`  // frame SHA-256
	OCR    []OCRRegion `json:"ocr,omitempty"`
	OCRRef string      `json:"ocr_ref,omitempty"` // SHA-256 of ocr/<sha>.json when the OCR is large
	Step   int         `json:"step,omitempty"`    // result: the seq of the step it ends
	Error  string      `json:"error,omitempty"`

	Observed *Observation `json:"observed,omitempty"`
	Lookup   *Lookup      `json:"lookup,omitempty"`
	Gate     *GateUse     `json:"gate,omitempty"`
	Label    string       `json:"label,omitempty"`
}

// Target is how a step found what it acted on.
type Target struct {
	Method     string   `json:"method"` // "shortcut", "ocr_anchor", "template", "window_offset", "chooser_path", "x_selection" (a field's text, read through the X selection), "accessibility_tree", "color" (a region's colour, wait_color)
	Words      []string `json:"words,omitempty"`
	Box        *Box     `json:"box,omitempty"`
	Confidence float64  `json:"confidence,omitempty"`
	Window     string   `json:"window,omitempty"`
}

// Box is a rectangle in screen pixels.
type Box struct {
	X int `json:"x"`
	Y int `json:"y"`
	W int `json:"w"`
	H int `json:"h"`
}

// Input is one input event sent. Typed text that is not a file path is kept as its
// length only.
type Input struct {
	Kind   string `json:"kind"` // "key", "click", "move", "type_text", "type_path"
	Keys   string `json:"keys,omitempty"`
	X      int    `json:"x,omitempty"`
	Y      int    `json:"y,omitempty"`
	Path   string `json:"path,omitempty"`
	Length int    `json:"length,omitempty"`
}

// KeyInput records a key or chord, e.g. "ctrl+shift+u".
func KeyInput(keys string) Input { return Input{Kind: "key", Keys: keys} }

// ClickInput records a click at screen coordinates.
func ClickInput(x, y int) Input { return Input{Kind: "click", X: x, Y: y} }

// MoveInput is the pointer moved to (x, y) without a click: a hover.
func MoveInput(x, y int) Input { return Input{Kind: "move", X: x, Y: y} }

// TypedText records typed text by its length only.
func TypedText(s string) Input { return Input{Kind: "type_text", Length: len([]rune(s))} }

// TypedPath records a typed file path in full: it names what was sent.
func TypedPath(p string) Input { return Input{Kind: "type_path", Path: p} }

// OCRRegion is the words read in one region of a frame.
type OCRRegion struct {
	Frame  string    `json:"frame"` // frame SHA-256
	Region Box       `json:"region"`
	Words  []OCRWord `json:"words"`
}

// OCRWord is one recognised word with its box and confidence (0-100).
type OCRWord struct {
	Text       string  `json:"text"`
	Box        Box     `json:"box"`
	Confidence float64 `json:"confidence"`
}

// Observation is something read from the screen.
type Observation struct {
	What       string `json:"what"`            // "sent_items", "conversation_title", "send_page_items", "send_page_marks", "condition", "accessibility_tree"
	Phase      string `json:"phase,omitempty"` // "before_send", "after_send" or "final" (required for sent_items)
	DispatchID string `json:"dispatch_id"`     // the attempt this observation was made for
	Title      string `json:"title,omitempty"`
	Items      []Item `json:"items,omitempty"`
	// SizesShown says the app shows each item's size: a sent item then confirms only
	// with its size read and matching.
	SizesShown bool `json:"sizes_shown,omitempty"`
	// AtBottom: the conversation view showed its end (the profile's mark of a view
	// scrolled up was absent), so nothing newer lay below what was read (v2).
	AtBottom bool `json:"at_bottom,omitempty"`
	// Present is a conditional step's condition as read: its text showed, or not (and
	// the step was skipped). Title then holds the text looked for.
	Present *bool `json:"present,omitempty"`
	// Marks is how many item marks (the profile's item_mark) the send page showed, for
	// an item proven ours by difference (a preview without its name).
	Marks *int `json:"marks,omitempty"`
	// Readings are each source's reading of what Title holds, where there were two: the
	// app's accessibility tree (whose text Title is) and OCR of the screen where the
	// node showed, with the cross-check's verdict (v2).
	Readings []Reading `json:"readings,omitempty"`
}

// Reading is one source's reading of a fact: the app's accessibility tree
// ("accessibility_tree"), or OCR of the screen ("ocr").
type Reading struct {
	Source string `json:"source"`
	Text   string `json:"text"`
	// Node is the node read, as sendonce inspect prints it, with its ancestors.
	Node string `json:"node,omitempty"`
	Box  *Box   `json:"box,omitempty"` // where it was read, in screen pixels
	// Verdict is the cross-check of an OCR reading against the tree's text: agree,
	// disagree, or ocr_cannot_read (the text's script is not among the OCR languages).
	Verdict string `json:"verdict,omitempty"`
	Why     string `json:"why,omitempty"`
}

// Item is a file item the app shows: its name, and its size as displayed where shown,
// and what the screen showed around it.
type Item struct {
	Name string `json:"name"`
	Size string `json:"size,omitempty"` // as displayed, e.g. "17 B" or "1.2 MB"
	// Y is the top of the item's name line in screen pixels (v2).
	Y int `json:"y,omitempty"`
	// Ours: the item sits under a message header whose author is drawn the way the app
	// draws our own side (the profile's outgoing colour), which a peer cannot choose.
	Ours bool `json:"ours,omitempty"`
	// Finished: the item is a message the app finished sending (a message row with an
	// author, no progress shown), not a transfer in progress.
	Finished bool `json:"finished,omitempty"`
}

// Lookup is a provider lookup's answer for a dispatch.
type Lookup struct {
	Provider      string `json:"provider"`
	DispatchID    string `json:"dispatch_id"`
	Result        string `json:"result"` // "found", "absent", "cant_tell"
	ObjectID      string `json:"object_id,omitempty"`
	SHA256        string `json:"sha256,omitempty"`
	Recipient     string `json:"recipient,omitempty"` // canonical identity, e.g. "xmpp:bob@localhost"
	Authoritative bool   `json:"authoritative,omitempty"`
}

// GateUse is a gate decision used at a step.
type GateUse struct {
	Action   string `json:"action"` // "claim", "check", "cross", "record"
	Boundary string `json:"boundary,omitempty"`
	Token    uint64 `json:"token,omitempty"`
	Decision string `json:"decision"` // "ok", "refused", "crossed"
	Reason   string `json:"reason,omitempty"`
}

package driver

import (
	"context"
	"errors"
	"image"
	"time"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/internal/clock"
	"github.com/sendonce/sendonce/vision"
)

// The conversation as OCR reads it: the items named like the file before the send, and
// the look for the new sent item of ours after it.

// observeItems reads the chat for items named like the file, the conversation's title
// and whether the view is at its end, and records what it read.
func (r *Runner) observeItems(ctx context.Context, phase string) ([]evidence.Item, error) {
	o, err := r.readChat(ctx, phase, nil)
	if err != nil {
		return nil, err
	}
	return o.Items, r.recordChat(o)
}

// chatRead is one read of the chat, not yet recorded.
type chatRead struct {
	phase   string
	look    vision.Look
	pix     uint64      // the pixel hash of look.Frame
	reused  bool        // the words are an earlier read's of the same pixels
	end     *image.RGBA // the end-blank region's capture, when the profile has one
	endRect image.Rectangle
	title   string
	Items   []evidence.Item
	atEnd   bool
	// From the tree (chat.node): the readings of each item's name, the nodes read.
	readings []evidence.Reading
	target   *evidence.Target
}

// readChat reads the chat from a capture that held still. A capture whose pixels equal
// those an earlier read (prev, when not nil) read shows the same words and items: OCR
// does not run on them again.
func (r *Runner) readChat(ctx context.Context, phase string, prev *chatRead) (chatRead, error) {
	c := r.Profile.Chat
	region, err := r.area(ctx, c)
	if err != nil {
		return chatRead{}, err
	}
	frame, pix, err := r.Reader.CaptureSettled(ctx, region)
	if err != nil {
		return chatRead{}, err
	}
	out := chatRead{phase: phase, pix: pix}
	if prev != nil && prev.pix == pix && prev.look.Region == region {
		// The same pixels show the same rows: neither OCR nor the tree is read again.
		out.look, out.Items, out.reused = vision.Look{Region: region, Frame: frame, Words: prev.look.Words}, prev.Items, true
		out.readings, out.target = prev.readings, prev.target
	} else if err := r.readChatFrame(ctx, &out, frame, region); err != nil {
		return chatRead{}, err
	}
	if cf := r.confirm(); cf != nil {
		out.endRect = cf.EndBlank.In(r.placed())
		if out.end, err = r.Driver.Capture(ctx, out.endRect); err != nil {
			return chatRead{}, err
		}
		out.atEnd = blank(out.end)
	}
	// A title whose two sources disagree, or that the tree cannot give, is no title: the
	// read confirms nothing, and still shows what the chat holds.
	title, err := r.readTitle(ctx)
	switch {
	case errors.Is(err, ErrNoTree) || errors.Is(err, errTitleAmbiguous):
	case err != nil:
		return chatRead{}, err
	case !title.tree || title.check.Verdict != vision.Disagree:
		out.title = title.text
	}
	return out, nil
}

// readChatFrame reads the items in frame, a capture of the chat's region, into o. With
// the tree, OCR reads only the rows of the tree's items named as the file (the words
// their cross-check and the progress rule need): a read of the whole capture grows with
// the conversation's text, and finds nothing the tree's items use. OCR reads the whole
// capture without a tree, when the tree gives no read, and in the last look after a
// stop, where OCR's other items are kept beside the tree's (itemsFromTree).
func (r *Runner) readChatFrame(ctx context.Context, o *chatRead, frame *image.RGBA, region image.Rectangle) error {
	c := r.Profile.Chat
	whole := func() (vision.Look, error) { return r.Reader.ReadFrame(ctx, frame, region, c.Prep, c.OCRMode()) }
	var t chatTree
	var err error
	switch {
	case !r.treeChat():
		if o.look, err = whole(); err != nil {
			return err
		}
		o.Items = r.items(o.look)
		return nil
	case o.phase == "final":
		tree := make(chan chatTree, 1) // read while OCR reads the capture
		go func() { tree <- r.readChatTree(ctx, region) }()
		o.look, err = whole()
		t = <-tree
	default:
		if t = r.readChatTree(ctx, region); t.err != nil {
			o.look, err = whole()
		} else {
			o.look, err = r.readItemRows(ctx, frame, region, t)
		}
	}
	if err != nil {
		return err
	}
	o.Items = r.items(o.look)
	return r.itemsFromTree(ctx, o, t)
}

// rereadChat reads a chat capture that did not show the new item again with each of
// the profile's other preparations, and returns the first read that shows it (or o).
// It stops early, returning o, once the other witness (when not nil) has confirmed.
func (r *Runner) rereadChat(ctx context.Context, o chatRead, before []evidence.Item, witnessed <-chan struct{}) (chatRead, error) {
	if o.target != nil {
		return o, nil // the items are the tree's: another OCR read changes none
	}
	for _, prep := range r.Profile.Chat.AltPreps {
		if isClosed(witnessed) {
			break
		}
		look, err := r.Reader.ReadFrame(ctx, o.look.Frame, o.look.Region, prep, r.Profile.Chat.OCRMode())
		if err != nil {
			return o, err
		}
		alt := o
		alt.look, alt.Items = look, r.items(look)
		if r.showsNew(alt, before) {
			return alt, nil
		}
	}
	return o, nil
}

func (r *Runner) recordChat(o chatRead) error {
	h, _ := r.Rec.Frame(o.look.Frame)
	ocr := ocrWords(h, o.look.Region, o.look.Words)
	if o.end != nil {
		eh, _ := r.Rec.Frame(o.end)
		ocr = append(ocr, evidence.OCRRegion{Frame: eh, Region: box(o.endRect)}) // no words: blank or not is in the frame
	}
	_, err := r.appendRecord(evidence.Record{Kind: evidence.KindObserve, Intent: "look for sent items", After: h, OCR: ocr, Target: o.target,
		Observed: &evidence.Observation{What: "sent_items", Phase: o.phase, DispatchID: r.dispatchID(), Title: o.title, Items: o.Items,
			SizesShown: r.Profile.SizesShown, AtBottom: o.atEnd, Readings: o.readings}})
	return err
}

// lookForSentItem waits for a new finished item of ours with the file's name (more of
// them than before the send), then reads again after the profile's settle time: the
// classifier confirms only an item held in two reads that far apart. It records those
// reads, or the last one. Not finding one is not an error: the evidence then reads as
// unknown.
func (r *Runner) lookForSentItem(ctx context.Context, before []evidence.Item) error {
	timeout := r.Profile.SentItemWait()
	settle := time.Duration(0)
	if c := r.confirm(); c != nil {
		settle = c.Settle.Duration
	}
	var witnessed <-chan struct{} // nil, never closed, without a witness
	if r.Witness != nil {
		witnessed = r.Witness()
	}
	start := r.now()
	var last, prev *chatRead
	held, elsewhere := false, false
	for !held && !elsewhere {
		o, err := r.readChat(ctx, "after_send", prev)
		if err == nil && !o.reused && !r.showsNew(o, before) {
			o, err = r.rereadChat(ctx, o, before, witnessed)
		}
		if err == nil {
			last, prev = &o, &o
			if r.showsNew(o, before) {
				if err := r.recordChat(o); err != nil {
					return err
				}
				last = nil
				if elsewhere = settleOrWitness(ctx, settle, witnessed); elsewhere {
					break
				}
				if o2, err := r.readChat(ctx, "after_send", &o); err == nil {
					last, held = &o2, r.showsNew(o2, before)
				}
			}
		}
		elsewhere = isClosed(witnessed)
		if held || elsewhere || r.now().Sub(start) > timeout || ctx.Err() != nil {
			break
		}
		clock.Sleep(ctx, 100*time.Millisecond)
	}
	var err error
	n := 0
	if last != nil {
		err, n = r.recordChat(*last), len(last.Items)
	}
	by := ""
	if elsewhere && !held {
		by = ", the other witness confirmed it"
	}
	r.progress("%-10s %-32s %d item(s) named %s, %d before, held %v%s (%.1fs)", "safe", "look for the sent item", n, r.Vars.FileName, len(before), held, by, r.now().Sub(start).Seconds())
	return err
}

// settleOrWitness waits the settle time, and reports true if the witness confirmed
// first.
func settleOrWitness(ctx context.Context, settle time.Duration, witnessed <-chan struct{}) bool {
	t := time.NewTimer(settle)
	defer t.Stop()
	select {
	case <-witnessed:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return isClosed(witnessed)
}

// isClosed: c is closed (never, for a nil channel).
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// showsNew is the runner's cue to stop looking: more finished items of ours with the
// file's size than items that could have been ours before, with the view at its end.
// The classifier decides from the records, with its own rules.
func (r *Runner) showsNew(o chatRead, before []evidence.Item) bool {
	n := 0
	for _, it := range o.Items {
		if it.Ours && it.Finished && evidence.SizeMatches(it.Size, r.Vars.Size) && (it.Size != "" || !r.Profile.SizesShown) {
			n++
		}
	}
	return o.atEnd && o.title == r.Vars.Title && n > countSized(before, r.Vars.Size, false)
}

func countSized(items []evidence.Item, size int64, needSize bool) int {
	n := 0
	for _, it := range items {
		if evidence.SizeMatches(it.Size, size) && (it.Size != "" || !needSize) {
			n++
		}
	}
	return n
}

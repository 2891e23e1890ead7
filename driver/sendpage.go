package driver

import (
	"context"
	"fmt"
	"image"
	"regexp"
	"strings"
	"time"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/vision"
	"github.com/sendonce/sendonce/vision/atspi"
)

// The send page: what it holds before the send (one item, ours: by its name, or by
// difference), read by OCR, or from the app's tree where the profile names its items
// (send_page.node). From the tree, each item's name and size are the app's own words,
// so a name in any script is compared exactly, and OCR of the name where it shows must
// agree with it.

// pageItems is the send page as its tree shows it.
type pageItems struct {
	items  []evidence.Item // the items named exactly as the file
	all    int             // every item the page lists, whatever its name
	names  []*atspi.Node   // the name node of each item in items
	target *evidence.Target
}

// treeSendPage says whether the send page is read from the tree.
func (r *Runner) treeSendPage() bool {
	return r.Profile.SendPage.Node != nil && r.treeOK
}

// readPageTree reads the send page's items from the tree: each node that shows,
// matches send_page.node and has its middle inside send_page's region is an item; its
// name is its first label that is not a size, its size the first label that is one.
func (r *Runner) readPageTree(ctx context.Context) (pageItems, error) {
	region, err := r.area(ctx, r.Profile.SendPage)
	if err != nil {
		return pageItems{}, err
	}
	root, found, err := r.nodesIn(ctx, r.Profile.SendPage.Node.match(r.Vars), region, false)
	if err != nil {
		return pageItems{}, fmt.Errorf("reading the send page: %w", err)
	}
	out := pageItems{all: len(found)}
	var read []*atspi.Node
	for _, it := range found {
		var name, size *atspi.Node
		for _, l := range (atspi.Match{Role: "label", Showing: true}).Find(it) {
			switch {
			case size == nil && sizePattern.MatchString(l.Name) && strings.TrimSpace(sizePattern.ReplaceAllString(l.Name, "")) == "":
				size = l
			case name == nil && l.Name != "":
				name = l
			}
		}
		if name == nil || !atspi.Same(name.Name, r.Vars.FileName) {
			continue
		}
		item := evidence.Item{Name: name.Name}
		if size != nil {
			item.Size = size.Name
		}
		if e := name.Extents; e != nil {
			item.Y = e.Y
		}
		out.items, out.names = append(out.items, item), append(out.names, name)
		read = append(read, name)
		if size != nil {
			read = append(read, size)
		}
	}
	out.target = nodeTarget(root, read)
	return out, nil
}

// crossCheckName reads by OCR where the app says the item's name shows: the read must
// agree with the name (crossCheck), or be in a script OCR does not read.
func (r *Runner) crossCheckName(ctx context.Context, n *atspi.Node) (vision.CrossCheck, vision.Look, image.Rectangle, error) {
	e := drawn(n)
	if e == nil {
		return vision.CrossCheck{Exact: nodeText(n), Verdict: vision.Disagree, Why: "the app gives the name no place on screen"}, vision.Look{}, image.Rectangle{}, nil
	}
	at := rectOf(*e).Inset(-2).Intersect(r.Driver.Bounds())
	c, look, err := r.crossCheck(ctx, nodeText(n), at, vision.Prep{Gray: true, Scale: 2})
	return c, look, at, err
}

// crossPreps are the other preparations a cross-check reads the same capture with
// before it calls a reading a disagreement: OCR of one preparation adds or drops a
// glyph ("mecp-report.txt") where another reads it as drawn.
var crossPreps = []vision.Prep{{Gray: true, Scale: 3, Smooth: true}, {Gray: true, Scale: 2, Smooth: true}, {Gray: true, Scale: 4}}

// crossCheck reads at by OCR, one line, with prep and then, until one agrees, with each
// of crossPreps on the same capture; it returns the first agreeing reading's check, else
// the first reading's (the pixels the evidence keeps).
func (r *Runner) crossCheck(ctx context.Context, exact string, at image.Rectangle, prep vision.Prep) (vision.CrossCheck, vision.Look, error) {
	look, err := r.Reader.Read(ctx, at, prep, vision.SingleLine)
	if err != nil {
		return vision.CrossCheck{}, look, err
	}
	first := vision.CheckAmong(exact, strings.Fields(lineText(look.Words)), r.languages())
	if first.Verdict != vision.Disagree {
		return first, look, nil
	}
	for _, p := range crossPreps {
		again, err := r.Reader.ReadFrame(ctx, look.Frame, at, p, vision.SingleLine)
		if err != nil {
			return vision.CrossCheck{}, look, err
		}
		if c := vision.CheckAmong(exact, strings.Fields(lineText(again.Words)), r.languages()); c.Verdict != vision.Disagree {
			return c, again, nil
		}
	}
	return first, look, nil
}

// checkPageTree is checkSendPage from the tree: exactly one item, named exactly as the
// file, with the file's size, and OCR of its name agreeing with it.
func (r *Runner) checkPageTree(ctx context.Context) error {
	page, err := r.readPageTree(ctx)
	if err != nil {
		return err
	}
	obs := &evidence.Observation{What: "send_page_items", DispatchID: r.dispatchID(), Items: page.items}
	var ocr []evidence.OCRRegion
	after := ""
	if len(page.items) == 1 {
		check, look, at, err := r.crossCheckName(ctx, page.names[0])
		if err != nil {
			return err
		}
		after, _ = r.Rec.Frame(look.Frame)
		ocr = ocrWords(after, at, look.Words)
		obs.Title = page.items[0].Name
		obs.Readings = []evidence.Reading{
			{Source: SourceTree, Text: page.items[0].Name, Node: page.target.Words[0]},
			{Source: SourceOCR, Text: check.Read, Box: ptr(box(at)), Verdict: string(check.Verdict), Why: check.Why},
		}
	}
	if _, err := r.appendRecord(evidence.Record{Kind: evidence.KindObserve, Intent: "check the send page", After: after, OCR: ocr, Observed: obs}); err != nil {
		return err
	}
	if rd := obs.Readings; len(rd) == 2 && rd[1].Verdict == string(vision.Disagree) {
		return fmt.Errorf("the send page's item is, in the app's words, %q, and %s: not sending", page.items[0].Name, rd[1].Why)
	}
	if len(page.items) != 1 || page.all != 1 {
		return fmt.Errorf("the send page must hold exactly one item, %s; it lists %d item(s), %d named so: not sending", r.Vars.FileName, page.all, len(page.items))
	}
	if !evidence.SizeMatches(page.items[0].Size, r.Vars.Size) {
		return fmt.Errorf("the send page shows %s with size %q, not %d bytes: not sending", r.Vars.FileName, page.items[0].Size, r.Vars.Size)
	}
	r.progress("%-10s %-32s %s %s ok (the app's tree, OCR %s)", "safe", "check the send page", page.items[0].Name, page.items[0].Size, obs.Readings[1].Verdict)
	return nil
}

// observeSendPage records whether the send page is open and which items named like the
// file it holds.
func (r *Runner) observeSendPage(ctx context.Context, phase string) error {
	var items []evidence.Item
	var ocr []evidence.OCRRegion
	after := ""
	open := true
	if m := r.Profile.SendPageMark; m != nil {
		region := m.Region.In(r.placed())
		found, shows, err := r.Reader.Find(ctx, region, vision.Anchor{Text: m.Text, Prep: m.Prep, AltPreps: m.AltPreps})
		if err != nil {
			return err
		}
		after, _ = r.Rec.Frame(found.Look.Frame)
		ocr = ocrWords(after, region, found.Look.Words)
		open = shows
	}
	if open && r.treeSendPage() {
		page, err := r.readPageTree(ctx)
		if err != nil {
			return err
		}
		items = page.items
	} else if open {
		look, region, err := r.readSendPage(ctx)
		if err != nil {
			return err
		}
		items = r.items(look)
		after, _ = r.Rec.Frame(look.Frame)
		ocr = append(ocr, ocrWords(after, region, look.Words)...)
	}
	_, err := r.appendRecord(evidence.Record{Kind: evidence.KindObserve, Intent: "read the send page", After: after, OCR: ocr,
		Observed: &evidence.Observation{What: "send_page_items", Phase: phase, DispatchID: r.dispatchID(), Items: items}})
	return err
}

// countMarks reads the send page and records how many item marks it shows (the
// profile's item_mark), for a proof by difference.
func (r *Runner) countMarks(ctx context.Context, phase string) (int, error) {
	look, region, err := r.readSendPage(ctx)
	if err != nil {
		return 0, err
	}
	mark := regexp.MustCompile(r.Profile.ItemMark) // validated with the profile
	n := 0
	for _, l := range vision.Lines(look.Words) {
		n += len(mark.FindAllString(l.Text, -1))
	}
	h, _ := r.Rec.Frame(look.Frame)
	_, err = r.appendRecord(evidence.Record{Kind: evidence.KindObserve, Intent: "count the send page's items", After: h, OCR: ocrWords(h, region, look.Words),
		Observed: &evidence.Observation{What: "send_page_marks", Phase: phase, DispatchID: r.dispatchID(), Marks: &n}})
	return n, err
}

// checkSendPage verifies that the send page holds exactly one item, ours: by its name
// (and size), or by difference (no mark before choose_file, exactly one now).
func (r *Runner) checkSendPage(ctx context.Context, proof string) error {
	if proof == ProofDifference {
		n, err := r.countMarks(ctx, "")
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("the send page held no item before the file was chosen and must hold exactly one now; it shows %d: not sending", n)
		}
		r.progress("%-10s %-32s one item, none before: ok", "safe", "check the send page")
		return nil
	}
	if r.treeSendPage() {
		return r.checkPageTree(ctx)
	}
	look, region, err := r.readSendPage(ctx)
	if err != nil {
		return err
	}
	items := r.items(look)
	sizes := sizePattern.FindAllString(lineText(look.Words), -1)
	h, _ := r.Rec.Frame(look.Frame)
	if _, err := r.appendRecord(evidence.Record{Kind: evidence.KindObserve, Intent: "check the send page", After: h, OCR: ocrWords(h, region, look.Words),
		Observed: &evidence.Observation{What: "send_page_items", DispatchID: r.dispatchID(), Items: items}}); err != nil {
		return err
	}
	if len(items) != 1 || len(sizes) > 1 {
		return fmt.Errorf("the send page must hold exactly one item, %s; it shows %d item(s) named so and %d size(s): not sending", r.Vars.FileName, len(items), len(sizes))
	}
	if !evidence.SizeMatches(items[0].Size, r.Vars.Size) {
		return fmt.Errorf("the send page shows %s with size %q, not %d bytes: not sending", r.Vars.FileName, items[0].Size, r.Vars.Size)
	}
	r.progress("%-10s %-32s %s %s ok", "safe", "check the send page", items[0].Name, items[0].Size)
	return nil
}

// dismiss closes the send page without sending, with Escape only.
//
// It runs even when ctx was cancelled (a cancel must not leave a send page holding the
// file behind), on a context of its own with a deadline.
func (r *Runner) dismiss(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dismissTimeout)
	defer cancel()
	for _, s := range r.Profile.Dismiss {
		r.run(ctx, s)
	}
}

// dismissTimeout bounds the Escape-only cleanup after a stop.
const dismissTimeout = 10 * time.Second

// readSendPage reads the send page's region by OCR, as the profile prepares it.
func (r *Runner) readSendPage(ctx context.Context) (vision.Look, image.Rectangle, error) {
	p := r.Profile.SendPage
	region, err := r.area(ctx, p)
	if err != nil {
		return vision.Look{}, region, err
	}
	look, err := r.Reader.Read(ctx, region, p.Prep, p.OCRMode())
	return look, region, err
}

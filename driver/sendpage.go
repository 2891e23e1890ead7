package driver

import (
	"context"
	"fmt"
	"image"
	"strings"

	"github.com/sendonce/sendonce/evidence"
	"github.com/sendonce/sendonce/vision"
	"github.com/sendonce/sendonce/vision/atspi"
)

// The send page read from the app's tree (send_page.node names one item of its list):
// each item's name and size are the app's own words, so a name in any script is
// compared exactly, and OCR of the name where it shows must agree with it.

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
	ctx, cancel := context.WithTimeout(ctx, r.Profile.Timings.titleDeadline())
	defer cancel()
	root, err := r.Tree.Snapshot(ctx, r.window.PID, TreeScope{Windows: &atspi.Match{Name: r.window.Title}, Within: boxOf(region)})
	if err != nil {
		return pageItems{}, fmt.Errorf("%w: reading the send page: %v", ErrNoTree, err)
	}
	var out pageItems
	var found []*atspi.Node
	for _, n := range r.Profile.SendPage.Node.match(r.Vars).Find(root) {
		if e := drawn(n); e != nil && image.Pt(e.X+e.W/2, e.Y+e.H/2).In(region) {
			found = append(found, n)
		}
	}
	out.all = len(found)
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
// agree with the name (vision.Check), or be in a script OCR does not read.
func (r *Runner) crossCheckName(ctx context.Context, n *atspi.Node) (vision.CrossCheck, vision.Look, image.Rectangle, error) {
	e := drawn(n)
	if e == nil {
		return vision.CrossCheck{Exact: n.Name, Verdict: vision.Disagree, Why: "the app gives the name no place on screen"}, vision.Look{}, image.Rectangle{}, nil
	}
	at := image.Rect(e.X, e.Y, e.X+e.W, e.Y+e.H).Inset(-2).Intersect(r.Driver.Bounds())
	look, err := r.Reader.Read(ctx, at, vision.Prep{Gray: true, Scale: 2}, vision.SingleLine)
	if err != nil {
		return vision.CrossCheck{}, look, at, err
	}
	return vision.CheckAmong(n.Name, strings.Fields(lineText(look.Words)), r.languages()), look, at, nil
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
		if check.Verdict == vision.Disagree {
			if _, err := r.appendRecord(evidence.Record{Kind: evidence.KindObserve, Intent: "check the send page", After: after, OCR: ocr, Observed: obs}); err != nil {
				return err
			}
			return fmt.Errorf("the send page's item is, in the app's words, %q, and %s: not sending", page.items[0].Name, check.Why)
		}
	}
	if _, err := r.appendRecord(evidence.Record{Kind: evidence.KindObserve, Intent: "check the send page", After: after, OCR: ocr, Observed: obs}); err != nil {
		return err
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

//go:build cgo

package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/vision/atspi"
	"github.com/sendonce/sendonce/vision/tesseract"
)

// BenchmarkLiveTreeReads times, on the test bed's Gajim (whatever conversation it
// shows), 100 reads of each, interleaved: the title's snapshot (the main window's tree
// within the title's region, as the runner reads it), a snapshot of the whole main
// window (what a wait_node step reads), the conversation's rows in the chat's region
// (as the sent item's read reads them), and, as the anchor, a capture of the title's
// region and its OCR with an engine already loaded (the read the tree's replaces,
// before its cross-check).
// It reports each one's p50 and p99 in milliseconds. Not in CI: BENCHMARKS.md's row
// for Gajim's tree read gives the command, its figures and the date.
func BenchmarkLiveTreeReads(b *testing.B) {
	d, display := liveDesktop(b)
	ctx := context.Background()
	p, err := driver.LoadProfile("gajim")
	if err != nil {
		b.Fatal(err)
	}
	w, err := driver.FindWindow(ctx, d, p)
	if err != nil {
		b.Fatal(err)
	}
	tree, closeTree := driver.OpenAccessibility(ctx, display)
	defer closeTree()
	ocr, err := tesseract.New(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ocr.Close()
	region := p.Title.Region.In(w.Bounds)
	within := &atspi.Box{X: region.Min.X, Y: region.Min.Y, W: region.Dx(), H: region.Dy()}
	main := &atspi.Match{Name: w.Title}
	chatRegion := p.Chat.Region.In(w.Bounds)
	chat := &atspi.Box{X: chatRegion.Min.X, Y: chatRegion.Min.Y, W: chatRegion.Dx(), H: chatRegion.Dy()}
	rows := &atspi.Match{Role: "list item", Showing: true, Under: &atspi.Match{Role: "list box"}}
	chatRows := func() (int, error) {
		n, err := tree.Snapshot(ctx, w.PID, driver.TreeScope{Windows: main, Within: chat, ThroughViewports: true})
		if err != nil {
			return 0, err
		}
		return len(rows.Find(n)), nil
	}
	if n, err := chatRows(); err != nil || n == 0 {
		b.Fatalf("the chat's rows: %d (%v); want some (the test bed's Gajim shows no conversation?)", n, err)
	} else {
		b.Logf("the chat's region holds %d rows", n)
	}
	reads := []struct {
		name string
		read func() error
	}{
		{"title-tree", func() error {
			_, err := tree.Snapshot(ctx, w.PID, driver.TreeScope{Windows: main, Within: within})
			return err
		}},
		{"window-tree", func() error {
			_, err := tree.Snapshot(ctx, w.PID, driver.TreeScope{Windows: main})
			return err
		}},
		{"chat-tree", func() error {
			_, err := chatRows()
			return err
		}},
		{"title-ocr-anchor", func() error {
			// A capture and one recognition, every time (a Reader would answer the same
			// pixels from its cache).
			img, err := d.Capture(ctx, region)
			if err != nil {
				return err
			}
			_, err = ocr.Recognize(ctx, p.Title.Prep.Apply(img), p.Title.OCRMode())
			return err
		}},
	}
	took := make([][]time.Duration, len(reads))
	for range b.N {
		for round := 0; round < 100; round++ {
			for i, r := range reads {
				start := time.Now()
				if err := r.read(); err != nil {
					b.Fatalf("%s: %v", r.name, err)
				}
				took[i] = append(took[i], time.Since(start))
			}
		}
	}
	for i, r := range reads {
		ts := took[i]
		slices.Sort(ts)
		b.ReportMetric(float64(ts[len(ts)/2].Microseconds())/1000, r.name+"-p50-ms")
		b.ReportMetric(float64(ts[len(ts)*99/100].Microseconds())/1000, r.name+"-p99-ms")
	}
}

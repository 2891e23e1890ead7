//go:build cgo

package sendonce_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/driver/replay"
	"github.com/sendonce/sendonce/vision/tesseract"
)

// A whole delivery, here on a recorded desktop (the replay driver) instead of a live X
// display; a program on a workstation gives x11.Open's driver instead.
func ExampleDeliverer_Deliver() {
	ctx := context.Background()
	c, dir, cleanup := exampleClient()
	defer cleanup()
	ocr, err := tesseract.New(nil)
	if err != nil {
		panic(err)
	}
	defer ocr.Close()
	desktop, err := replay.New("testdata/fixtures/verified-text-file")
	if err != nil {
		panic(err)
	}
	// desktop.OCR reads the recorded path as the path this run types (see replay).
	d := &sendonce.Deliverer{Client: c, OCR: desktop.OCR(ocr),
		OpenDesktop: func(context.Context, string) (driver.Driver, func(), error) { return desktop, func() {}, nil }}

	req := sendonce.DeliveryRequest{
		App:             "gajim",
		Destination:     sendonce.Destination{Title: "Bob", ProviderID: "xmpp:bob@localhost"},
		Content:         sendonce.Content{Path: "testdata/fixtures/verified-text-file/file/minutes.txt"},
		Display:         ":replay",
		Staging:         filepath.Join(dir, "staging"),
		SentItemTimeout: 2 * time.Second,
	}
	res, err := d.Deliver(ctx, req)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	fmt.Println(res.Outcome, res.IdentityStrength)

	// The same delivery again is refused: the intent is consumed.
	res, err = d.Deliver(ctx, req)
	fmt.Println(res.Outcome, err != nil)
	// Output:
	// sent_verified strong
	// refused true
}

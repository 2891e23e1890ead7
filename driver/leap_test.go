package driver

import (
	"context"
	"errors"
	"fmt"
	"image"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/gate"
)

// leapProfile chooses the file with one key (crossing choose_file) and sends with a
// click on "Send" in the window's bottom strip; extra is added to the send step.
func leapProfile(extra string) string {
	return fmt.Sprintf(`{"app":"x","process":"x","window_title":"X",
	 "title":{"region":{"x":0,"y":0,"w":100,"h":30}},"chat":{"region":{"x":0,"y":30,"w":0,"h":-100}},
	 "send_page":{"region":{"x":0,"y":30,"w":0,"h":-100}},"sent_item_timeout":"300ms",
	 "choose_file":[{"name":"choose","do":"key","keys":"Return","class":"may_submit","crosses":"choose_file"}],
	 "send":[{"name":"press send","do":"click_text","class":"submit","crosses":"send","text":"Send",
	          "region":{"x":0,"y":-100,"w":0,"h":0},"timeout":"200ms"%s}]}`, extra)
}

// TestLookBeforeTheLeap: a send button that cannot be found before the file is chosen
// stops the delivery before any crossing (not_sent, no key pressed), where the choosing
// would otherwise have used up the key; a step whose control shows only after the
// choosing (appears_after_choosing) is not looked for, and the file is chosen.
func TestLookBeforeTheLeap(t *testing.T) {
	for _, c := range []struct {
		name, extra string
		chosen      bool
	}{
		{name: "no send button before the choosing", chosen: false},
		{name: "a control that shows only after the choosing", extra: `,"appears_after_choosing":true`, chosen: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			desk := &sendsOnChoose{windowsOnly: windowsOnly{ws: []Window{{ID: 1, Process: "x", Title: "X", Viewable: true, Bounds: image.Rect(0, 0, 800, 600)}}}}
			r, crossed := runnerOn(t, desk, desk, readsBob{}, leapProfile(c.extra))
			_, err := r.Deliver(context.Background())
			if err == nil {
				t.Fatal("delivered: want a stop (OCR reads no Send anywhere)")
			}
			got := crossed()
			if !c.chosen {
				if desk.keys != 0 || len(got) != 0 || !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), "look before the leap: press send") {
					t.Fatalf("%d key presses, crossings %v, %v; want none, stopped at the look for the send button", desk.keys, got, err)
				}
				return
			}
			if desk.keys != 1 || len(got) == 0 || got[0] != gate.ChooseFile {
				t.Fatalf("%d key presses, crossings %v, %v; want the file chosen (the send button is not looked for)", desk.keys, got, err)
			}
		})
	}
}

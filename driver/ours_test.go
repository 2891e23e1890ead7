package driver

import (
	"fmt"
	"image/color"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/vision"
)

// rowsFor draws, in a built-in profile's own layout, our row with report.txt and then a
// peer's row named peer with a file of the same name and size: each profile's header
// shape (Gajim: "NAME 11:33" above the card; nheko: the name alone above it; Psi+:
// "[11:33:01] <NAME> link" on one line).
func rowsFor(app, ourName, peer string, ours, other, text color.RGBA) []chatLine {
	switch app {
	case "gajim":
		return []chatLine{
			{ourName + " 11:33", ours, 10, 20}, {"report.txt", text, 80, 50}, {"17 bytes", text, 80, 65},
			{peer + " 11:34", other, 10, 120}, {"report.txt", text, 80, 150}, {"17 bytes", text, 80, 165},
		}
	case "nheko":
		return []chatLine{
			{ourName, ours, 10, 20}, {"report.txt", text, 80, 50}, {"17 B", text, 80, 65},
			{peer, other, 10, 120}, {"report.txt", text, 80, 150}, {"17 B", text, 80, 165},
		}
	case "psi-plus":
		return []chatLine{
			{"[11:33:01] <" + ourName + ">", ours, 10, 20}, {"https://localhost/upload/a/report.txt", text, 200, 20},
			{"[11:34:02] <" + peer + ">", other, 10, 60}, {"https://localhost/upload/b/report.txt", text, 300, 60},
		}
	}
	panic("no layout for " + app)
}

// TestOnlyOurMarkMakesAnItemOurs: for every built-in profile, a peer's row right under
// ours is the peer's, whatever its name: spaces, dots, CJK, Cyrillic, emoji, our own
// name with a suffix, or our very name drawn in the peer's colour. The peer's item
// never inherits our header (before, "Bob Smith" and "bob.smith" were no header for
// nheko and Psi+, and their items came out ours). Our own item stays ours.
func TestOnlyOurMarkMakesAnItemOurs(t *testing.T) {
	peers := []string{"Bob Smith", "bob.smith", "鲍勃", "Боб Иванов", "Bob 🙂", "🙂", "alice2", "alice (work)", "alice"}
	for _, app := range []string{"gajim", "nheko", "psi-plus"} {
		p, err := LoadProfile(app)
		if err != nil {
			t.Fatal(err)
		}
		c := p.Confirm
		ours := color.RGBA{c.AuthorColor[0], c.AuthorColor[1], c.AuthorColor[2], 255}
		other, text := color.RGBA{40, 160, 40, 255}, color.RGBA{30, 30, 30, 255}
		if rgbDistance(RGB{other.R, other.G, other.B}.float(), c.AuthorColor.float()) <= c.ColorTolerance {
			other = color.RGBA{200, 40, 200, 255}
		}
		ourName := "alice"
		if app == "psi-plus" {
			ourName = "carol"
		}
		for _, peer := range peers {
			t.Run(fmt.Sprintf("%s/%s", app, peer), func(t *testing.T) {
				r := &Runner{Profile: p, Vars: Vars{FileName: "report.txt", Size: 17}}
				frame, ws := chatFrame(rowsFor(app, ourName, peer, ours, other, text))
				got := r.items(vision.Look{Frame: frame, Words: ws})
				if len(got) != 2 {
					t.Fatalf("items %+v; want ours and the peer's", got)
				}
				if !got[0].Ours {
					t.Errorf("our own item is not ours: %+v", got[0])
				}
				if got[1].Ours {
					t.Errorf("the item of a peer named %q is ours: %+v", peer, got[1])
				}
			})
		}
	}
}

// TestScreenConfirmsOnlyByAnAppOnlyMark: each built-in profile says whether a peer can
// produce its mark (nheko colours every author by a hash of the user id, ours too;
// Psi+ renders a peer's coloured text), and profile check says that only the provider
// confirms then. A profile that does not say is refused.
func TestScreenConfirmsOnlyByAnAppOnlyMark(t *testing.T) {
	for app, want := range map[string]bool{"gajim": true, "nheko": false, "psi-plus": false} {
		p, err := LoadProfile(app)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Confirm.ScreenConfirms(); got != want {
			t.Errorf("%s: the screen confirms %v; want %v", app, got, want)
		}
		s := p.Summary()
		if want != (s.Confirms != "") || want == (s.ScreenCannot != "") {
			t.Errorf("%s: summary confirms %q, cannot %q", app, s.Confirms, s.ScreenCannot)
		}
		if !want && !strings.Contains(s.ScreenCannot, "provider") {
			t.Errorf("%s: the summary does not send the user to the provider: %q", app, s.ScreenCannot)
		}
	}
	c := Confirm{Header: "^(\\S+)$", ColorTolerance: 10, Settle: Duration{1e9}, EndBlank: Region{W: 1}}
	if err := c.validate("x"); err == nil || !strings.Contains(err.Error(), "confirm.mark") {
		t.Errorf("a confirm without a mark: %v; want an error naming confirm.mark", err)
	}
	c.Mark = MarkAppOnly
	if err := c.validate("x"); err != nil {
		t.Errorf("a confirm with its mark: %v", err)
	}
}

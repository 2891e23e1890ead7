package driver

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sendonce/sendonce/vision/atspi"
)

// dialogLook bounds the read of the app's tree that a failed wait makes to name the
// dialogs it shows.
const dialogLook = 3 * time.Second

// openDialogs says which dialogs the app's accessibility tree shows, for the reason a
// wait failed: nodes of role dialog, alert or file chooser that are showing, each by its
// name or, without one, by the first text inside it. An app that draws its dialogs
// inside its window (nheko's Qt Quick popups: "Setup Encryption") shows them to no
// window manager, only there; a GTK or Qt dialog window is a node of the tree too. ""
// when the tree shows none, or there is no tree to read: none given, none the probe
// could read, or none found by a process id any display client could have written (the
// rule probeTree keeps).
func (r *Runner) openDialogs(ctx context.Context) string {
	if r.Tree == nil || r.window.PID == 0 || r.window.PIDFrom == PIDFromProperty || r.Profile.ReadsTree() && !r.treeOK {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, dialogLook)
	defer cancel()
	root, err := r.Tree.Snapshot(ctx, r.window.PID, TreeScope{Time: dialogLook})
	if err != nil || root == nil {
		return ""
	}
	var names []string
	var walk func(n *atspi.Node)
	walk = func(n *atspi.Node) {
		switch n.Role {
		case "dialog", "alert", "file chooser":
			if n.Has("showing") {
				names = append(names, n.Role+" "+strconv.Quote(dialogTitle(n)))
			}
			return // what is inside is the dialog's
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(root)
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("the app shows %s: a dialog it opened, if unexpected, covers what this step waits for (close it, or answer it, and deliver again)", strings.Join(names, ", "))
}

// dialogTitle is a dialog's name, else the first text shown inside it, cut to 60
// characters.
func dialogTitle(n *atspi.Node) string {
	title := strings.TrimSpace(n.Name)
	var first func(n *atspi.Node) string
	first = func(n *atspi.Node) string {
		for _, c := range n.Children {
			if !c.Has("showing") {
				continue
			}
			for _, s := range []string{c.Name, c.Text} {
				if s = strings.TrimSpace(s); s != "" {
					return s
				}
			}
			if s := first(c); s != "" {
				return s
			}
		}
		return ""
	}
	if title == "" {
		title = first(n)
	}
	if line, _, cut := strings.Cut(title, "\n"); cut {
		title = line + "…"
	}
	if utf8.RuneCountInString(title) > 60 {
		title = string([]rune(title)[:60]) + "…"
	}
	return title
}

// waits says whether the step waits for something to show (wait_text, wait_color,
// wait_node, ...): its failure may be a dialog in the way.
func (s Step) waits() bool { return strings.HasPrefix(s.Do, "wait") }

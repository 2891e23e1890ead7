package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/vision/atspi"
)

// The app's accessibility tree, recorded and replayed as frames are: after each input
// event, the last tree read for each scope (which windows, within which region), stored
// once in trees/<sha256>.json.

// scopeKey names what a snapshot read.
func scopeKey(s driver.TreeScope) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Tree records what t reads into the fixture beside the frames.
func (r *Recorder) Tree(t driver.Tree) driver.Tree { return recordedTree{r, t} }

type recordedTree struct {
	r *Recorder
	t driver.Tree
}

func (rt recordedTree) Snapshot(ctx context.Context, pid int, scope driver.TreeScope) (*atspi.Node, error) {
	n, err := rt.t.Snapshot(ctx, pid, scope)
	if err != nil {
		return n, err
	}
	b, err := json.Marshal(n)
	if err != nil {
		return nil, err
	}
	r := rt.r
	r.mu.Lock()
	defer r.mu.Unlock()
	h, err := r.keep("trees", ".json", b, r.trees)
	if err != nil {
		return nil, err
	}
	st := r.state()
	if st.Trees == nil {
		st.Trees = map[string]string{}
	}
	st.Trees[scopeKey(scope)] = h
	return n, nil
}

// ErrNoTree: the fixture holds no tree for a read (a recording made without one, or
// a read the recording never made).
var ErrNoTree = errors.New("replay: no accessibility tree was recorded for this read")

// Tree replays the trees recorded: for a read, the last tree recorded for its scope at
// or before the input events replayed so far, with text this run typed in place of the
// recording's (as Driver.OCR reads it).
func (d *Driver) Tree() driver.Tree { return replayedTree{d} }

// HasTrees says whether the fixture recorded the app's tree.
func (d *Driver) HasTrees() bool {
	for _, st := range d.fx.States {
		if len(st.Trees) > 0 {
			return true
		}
	}
	return false
}

type replayedTree struct{ d *Driver }

func (rt replayedTree) Snapshot(ctx context.Context, _ int, scope driver.TreeScope) (*atspi.Node, error) {
	d := rt.d
	d.mu.Lock()
	defer d.mu.Unlock()
	key := scopeKey(scope)
	for k := min(d.k, len(d.fx.States)-1); k >= 0; k-- {
		h, ok := d.fx.States[k].Trees[key]
		if !ok {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d.dir, "trees", h+".json"))
		if err != nil {
			return nil, err
		}
		var n atspi.Node
		if err := json.Unmarshal(b, &n); err != nil {
			return nil, fmt.Errorf("replay: tree %s: %w", h, err)
		}
		d.retype(&n)
		return &n, nil
	}
	return nil, fmt.Errorf("%w after %d inputs", ErrNoTree, d.k)
}

// retype puts the text this run typed where the recording shows its own.
func (d *Driver) retype(n *atspi.Node) {
	for _, t := range d.typed {
		if t.recorded == "" {
			continue
		}
		n.Name = strings.ReplaceAll(n.Name, t.recorded, t.sent)
		n.Text = strings.ReplaceAll(n.Text, t.recorded, t.sent)
	}
	for _, c := range n.Children {
		d.retype(c)
	}
}

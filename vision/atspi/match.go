package atspi

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"golang.org/x/text/unicode/norm"
)

// Match names nodes by what the app says they are: a role, a name (exact after NFC
// normalisation, or a pattern), on screen or not, optionally below an ancestor that
// matches too.
type Match struct {
	Role    string         `json:"role,omitempty"`    // e.g. "push button"; empty: any
	Name    string         `json:"name,omitempty"`    // exact after NFC; empty: any
	Pattern *regexp.Regexp `json:"-"`                 // the name matches it (instead of Name)
	Text    string         `json:"text,omitempty"`    // exact text content after NFC; empty: any
	Showing bool           `json:"showing,omitempty"` // only nodes in the showing state
	States  []string       `json:"states,omitempty"`  // and in each of these states
	Under   *Match         `json:"under,omitempty"`   // an ancestor that matches
}

// Same says whether two strings are the same text: equal after NFC normalisation (an
// é typed as e and a combining accent is the é the app shows). Nothing else is folded:
// not case, not look-alike letters (Cyrillic В is not Latin B), not spaces.
func Same(a, b string) bool { return norm.NFC.String(a) == norm.NFC.String(b) }

func (m Match) self(n *Node) bool {
	switch {
	case m.Role != "" && !strings.EqualFold(n.Role, m.Role):
		return false
	case m.Pattern != nil && !m.Pattern.MatchString(norm.NFC.String(n.Name)):
		return false
	case m.Pattern == nil && m.Name != "" && !Same(n.Name, m.Name):
		return false
	case m.Text != "" && !Same(n.Text, m.Text):
		return false
	case m.Showing && !n.Has("showing"):
		return false
	}
	for _, st := range m.States {
		if !n.Has(st) {
			return false
		}
	}
	return true
}

// Find returns the nodes under root (root included) that match, in tree order.
func (m Match) Find(root *Node) []*Node {
	var out []*Node
	var walk func(n *Node, ancestors []*Node)
	walk = func(n *Node, ancestors []*Node) {
		if m.self(n) && m.under(ancestors) {
			out = append(out, n)
		}
		ancestors = append(ancestors, n)
		for _, c := range n.Children {
			walk(c, ancestors)
		}
	}
	walk(root, nil)
	return out
}

// under says whether one of the ancestors (root first) matches m.Under, itself under
// ancestors that match its own Under.
func (m Match) under(ancestors []*Node) bool {
	if m.Under == nil {
		return true
	}
	for i := len(ancestors) - 1; i >= 0; i-- {
		if m.Under.self(ancestors[i]) && m.Under.under(ancestors[:i]) {
			return true
		}
	}
	return false
}

// One is the one node that matches: none, or more than one, is an error that says so
// (a read that could mean two nodes reads neither).
func (m Match) One(root *Node) (*Node, error) {
	found := m.Find(root)
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, fmt.Errorf("no %s in the accessibility tree", m)
	}
	return nil, fmt.Errorf("%d nodes match %s: a read must name one", len(found), m)
}

func (m Match) String() string {
	var parts []string
	if m.Role != "" {
		parts = append(parts, m.Role)
	} else {
		parts = append(parts, "node")
	}
	switch {
	case m.Pattern != nil:
		parts = append(parts, fmt.Sprintf("named like /%s/", m.Pattern))
	case m.Name != "":
		parts = append(parts, fmt.Sprintf("named %q", m.Name))
	}
	if m.Text != "" {
		parts = append(parts, fmt.Sprintf("holding %q", m.Text))
	}
	if m.Showing {
		parts = append(parts, "on screen")
	}
	if len(m.States) > 0 {
		parts = append(parts, "["+strings.Join(m.States, " ")+"]")
	}
	if m.Under != nil {
		parts = append(parts, "under "+m.Under.String())
	}
	return strings.Join(parts, " ")
}

// Wait reads the subtree under root every interval until cond holds for a snapshot,
// which it returns; it ends with ctx (a wait never outlives its caller's deadline).
func (b *Bus) Wait(ctx context.Context, root Ref, limits Limits, interval time.Duration, cond func(*Node) bool) (*Node, error) {
	if interval <= 0 {
		interval = 50 * time.Millisecond
	}
	for {
		n, err := b.Snapshot(ctx, root, limits)
		if err != nil {
			return nil, err
		}
		if cond(n) {
			return n, nil
		}
		select {
		case <-ctx.Done():
			return n, fmt.Errorf("waiting on the accessibility tree: %w", ctx.Err())
		case <-time.After(interval):
		}
	}
}

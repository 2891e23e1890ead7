package atspi_test

import (
	"regexp"
	"strings"
	"testing"

	. "github.com/sendonce/sendonce/vision/atspi"
)

// tree is a send page as GTK publishes it: a dialog with a label, the file's entry and
// two buttons, one insensitive, and a second dialog with a button of the same name.
func tree() *Node {
	on := []string{"enabled", "sensitive", "showing", "visible"}
	return &Node{Role: "application", Name: "gajim", Children: []*Node{
		{Role: "frame", Name: "Bob", States: on, Children: []*Node{
			{Role: "label", Name: "Zoë 🚀 notes.txt", Text: "Zoë 🚀 notes.txt", States: on},
			{Role: "text", Text: "/tmp/报告-第三季度.pdf", States: append([]string{"editable", "focused"}, on...)},
			{Role: "push button", Name: "Send Files", States: on},
			{Role: "push button", Name: "Open", States: []string{"showing", "visible"}},
		}},
		{Role: "dialog", Name: "Choose File to Send…", States: on, Children: []*Node{
			{Role: "filler", States: on, Children: []*Node{{Role: "push button", Name: "Open", States: on}}},
		}},
		{Role: "frame", Name: "Воb", States: []string{"visible"}}, // Cyrillic В and о, not on screen
	}}
}

func TestMatch(t *testing.T) {
	root := tree()
	for _, c := range []struct {
		name  string
		m     Match
		found []string // role/name of each node found, in tree order
	}{
		{"a role and an exact name", Match{Role: "push button", Name: "Send Files"}, []string{"push button/Send Files"}},
		{"the role's case does not matter", Match{Role: "Push Button", Name: "Send Files"}, []string{"push button/Send Files"}},
		{"the name's case does", Match{Role: "push button", Name: "send files"}, nil},
		{"two of the same name", Match{Role: "push button", Name: "Open"}, []string{"push button/Open", "push button/Open"}},
		{"under an ancestor", Match{Role: "push button", Name: "Open", Under: &Match{Role: "dialog", Name: "Choose File to Send…"}}, []string{"push button/Open"}},
		{"under an ancestor under another", Match{Role: "push button", Under: &Match{Role: "filler", Under: &Match{Role: "dialog"}}}, []string{"push button/Open"}},
		{"an ancestor is not its own descendant", Match{Role: "dialog", Under: &Match{Role: "dialog"}}, nil},
		{"NFC: e and a combining diaeresis is ë", Match{Role: "label", Name: "Zoe\u0308 🚀 notes.txt"}, []string{"label/Zoë 🚀 notes.txt"}},
		{"Latin Bob is not Cyrillic Воb", Match{Role: "frame", Name: "Bob"}, []string{"frame/Bob"}},
		{"Cyrillic Воb is not Latin Bob", Match{Role: "frame", Name: "Воb"}, []string{"frame/Воb"}},
		{"showing only", Match{Role: "frame", Showing: true}, []string{"frame/Bob"}},
		{"in a state", Match{Role: "push button", Name: "Open", States: []string{"sensitive"}}, []string{"push button/Open"}},
		{"a text's content, in its own script", Match{Role: "text", Text: "/tmp/报告-第三季度.pdf"}, []string{"text/"}},
		{"a pattern", Match{Role: "label", Pattern: regexp.MustCompile(`notes\.txt$`)}, []string{"label/Zoë 🚀 notes.txt"}},
	} {
		var got []string
		for _, n := range c.m.Find(root) {
			got = append(got, n.Role+"/"+n.Name)
		}
		if strings.Join(got, ",") != strings.Join(c.found, ",") {
			t.Errorf("%s: %s found %v; want %v", c.name, c.m, got, c.found)
		}
	}
}

func TestOne(t *testing.T) {
	root := tree()
	if n, err := (Match{Role: "push button", Name: "Send Files"}).One(root); err != nil || n.Name != "Send Files" {
		t.Fatalf("one: %v %v", n, err)
	}
	if _, err := (Match{Role: "push button", Name: "Open"}).One(root); err == nil || !strings.Contains(err.Error(), "2 nodes match push button named \"Open\"") {
		t.Fatalf("two matches: %v; want an error naming them", err)
	}
	if _, err := (Match{Role: "push button", Name: "Cancel"}).One(root); err == nil || !strings.Contains(err.Error(), "no push button named \"Cancel\"") {
		t.Fatalf("no match: %v", err)
	}
}

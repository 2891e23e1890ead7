//go:build cgo

package main

import (
	"fmt"
	"testing"
)

// soakContact is one conversation a soak round delivers to.
type soakContact struct {
	title, destID string
	name          string   // the file name's pattern (%02d: the round)
	extra         []string // flags the delivery adds
}

// soakContacts are three of the test bed's contacts, in turn: Bob, 张伟 (a title and a
// file name in Chinese) and Dave Smith (a title with a space).
var soakContacts = []soakContact{
	{title: "Bob", destID: "xmpp:bob@localhost", name: "soak-%02d.txt"},
	{title: "张伟", destID: "xmpp:zhangwei@localhost", name: "季度报告-%02d.txt", extra: []string{"--ocr-lang", "eng+chi_sim"}},
	{title: "Dave Smith", destID: "xmpp:dave@localhost", name: "soak notes %02d.txt"},
}

// TestLiveSoakTen is the soak's reduced form that CI runs (scripts/bench-soak runs the
// hundred, timed): ten deliveries in a row through one Gajim, each a file of its own to
// one of three contacts in turn. Every one must end sent_verified, and the server must
// hold exactly one copy of each file and nothing else: a round that ends unknown or
// not_sent in a healthy test bed is a defect. No timing is asserted.
func TestLiveSoakTen(t *testing.T) {
	const rounds = 10
	l := newLive(t)
	before := uploads(t, l.uploadDir())
	var sums []string
	keys := map[string]int{}
	for i := 1; i <= rounds; i++ {
		c := soakContacts[(i-1)%len(soakContacts)]
		file, sum := l.file(fmt.Sprintf(c.name, i))
		sums = append(sums, sum)
		m, code, _ := l.deliver(file, c.title, append([]string{"--dest-id", c.destID}, c.extra...)...)
		if m["outcome"] != "sent_verified" || code != 0 {
			t.Errorf("round %d (to %s): exit %d, %s; want sent_verified", i, c.title, code, describe(m))
			continue
		}
		key, _ := m["key"].(string)
		if prev, ok := keys[key]; ok {
			t.Errorf("round %d has round %d's key %s: each file is a delivery of its own", i, prev, key)
		}
		keys[key] = i
	}
	l.wantExactlyOneCopyEach(before, sums...)
}

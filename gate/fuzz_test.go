package gate

import (
	"fmt"
	"testing"
	"time"
)

// model drives the rules the way the store does: it keeps the intent and the permits
// each task was granted, and applies whatever the rules allow.
type model struct {
	in        Intent
	now       time.Time
	token     uint64
	permits   map[string]PermitRef // the latest permit each task was granted
	consumed  map[int]bool         // revision -> a crossing or a consuming outcome happened
	sends     map[int]int          // revision -> send crossings allowed
	lastToken uint64
}

// FuzzRules checks the property the product stands on: no sequence of claims, checks,
// crossings, renewals, records, authorizations and clock jumps grants a claim for an
// intent whose current revision has a crossing or a consuming outcome, and no revision
// is crossed at send more than once. Only an authorization opens a new revision.
func FuzzRules(f *testing.F) {
	f.Add([]byte{0, 10, 20, 31, 41})
	f.Add([]byte{0, 1, 20, 60, 1, 0, 40, 50, 1})
	f.Add([]byte{0, 20, 30, 60, 60, 60, 1, 2, 3, 44, 51, 0})
	f.Add([]byte{0, 20, 64, 61, 70, 1, 20, 30, 42})
	f.Fuzz(func(t *testing.T, ops []byte) {
		m := &model{now: t0, permits: map[string]PermitRef{}, consumed: map[int]bool{}, sends: map[int]int{}}
		for i, op := range ops {
			m.step(t, i, op)
		}
	})
}

func (m *model) step(t *testing.T, i int, op byte) {
	tasks := [...]string{"A", "B", "C", "D"}
	task := tasks[int(op)%len(tasks)]
	p, has := m.permits[task]
	if !has {
		p = PermitRef{Task: task, Token: uint64(op % 5)} // a guessed, never-granted token
	}
	rev := m.in.Revision
	switch op / 10 % 8 {
	case 0: // claim
		m.token++
		next, g, r := Claim(m.in, task, m.now, m.now.Add(lease), m.token, fmt.Sprint("d", m.token))
		if r != nil {
			return
		}
		if m.consumed[rev] {
			t.Fatalf("op %d: claim by %s granted in revision %d after a crossing or consuming outcome", i, task, rev)
		}
		if g.Attempt.Token <= m.lastToken {
			t.Fatalf("op %d: token %d does not increase past %d", i, g.Attempt.Token, m.lastToken)
		}
		m.lastToken = g.Attempt.Token
		m.in = next
		m.permits[task] = PermitRef{Task: task, Token: g.Attempt.Token}
	case 1: // check
		Check(m.in, p, []Boundary{OpenPicker, ChooseFile, Send}[op%3], m.now)
	case 2, 3: // cross
		b := ChooseFile
		if op/10%8 == 3 {
			b = Send
		}
		next, r := Cross(m.in, p, b, m.now)
		if r != nil {
			return
		}
		m.consumed[next.Latest.Revision] = true
		if b == Send {
			m.sends[next.Latest.Revision]++
			if m.sends[next.Latest.Revision] > 1 {
				t.Fatalf("op %d: revision %d crossed send twice", i, next.Latest.Revision)
			}
		}
		m.in = next
	case 4: // record
		o := []Outcome{NotSent, SentVerified, SentRejected, SendStatusUnknown}[op%4]
		next, got, _ := Record(m.in, p, o, m.now)
		if got == "" {
			return
		}
		if got == NotSent && next.Latest.HasCrossed() {
			t.Fatalf("op %d: not_sent recorded after a crossing", i)
		}
		if got.Consumes() {
			m.consumed[next.Latest.Revision] = true
		}
		m.in = next
	case 5: // renew
		if next, r := Renew(m.in, p, m.now, m.now.Add(lease)); r == nil {
			m.in = next
		}
	case 6: // time passes: a little, or past the lease
		m.now = m.now.Add(time.Duration(op%4) * lease / 2)
	case 7: // a person authorizes the next revision
		next, r := Authorize(m.in, m.in.Revision+1, m.now)
		if r != nil {
			return
		}
		if !m.consumed[rev] {
			t.Fatalf("op %d: revision %d opened though revision %d was not consumed", i, next.Revision, rev)
		}
		m.in = next
	}
}

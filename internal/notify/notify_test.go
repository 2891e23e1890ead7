package notify

import (
	"sync"
	"testing"
)

// TestQueue: a hook that never returns blocks no sender (events beyond the buffer are
// dropped); Close hands over what is queued; a nil hook is a nil Queue that drops all.
func TestQueue(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var got []int
	q := New(func(e int) {
		<-release
		mu.Lock()
		got = append(got, e)
		mu.Unlock()
	})
	for i := range 3 * Buffer { // would block forever if Send waited for the hook
		q.Send(i)
	}
	close(release)
	q.Close()
	mu.Lock()
	n := len(got)
	mu.Unlock()
	if n == 0 || n > Buffer+1 {
		t.Errorf("the hook got %d events; want some, at most the buffer and the one it held", n)
	}
	var none *Queue[int] = New[int](nil)
	if none != nil {
		t.Fatal("a nil hook made a queue")
	}
	none.Send(1)
	none.Close()
}

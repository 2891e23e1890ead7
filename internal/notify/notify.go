// Package notify hands a library's progress events to its caller's hook without ever
// blocking the work that sends them: a slow hook loses events, never time.
package notify

import (
	"sync"
	"time"
)

// Buffer is how many events wait for a slow hook before new ones are dropped.
const Buffer = 256

// Queue hands events to a hook through a buffer, never blocking the sender: when the
// hook is slow, events are dropped. A nil Queue drops every event.
type Queue[E any] struct {
	ch      chan E
	done    chan struct{} // closed by close: drain what is queued, then stop
	drained chan struct{}
	once    sync.Once
}

// New starts a queue for the hook h; a nil hook gives a nil Queue.
func New[E any](h func(E)) *Queue[E] {
	if h == nil {
		return nil
	}
	n := &Queue[E]{ch: make(chan E, Buffer), done: make(chan struct{}), drained: make(chan struct{})}
	go func() {
		defer close(n.drained)
		for {
			select {
			case e := <-n.ch:
				h(e)
			case <-n.done:
				for {
					select {
					case e := <-n.ch:
						h(e)
					default:
						return
					}
				}
			}
		}
	}()
	return n
}

// Send queues e, or drops it when the buffer is full. Safe on a nil Queue.
func (n *Queue[E]) Send(e E) {
	if n == nil {
		return
	}
	select {
	case n.ch <- e:
	default:
	}
}

// Close lets the hook have what is queued, waiting at most closeWait for it.
func (n *Queue[E]) Close() {
	if n == nil {
		return
	}
	n.once.Do(func() { close(n.done) })
	select {
	case <-n.drained:
	case <-time.After(closeWait):
	}
}

// closeWait is how long Close waits for a slow hook.
const closeWait = 200 * time.Millisecond

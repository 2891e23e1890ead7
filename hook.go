package sendonce

import (
	"sync"
	"time"
)

// Level says what an Event is.
type Level string

const (
	LevelProgress Level = "progress" // one line per step of a delivery
	LevelInfo     Level = "info"     // something done that a log would keep
	LevelWarn     Level = "warn"     // something went wrong that the result alone may not show
)

// Event is one progress line or warning.
type Event struct {
	Level      Level  `json:"level"`
	Message    string `json:"message"`
	Err        string `json:"error,omitempty"`
	Key        string `json:"key,omitempty"`
	DispatchID string `json:"dispatch_id,omitempty"`
	Detail     string `json:"detail,omitempty"`
}

// Hook receives a client's events, in order, from one goroutine.
type Hook func(Event)

// hookBuffer is how many events wait for a slow hook before new ones are dropped.
const hookBuffer = 256

// notifier hands events to a hook through a buffer, never blocking the sender: when
// the hook is slow, events are dropped.
type notifier struct {
	ch      chan Event
	done    chan struct{} // closed by close: drain what is queued, then stop
	drained chan struct{}
	once    sync.Once
}

func newNotifier(h Hook) *notifier {
	if h == nil {
		return nil
	}
	n := &notifier{ch: make(chan Event, hookBuffer), done: make(chan struct{}), drained: make(chan struct{})}
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

// send queues e, or drops it when the buffer is full. Safe on a nil notifier.
func (n *notifier) send(e Event) {
	if n == nil {
		return
	}
	select {
	case n.ch <- e:
	default:
	}
}

// close lets the hook have what is queued, waiting at most closeWait for it.
func (n *notifier) close() {
	if n == nil {
		return
	}
	n.once.Do(func() { close(n.done) })
	select {
	case <-n.drained:
	case <-time.After(closeWait):
	}
}

const closeWait = 200 * time.Millisecond

func (c *Client) warn(msg string, err error, e Event) {
	e.Level, e.Message = LevelWarn, msg
	if err != nil {
		e.Err = err.Error()
	}
	c.events.send(e)
}

func (c *Client) info(msg string, e Event) {
	e.Level, e.Message = LevelInfo, msg
	c.events.send(e)
}

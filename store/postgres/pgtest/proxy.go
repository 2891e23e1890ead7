package pgtest

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Fault is what a Proxy does to the next COMMIT a client sends.
type Fault int

const (
	// Pass forwards everything.
	Pass Fault = iota
	// DropBeforeCommit closes the connection instead of forwarding the COMMIT: the
	// server never gets it and rolls the transaction back.
	DropBeforeCommit
	// DropAnswer forwards the COMMIT, waits for the server's answer, throws it away and
	// closes the connection: the transaction landed and the client cannot know.
	DropAnswer
	// Stall holds the COMMIT and refuses every connection until Release: the server
	// never gets it, and the client cannot ask.
	Stall
)

// Proxy is a TCP proxy on loopback in front of a PostgreSQL server, written for the
// ambiguous-commit tests: it reads the client's messages of the wire protocol and
// applies an armed Fault to the first COMMIT it sees.
type Proxy struct {
	target string
	ln     net.Listener

	mu      sync.Mutex
	fault   Fault
	stalled chan struct{} // closed by Release
	hits    int           // faults applied
	holding bool          // a Stall holds a COMMIT
}

// NewProxy starts a proxy in front of the server of the database URL u and returns it
// with u pointed at it. It stops when the test ends.
func NewProxy(t testing.TB, u string) (*Proxy, string) {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: parsed.Host, ln: ln, stalled: make(chan struct{})}
	t.Cleanup(func() { ln.Close(); p.Release() })
	go p.serve()
	parsed.Host = ln.Addr().String()
	return p, parsed.String()
}

// Arm applies f to the next COMMIT.
func (p *Proxy) Arm(f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = f
	if f == Stall {
		p.stalled = make(chan struct{})
	}
}

// Hits is how many faults were applied.
func (p *Proxy) Hits() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits
}

// Release ends a Stall: new connections are served again, and the held connection is
// closed (its COMMIT never forwarded).
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holding = false
	select {
	case <-p.stalled:
	default:
		close(p.stalled)
	}
}

func (p *Proxy) stalling() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.stalled:
		return false
	default:
		return p.holding
	}
}

// take returns the armed fault and disarms it.
func (p *Proxy) take() (Fault, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.fault
	if f != Pass {
		p.hits++
		p.fault = Pass
		p.holding = f == Stall
	}
	return f, p.stalled
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.stalling() {
			c.Close() // the store is unreachable while a COMMIT is held
			continue
		}
		go p.pipe(c)
	}
}

func (p *Proxy) pipe(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	var once sync.Once
	closeBoth := func() { once.Do(func() { client.Close(); server.Close() }) }
	defer closeBoth()
	swallow := make(chan struct{}, 1) // the next answer from the server is thrown away
	go func() {
		defer closeBoth()
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				select {
				case <-swallow:
					return // the COMMIT's answer: lost
				default:
				}
				if _, werr := client.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	// The client's side: the startup packets have no type byte (an SSLRequest, a
	// GSSENCRequest, the StartupMessage); after them each message is a type byte and a
	// length.
	r := client
	for startup := true; ; {
		var msg []byte
		if startup {
			var l [4]byte
			if _, err := io.ReadFull(r, l[:]); err != nil {
				return
			}
			n := binary.BigEndian.Uint32(l[:])
			if n < 8 || n > 1<<20 {
				return
			}
			msg = make([]byte, n)
			copy(msg, l[:])
			if _, err := io.ReadFull(r, msg[4:]); err != nil {
				return
			}
			code := binary.BigEndian.Uint32(msg[4:8])
			startup = code == 80877103 || code == 80877104 // SSL or GSS encryption asked first
		} else {
			var h [5]byte
			if _, err := io.ReadFull(r, h[:]); err != nil {
				return
			}
			n := binary.BigEndian.Uint32(h[1:])
			if n < 4 || n > 1<<30 {
				return
			}
			msg = make([]byte, 1+n)
			copy(msg, h[:])
			if _, err := io.ReadFull(r, msg[5:]); err != nil {
				return
			}
			if isCommit(msg) {
				switch f, stalled := p.take(); f {
				case DropBeforeCommit:
					return
				case Stall:
					<-stalled
					return
				case DropAnswer:
					swallow <- struct{}{}
				}
			}
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
	}
}

// isCommit says whether a frontend message sends COMMIT: a simple Query, or the Parse of
// the extended protocol.
func isCommit(msg []byte) bool {
	var text []byte
	switch msg[0] {
	case 'Q':
		text = msg[5:]
	case 'P':
		rest := msg[5:]
		i := bytes.IndexByte(rest, 0) // the statement's name
		if i < 0 {
			return false
		}
		text = rest[i+1:]
	default:
		return false
	}
	text = bytes.TrimRight(bytes.TrimSpace(bytes.TrimRight(text, "\x00")), ";")
	return bytes.EqualFold(bytes.TrimSpace(text), []byte("commit"))
}

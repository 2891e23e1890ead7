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
	var commits commitStatements
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
			if commits.sends(msg) {
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

// commitStatements knows the statements one client prepared as COMMIT, by name.
type commitStatements map[string]bool

// sends says whether a frontend message sends COMMIT for the server to run: a simple
// Query; the Parse of an unnamed statement (run by the Bind and Execute after it); or
// the Bind of a statement prepared as COMMIT under a name (a named Parse only
// prepares it, and is remembered).
func (c *commitStatements) sends(msg []byte) bool {
	body := msg[5:]
	switch msg[0] {
	case 'Q':
		return isCommit(body)
	case 'P':
		name, text, ok := cutString(body)
		if !ok || !isCommit(text) {
			return false
		}
		if name == "" {
			return true
		}
		if *c == nil {
			*c = commitStatements{}
		}
		(*c)[name] = true
	case 'B':
		if _, rest, ok := cutString(body); ok { // the portal
			if name, _, ok := cutString(rest); ok {
				return (*c)[name]
			}
		}
	}
	return false
}

// cutString splits a message's NUL-terminated string from what follows it.
func cutString(b []byte) (string, []byte, bool) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", nil, false
	}
	return string(b[:i]), b[i+1:], true
}

// isCommit says whether a statement's text (and what follows it in its message) is COMMIT.
func isCommit(text []byte) bool {
	if i := bytes.IndexByte(text, 0); i >= 0 {
		text = text[:i]
	}
	text = bytes.TrimRight(bytes.TrimSpace(text), ";")
	return bytes.EqualFold(bytes.TrimSpace(text), []byte("commit"))
}

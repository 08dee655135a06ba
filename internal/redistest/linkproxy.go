package redistest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// linkProxy carries a replica's link to its master, so that a test can
// stall it the way a congested network does: while stalled, nothing
// passes either way (the master's writes and the replica's
// acknowledgements wait in the proxy), and Cut drops whatever waited. A
// SIGSTOPped replica would not do: what the master sent sits in the
// replica's socket buffer, and is applied when it resumes.
type linkProxy struct {
	l      net.Listener
	target string

	mu      sync.Mutex
	stalled bool
	resume  chan struct{}
	conns   []net.Conn
}

func newLinkProxy(t testing.TB, target string) *linkProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &linkProxy{l: l, target: target, resume: make(chan struct{})}
	go p.serve()
	t.Cleanup(func() { l.Close(); p.Cut() })
	return p
}

func (p *linkProxy) port() int { return p.l.Addr().(*net.TCPAddr).Port }

func (p *linkProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go p.pipe(up, c)
		go p.pipe(c, up)
	}
}

// pipe copies src to dst, holding each chunk while the link is stalled.
func (p *linkProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			stalled, resume := p.stalled, p.resume
			p.mu.Unlock()
			if stalled {
				<-resume
				p.mu.Lock()
				cut := p.conns == nil
				p.mu.Unlock()
				if cut {
					return // dropped with the link
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

// Stall holds everything from now on.
func (p *linkProxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled = true
}

// Cut closes the link, dropping what the stall held.
func (p *linkProxy) Cut() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	if p.stalled {
		p.stalled = false
		close(p.resume)
		p.resume = make(chan struct{})
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

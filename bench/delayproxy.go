package main

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// delayProxy is §12's network: a TCP proxy on loopback in front of one
// server that holds every chunk the server sends for delay before passing it
// on, each chunk timed from its own arrival. A request and its response (a
// round trip) take delay longer than without it, however the response is cut
// into reads, and round trips on different connections overlap as they would
// over a network whose round trip is delay. It knows no protocol, so the same
// proxy delays DynamoDB's HTTP, Redis's RESP and PostgreSQL's wire protocol,
// from Go or from Node.
type delayProxy struct {
	ln     net.Listener
	target string
	delay  time.Duration

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// startDelayProxy listens on a free loopback port and forwards each
// connection to target (host:port).
func startDelayProxy(target string, delay time.Duration) (*delayProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &delayProxy{ln: ln, target: target, delay: delay, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *delayProxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, closes every connection and waits for their
// goroutines.
func (p *delayProxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// track remembers c for Close; it reports false once the proxy is closed.
func (p *delayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *delayProxy) forget(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *delayProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.wg.Add(1)
		go p.serve(client)
	}
}

// delayedChunk is what the server sent, and when the client may have it.
type delayedChunk struct {
	b   []byte
	due time.Time
}

func (p *delayProxy) serve(client net.Conn) {
	defer p.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	server, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.target)
	cancel()
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(client) || !p.track(server) {
		_ = client.Close()
		_ = server.Close()
		return
	}
	defer p.forget(client)
	defer p.forget(server)
	for _, c := range []net.Conn{client, server} {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
	}

	// Client to server, at once: the whole delay is on the way back.
	up := make(chan struct{})
	go func() {
		defer close(up)
		_, _ = io.Copy(server, client)
		_ = server.Close()
	}()

	// Server to client: a reader stamps each chunk as it arrives, a writer
	// hands it on when it is due, so chunks in flight are delayed side by
	// side, not one after another.
	chunks := make(chan delayedChunk, 256)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := server.Read(buf)
			if n > 0 {
				chunks <- delayedChunk{b: buf[:n], due: time.Now().Add(p.delay)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range chunks {
		if wait := time.Until(c.due); wait > 0 {
			time.Sleep(wait)
		}
		if _, err := client.Write(c.b); err != nil {
			_ = server.Close() // ends the reader; the range drains what it sent
		}
	}
	_ = client.Close()
	<-up
}

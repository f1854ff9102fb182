package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/bqueue/bq/internal/humanize"
)

// netDelay is --net-delay: a TCP proxy on loopback that forwards each
// chunk it reads from one side to the other no earlier than delay after
// reading it, in order, in both directions, so that a round trip through
// it costs 2×delay more, as across a network.
type netDelay struct {
	delay  time.Duration
	target string // host:port of the server
	ln     net.Listener
	onErr  func(error) // reports a failed dial to the server

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// startNetDelay listens on 127.0.0.1 and forwards every connection to
// target, delayed.
func startNetDelay(target string, delay time.Duration, onErr func(error)) (*netDelay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: --net-delay: listen: %w", err)
	}
	p := &netDelay{delay: delay, target: target, ln: ln, onErr: onErr, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// addr is the proxy's address, host:port.
func (p *netDelay) addr() string { return p.ln.Addr().String() }

// Close stops the listener, closes every connection and waits for the
// proxy's goroutines.
func (p *netDelay) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// track adds c to the connections Close closes; false once closed.
func (p *netDelay) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *netDelay) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *netDelay) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(client) {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			server, err := net.DialTimeout("tcp", p.target, 10*time.Second)
			if err != nil || !p.track(server) {
				p.untrack(client)
				if err != nil && p.onErr != nil {
					p.onErr(fmt.Errorf("bench: --net-delay: connect to %s: %w", p.target, err))
				}
				return
			}
			var both sync.WaitGroup
			both.Add(2)
			go func() { defer both.Done(); p.pipe(server, client) }()
			go func() { defer both.Done(); p.pipe(client, server) }()
			both.Wait()
			p.untrack(client, server)
		}()
	}
}

// chunk is what one read returned, and when it may be written.
type chunk struct {
	b   []byte
	due time.Time
}

// pipe copies src to dst, each chunk delay after it was read: a reader
// goroutine stamps the chunks into a buffered channel, this one writes
// them when due. At src's end it half-closes dst (CloseWrite), so that the
// other direction carries on until its own end; on an error it closes both.
func (p *netDelay) pipe(dst, src net.Conn) {
	chunks := make(chan chunk, 1024)
	var readErr error
	go func() {
		defer close(chunks)
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				chunks <- chunk{b: append([]byte(nil), buf[:n]...), due: time.Now().Add(p.delay)}
			}
			if err != nil {
				readErr = err
				return
			}
		}
	}()
	failed := false
	for c := range chunks {
		if failed {
			continue // drain, so that the reader ends
		}
		if d := time.Until(c.due); d > 0 {
			time.Sleep(d)
		}
		if _, err := dst.Write(c.b); err != nil {
			failed = true
			dst.Close()
			src.Close()
		}
	}
	// The channel is closed: readErr is set.
	if failed || !errors.Is(readErr, io.EOF) {
		dst.Close()
		src.Close()
		return
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		dst.Close()
	}
}

// netDelayDSN returns dsn, a postgres:// or mysql:// URL, with its host
// and port replaced by addr, and the host:port it named (the driver's
// default port if it named none): the server the proxy forwards to.
func netDelayDSN(dsn, addr string) (rewritten, target string, err error) {
	shown := humanize.RedactDSN(dsn)
	u, err := url.Parse(dsn)
	if err != nil {
		return "", "", fmt.Errorf("bench: --net-delay: parse --dsn %s", shown)
	}
	port := map[string]string{"postgres": "5432", "postgresql": "5432", "mysql": "3306"}[u.Scheme]
	host := u.Hostname()
	if host == "" && u.Scheme == "mysql" {
		host = "127.0.0.1" // as the MySQL driver reads it
	}
	switch {
	case port == "":
		return "", "", fmt.Errorf("bench: --net-delay: --dsn %s: use a postgres:// or mysql:// URL", shown)
	case host == "" || strings.Contains(u.Host, ","):
		return "", "", fmt.Errorf("bench: --net-delay: --dsn %s must name one host, as in postgres://user@127.0.0.1:5432/db: the proxy forwards to it", shown)
	}
	q := u.Query()
	for _, name := range []string{"host", "port", "hostaddr", "listen_dsn"} {
		if q.Has(name) {
			return "", "", fmt.Errorf("bench: --net-delay: --dsn %s sets %s: name the server's host and port in the URL only, which the proxy takes the place of", shown, name)
		}
	}
	if u.Port() != "" {
		port = u.Port()
	}
	target = net.JoinHostPort(host, port)
	// Replace the authority's host:port in the text, leaving the rest of
	// the DSN (user, password, parameters) as written.
	scheme, rest, _ := strings.Cut(dsn, "://")
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority := rest[:end]
	userinfo := ""
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		userinfo = authority[:at+1]
	}
	return scheme + "://" + userinfo + addr + rest[end:], target, nil
}

package ui

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// guard slows down guessing the token. Each client address may get
// freeGuesses wrong tokens; after that it must wait before the next
// try, twice as long after each further miss (1 s, 2 s, 4 s, … up to
// maxGuessWait), and a try inside the wait is refused with 429 without
// being compared. All addresses together get at most globalGuesses wrong
// tokens a second, so many addresses do not multiply the rate. A right
// token clears the address's count. Only tokens offered (a bearer header,
// ?token=) count: a stale session cookie is no guess.
type guard struct {
	mu     sync.Mutex
	byAddr map[string]*misses
	// window and inWindow count every address's misses in the current
	// second.
	window   time.Time
	inWindow int
}

type misses struct {
	n     int
	until time.Time // no try before it
	last  time.Time
}

const (
	freeGuesses   = 5
	maxGuessWait  = time.Minute
	globalGuesses = 20
	// maxGuessAddrs bounds the table; entries idle for guessMemory go
	// first.
	maxGuessAddrs = 4096
	guessMemory   = 10 * time.Minute
)

func newGuard() *guard { return &guard{byAddr: map[string]*misses{}} }

// clientAddr is the address a request came from, without its port.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// wait is how long the request's address must still wait before a try;
// 0 lets it try now.
func (g *guard) wait(r *http.Request, now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.Sub(g.window) < time.Second && g.inWindow >= globalGuesses {
		return g.window.Add(time.Second).Sub(now)
	}
	if m := g.byAddr[clientAddr(r)]; m != nil && now.Before(m.until) {
		return m.until.Sub(now)
	}
	return 0
}

// failed counts a wrong token from the request's address.
func (g *guard) failed(r *http.Request, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.Sub(g.window) >= time.Second {
		g.window, g.inWindow = now, 0
	}
	g.inWindow++
	addr := clientAddr(r)
	m := g.byAddr[addr]
	if m == nil {
		if len(g.byAddr) >= maxGuessAddrs {
			g.prune(now)
		}
		m = &misses{}
		g.byAddr[addr] = m
	}
	m.n++
	m.last = now
	if over := m.n - freeGuesses; over >= 0 {
		wait := maxGuessWait
		if over < 6 {
			wait = min(maxGuessWait, time.Second<<over)
		}
		m.until = now.Add(wait)
	}
}

// forget clears an address's misses after a right token.
func (g *guard) forget(r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.byAddr, clientAddr(r))
}

// prune drops the entries idle for guessMemory, or, if that frees
// nothing, those not waiting now.
func (g *guard) prune(now time.Time) {
	for addr, m := range g.byAddr {
		if now.Sub(m.last) > guessMemory {
			delete(g.byAddr, addr)
		}
	}
	if len(g.byAddr) < maxGuessAddrs {
		return
	}
	for addr, m := range g.byAddr {
		if !now.Before(m.until) {
			delete(g.byAddr, addr)
		}
	}
}

package worker

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// outageReport is how often an ongoing database outage is logged again.
const outageReport = 30 * time.Second

// outage logs database trouble as an event rather than per call: once when
// calls start failing (with the cause), every outageReport while they go
// on (with how many failed), and once when one succeeds again (with how
// long it lasted). Every poll of every queue fails during an outage; a
// line for each would drown the one that matters.
//
// A database that refuses writes (read-only, full) still answers reads,
// and a write begun before it turned read-only may still commit: once a
// call was refused so, the outage ends only with a write begun after the
// last refusal. Else a claim that found nothing, a dispatcher pass with
// nothing to do or a completion in flight at the switch would end it,
// and the next write start it again, logging both each time.
type outage struct {
	down atomic.Bool

	mu         sync.Mutex
	since      time.Time
	lastReport time.Time
	failures   int
	back       chan struct{} // closed when the outage ends
	// refusedAt is when a call of this outage was last refused for the
	// database taking no writes; zero when none was.
	refusedAt time.Time
}

// readyNow is a channel that is always ready.
var readyNow = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// recovered is ready once the current outage has ended (at once if there
// is none): a call waiting to retry need not wait out its backoff.
func (o *outage) recovered() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.down.Load() {
		return readyNow
	}
	return o.back
}

// dbFailed records a failed database call of the named service.
func (c *Runtime) dbFailed(what string, err error) {
	c.outage.failed(c, what, err)
	if p := c.active.Load(); p != nil {
		p.suspect()
	}
}

// dbOK records a database call that succeeded, which ends an outage.
// wrote is when the write it made began; zero when it may have written
// nothing (see outage).
func (c *Runtime) dbOK(what string, wrote time.Time) {
	if w := wrote.UnixNano(); !wrote.IsZero() {
		for last := c.wrote.Load(); w > last && !c.wrote.CompareAndSwap(last, w); last = c.wrote.Load() {
		}
	}
	c.outage.ok(c, what, wrote)
}

// lastWrite is when the newest write of this runtime that landed began
// (the zero time before one has).
func (c *Runtime) lastWrite() time.Time {
	if w := c.wrote.Load(); w != 0 {
		return time.Unix(0, w)
	}
	return time.Time{}
}

func (o *outage) failed(c *Runtime, what string, err error) {
	now := c.cfg.Now()
	refusal := c.drv.Refusal(err)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failures++
	if refusal != driver.NotRefused {
		o.refusedAt = now
	}
	switch {
	case !o.down.Load():
		o.down.Store(true)
		o.since, o.lastReport, o.failures = now, now, 1
		o.back = make(chan struct{})
		if refusal == driver.NotRefused {
			o.refusedAt = time.Time{}
		}
		msg := "database calls are failing; bq retries with backoff"
		switch refusal {
		case driver.ReadOnly:
			msg = "the database refuses writes (read-only: a standby, or a database set read-only); bq retries with backoff and goes on once it takes writes"
		case driver.Full:
			msg = "the database is full (out of disk or table space); bq retries with backoff and goes on once it has room"
		}
		c.log.Error(msg, "service", what, "error", err)
	case now.Sub(o.lastReport) >= outageReport:
		o.lastReport = now
		c.log.Error("database calls still failing", "service", what, "for", now.Sub(o.since).Round(time.Second),
			"failed_calls", o.failures, "error", err)
	}
}

func (o *outage) ok(c *Runtime, what string, wrote time.Time) {
	if !o.down.Load() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.down.Load() || !o.refusedAt.IsZero() && !wrote.After(o.refusedAt) {
		return
	}
	o.down.Store(false)
	close(o.back)
	c.log.Warn("database calls succeed again", "service", what,
		"outage", c.cfg.Now().Sub(o.since).Round(time.Millisecond), "failed_calls", o.failures)
}

// retryDB runs fn until it succeeds, backing off while the database is
// unreachable or locked, until ctx ends. An outcome is never given up on
// while the process lives: silence its process shares with the database
// is no ground to reap its claim, so an outcome dropped here would strand
// the claim and its slot.
func (c *Runtime) retryDB(ctx context.Context, what string, fn func() error) error {
	return c.retryDBWhile(ctx, what, func(error) bool { return true }, fn)
}

// retryDBWhile is retryDB for the errors worth trying again for; any
// other error returns at once.
func (c *Runtime) retryDBWhile(ctx context.Context, what string, worth func(error) bool, fn func() error) error {
	backoff := 50 * time.Millisecond
	for {
		began := c.cfg.Now()
		err := fn()
		if err == nil {
			c.dbOK(what, began)
			return nil
		}
		if ctx.Err() != nil || !worth(err) {
			return err
		}
		c.dbFailed(what, err)
		wait := backoff/2 + rand.N(backoff)
		select {
		case <-time.After(wait):
		case <-c.outage.recovered():
			// Another call got through (heartbeats retry every 100 ms):
			// try again now rather than at the end of the backoff.
			backoff = 50 * time.Millisecond
			continue
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

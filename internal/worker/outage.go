package worker

import (
	"sync"
	"sync/atomic"
	"time"
)

// outageReport is how often an ongoing database outage is logged again.
const outageReport = 30 * time.Second

// outage logs database trouble as an event rather than per call: once when
// calls start failing (with the cause), every outageReport while they go
// on (with how many failed), and once when one succeeds again (with how
// long it lasted). Every poll of every queue fails during an outage; a
// line for each would drown the one that matters.
type outage struct {
	down atomic.Bool

	mu         sync.Mutex
	since      time.Time
	lastReport time.Time
	failures   int
	back       chan struct{} // closed when the outage ends
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
func (c *Runtime) dbFailed(what string, err error) { c.outage.failed(c, what, err) }

// dbOK records a database call that succeeded, ending an outage.
func (c *Runtime) dbOK(what string) { c.outage.ok(c, what) }

func (o *outage) failed(c *Runtime, what string, err error) {
	now := c.cfg.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failures++
	switch {
	case !o.down.Load():
		o.down.Store(true)
		o.since, o.lastReport, o.failures = now, now, 1
		o.back = make(chan struct{})
		c.log.Error("database calls are failing; bq retries with backoff", "service", what, "error", err)
	case now.Sub(o.lastReport) >= outageReport:
		o.lastReport = now
		c.log.Error("database calls still failing", "service", what, "for", now.Sub(o.since).Round(time.Second),
			"failed_calls", o.failures, "error", err)
	}
}

func (o *outage) ok(c *Runtime, what string) {
	if !o.down.Load() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.down.Load() {
		return
	}
	o.down.Store(false)
	close(o.back)
	c.log.Warn("database calls succeed again", "service", what,
		"outage", c.cfg.Now().Sub(o.since).Round(time.Millisecond), "failed_calls", o.failures)
}

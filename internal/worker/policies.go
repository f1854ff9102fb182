package worker

import (
	"context"
	"sync"
	"time"
)

// PolicyRefresh is how often a process reads the queue policies again to
// know which queues adapt (Policy.Adaptive): a completion of a key whose
// kind does not adapt counts towards raising its lowered limit only when
// its queue's policy adapts, so a changed policy reaches completions
// within this bound. A throttle reads the policy itself, in its own
// transaction.
const PolicyRefresh = 10 * time.Second

// policyReadTimeout bounds that read, which runs in the background.
const policyReadTimeout = 2 * time.Second

// policyCache is what the process last read of the queue policies:
// which queues' keyed jobs adapt by their policy.
type policyCache struct {
	mu         sync.Mutex
	read       time.Time // when the last read began; zero before the first
	reading    bool
	adaptiveBy map[string]bool
	// marked are the queues a throttle found adapting since the last
	// read began: kept by that read, which may have missed the change.
	marked map[string]bool
}

// queueAdapts reports whether queue's policy turns adaptive limits on,
// as last read: one read of every policy at most each PolicyRefresh per
// process, in the background, so neither a completion's transaction nor
// the finish of a run waits for it, and a completion of a key that does
// not adapt costs no statement. Until the first read lands, and while a
// read is under way or after one failed, the last answer stands.
func (c *Runtime) queueAdapts(queue string) bool {
	p := &c.policies
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reading && (p.read.IsZero() || time.Since(p.read) >= PolicyRefresh) {
		p.reading, p.read, p.marked = true, time.Now(), nil
		go c.readPolicies()
	}
	return p.adaptiveBy[queue]
}

// readPolicies reads which queues adapt by their policy, for queueAdapts.
func (c *Runtime) readPolicies() {
	ctx, cancel := context.WithTimeout(context.Background(), policyReadTimeout)
	defer cancel()
	ps, err := c.drv.Exec().PolicyList(ctx)
	p := &c.policies
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reading = false
	if err != nil {
		c.log.Debug("read the queue policies to know which adapt; the last read stands", "error", err)
		return
	}
	by := map[string]bool{}
	for _, pol := range ps {
		if pol.AdaptiveMin > 0 {
			by[pol.Queue] = true
		}
	}
	// A throttle of this process since the read began keeps its mark
	// (queueAdapted): the read may have missed its policy's change.
	for q := range p.marked {
		by[q] = true
	}
	p.adaptiveBy = by
}

// queueAdapted records that a throttle of a job of queue lowered a key's
// limit by its queue's policy: this process counts its completions from
// now, without waiting for the next read.
func (c *Runtime) queueAdapted(queue string) {
	p := &c.policies
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.adaptiveBy == nil {
		p.adaptiveBy = map[string]bool{}
	}
	p.adaptiveBy[queue] = true
	if p.marked == nil {
		p.marked = map[string]bool{}
	}
	p.marked[queue] = true
}

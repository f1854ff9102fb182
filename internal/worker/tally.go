package worker

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// tally counts this process's completed and failed runs per minute and
// queue in memory; a worker process writes them to the history once a
// minute, in one statement (flushHistory).
type tally struct {
	mu     sync.Mutex
	counts map[tallyKey]*driver.Throughput
}

type tallyKey struct {
	minute int64 // Unix seconds
	queue  string
}

// count adds one run of queue that ended at `at`.
func (t *tally) count(queue string, at time.Time, failed bool) {
	c := driver.Throughput{Minute: at.Truncate(time.Minute), Queue: queue, Completed: 1}
	if failed {
		c.Completed, c.Failed = 0, 1
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.add(c)
}

// add merges c into the tally; t.mu is held.
func (t *tally) add(c driver.Throughput) {
	if t.counts == nil {
		t.counts = map[tallyKey]*driver.Throughput{}
	}
	k := tallyKey{c.Minute.Unix(), c.Queue}
	if have := t.counts[k]; have != nil {
		have.Completed += c.Completed
		have.Failed += c.Failed
		return
	}
	t.counts[k] = &c
}

// take empties the tally and returns what it held, in (minute, queue)
// order: concurrent flushes of several processes lock the rows they add
// to in one order, so they never deadlock.
func (t *tally) take() []driver.Throughput {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]driver.Throughput, 0, len(t.counts))
	for _, c := range t.counts {
		out = append(out, *c)
	}
	clear(t.counts)
	slices.SortFunc(out, func(a, b driver.Throughput) int {
		return cmp.Or(a.Minute.Compare(b.Minute), cmp.Compare(a.Queue, b.Queue))
	})
	return out
}

// putBack returns counts a flush could not write, keeping those the
// history still keeps: an outage costs memory for a day at most.
func (t *tally) putBack(counts []driver.Throughput, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range counts {
		if now.Sub(c.Minute) <= driver.HistoryKeep {
			t.add(c)
		}
	}
}

// historyFlush is how often a worker process writes what it counted.
const historyFlush = time.Minute

// flushHistory writes the tally once a minute until ctx ends, then once
// more: a clean stop loses no count.
func (c *Runtime) flushHistory(ctx context.Context) {
	t := time.NewTicker(historyFlush)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			c.flushTally(final)
			cancel()
			return
		case <-t.C:
			c.flushTally(ctx)
		}
	}
}

func (c *Runtime) flushTally(ctx context.Context) {
	counts := c.tally.take()
	if len(counts) == 0 {
		return
	}
	var err error
	began := c.cfg.Now()
	if hs, ok := driver.HistoryOf(c.drv); ok {
		err = hs.HistoryAddThroughput(ctx, counts)
	}
	if err != nil {
		c.tally.putBack(counts, c.cfg.Now())
		c.dbFailed("history", err)
		return
	}
	c.dbOK("history", began)
}

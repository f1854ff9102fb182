package worker

import (
	"context"
	"sync"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
)

// maxCompletionBatch bounds the runs one completion statement ends.
const maxCompletionBatch = 1000

// completer records successful runs in batches, group-commit style: while
// one batch commits, the completions that arrive queue up and go in the
// next, in one statement. Nothing waits for a timer: an idle completer
// writes a lone completion at once, so batching adds no latency and a
// freed slot passes to the next blocked job as soon as it would alone.
type completer struct {
	c   *Runtime
	ctx context.Context // ends when a stop gives up on the database
	in  chan *completion

	mu      sync.RWMutex // held to send, so stop cannot close in under a sender
	stopped bool
	exited  chan struct{}
}

type completion struct {
	claim *driver.Claim
	then  func(lifecycle.Result, error)
}

// startCompleter starts a completer; stop it once no worker records.
func startCompleter(c *Runtime, ctx context.Context) *completer {
	cp := &completer{c: c, ctx: ctx, in: make(chan *completion, maxCompletionBatch), exited: make(chan struct{})}
	go cp.run()
	return cp
}

// complete records one successful run in the next batch and calls then
// with its result once the batch has committed (or been given up on), on
// the completer's goroutine: then must be quick and must not complete.
// A run that ends after stop (abandoned at shutdown) is written alone,
// before complete returns.
func (cp *completer) complete(claim *driver.Claim, then func(lifecycle.Result, error)) {
	c := &completion{claim: claim, then: then}
	cp.mu.RLock()
	if cp.stopped {
		cp.mu.RUnlock()
		cp.write([]*completion{c})
		return
	}
	cp.in <- c
	cp.mu.RUnlock()
}

// stop writes what is queued and ends run.
func (cp *completer) stop() {
	cp.mu.Lock()
	cp.stopped = true
	close(cp.in)
	cp.mu.Unlock()
	<-cp.exited
}

// run writes batches until in is closed and drained.
func (cp *completer) run() {
	defer close(cp.exited)
	for first := range cp.in {
		batch := []*completion{first}
	fill:
		for len(batch) < maxCompletionBatch {
			select {
			case next, ok := <-cp.in:
				if !ok {
					break fill
				}
				batch = append(batch, next)
			default:
				break fill
			}
		}
		cp.write(batch)
	}
}

func anyKeyed(claims []*driver.Claim) bool {
	for _, c := range claims {
		if c.Limit.Key != "" {
			return true
		}
	}
	return false
}

// write commits one batch and tells each completion its result.
func (cp *completer) write(batch []*completion) {
	ctx := cp.ctx
	keep := cp.c.cfg.Retention != NoRetention
	claims := make([]*driver.Claim, len(batch))
	for i, b := range batch {
		claims[i] = b.claim
	}
	var results []lifecycle.Result
	err := cp.c.retryDB(ctx, "record completions", func() error {
		run := driver.InTx
		if !anyKeyed(claims) {
			// No slot to release: ending the claims is one write.
			run = driver.Atomic
		}
		return run(ctx, cp.c.drv, func(ex driver.Executor) (err error) {
			results, err = lifecycle.CompleteMany(ctx, ex, claims, keep, cp.c.cfg.Now())
			return err
		})
	})
	for i, b := range batch {
		if err != nil {
			b.then(lifecycle.Result{}, err)
		} else {
			b.then(results[i], nil)
		}
	}
}

package worker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
)

// maxCompletionBatch bounds the runs one completion statement ends.
const maxCompletionBatch = 1000

// completer records successful runs in batches, group-commit style: while
// one batch commits, the completions that arrive queue up and go in the
// next, in one statement. An idle completer writes a lone completion at
// once, so batching adds no latency and a freed slot passes to the next
// blocked job as soon as it would alone. One wait only: after a batch
// that handed jobs off, the next waits for as many completions as it
// handed off, at most half the last batch's write: a key whose jobs are
// quick (a hot key) then turns its slots over in one batch a cycle, not
// in two halves alternating, each paying a batch's round trips and lock.
type completer struct {
	c   *Runtime
	ctx context.Context // ends when a stop gives up on the database
	in  chan *completion
	// proc and workers (by queue) take hand-offs: jobs a batch promotes
	// into slots it released, claimed in its transaction.
	proc    *process
	workers map[string]*queueWorker
	// handed and took: the jobs the last batch handed off, and how long
	// its write took (run's goroutine only).
	handed int
	took   time.Duration

	mu      sync.RWMutex // held to send, so stop cannot close in under a sender
	stopped bool
	exited  chan struct{}
}

type completion struct {
	claim *driver.Claim
	// adaptive: the claim's key or rate adapts (bq.Adaptive); its
	// completion counts towards raising them (lifecycle.RecoverMany).
	adaptive lifecycle.Adaptive
	then     func(lifecycle.Result, error)
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
// A run that ends after stop (unclaimed at shutdown) is written alone,
// before complete returns.
func (cp *completer) complete(claim *driver.Claim, adaptive lifecycle.Adaptive, then func(lifecycle.Result, error)) {
	c := &completion{claim: claim, adaptive: adaptive, then: then}
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
	wait := time.NewTimer(time.Hour)
	wait.Stop() // Go 1.23 timers: a stopped or reset timer sends nothing stale
	for first := range cp.in {
		batch := []*completion{first}
		var until <-chan time.Time // while the hand-off's runs come back
		if cp.handed > 1 {
			wait.Reset(cp.took / 2)
			until = wait.C
		}
	fill:
		for len(batch) < maxCompletionBatch {
			select {
			case next, ok := <-cp.in:
				if !ok {
					break fill
				}
				batch = append(batch, next)
				continue
			default:
			}
			if until == nil || len(batch) >= cp.handed {
				break fill
			}
			select {
			case next, ok := <-cp.in:
				if !ok {
					break fill
				}
				batch = append(batch, next)
			case <-until:
				until = nil
			}
		}
		wait.Stop()
		began := time.Now()
		cp.handed = cp.write(batch)
		cp.took = time.Since(began)
	}
}

func anyKeyed(claims []*driver.Claim) bool {
	for _, c := range claims {
		if c.Limit.Key != "" || c.HasDependents {
			return true
		}
	}
	return false
}

// handOffTo lets the completer hand jobs off to the workers of proc.
func (cp *completer) handOffTo(proc *process, workers []*queueWorker) {
	cp.proc = proc
	cp.workers = make(map[string]*queueWorker, len(workers))
	for _, w := range workers {
		cp.workers[w.queue] = w
	}
}

// reserve promises, for each queue of the batch's keyed claims that this
// process works, as many free slots as the batch has keyed claims of it
// (at most one promotion per slot released): the room of its hand-offs.
func (cp *completer) reserve(claims []*driver.Claim) map[string]int {
	var room map[string]int
	for _, c := range claims {
		if c.Limit.Key == "" {
			continue
		}
		if room == nil {
			room = map[string]int{}
		}
		room[c.Queue]++
	}
	for q, n := range room {
		if w := cp.workers[q]; w != nil {
			room[q] = w.reserveHandOff(n)
		} else {
			room[q] = 0
		}
		if room[q] == 0 {
			delete(room, q)
		}
	}
	return room
}

// write commits one batch and tells each completion its result; it
// returns how many jobs the batch handed off.
func (cp *completer) write(batch []*completion) (handedOff int) {
	ctx := cp.ctx
	keep := cp.c.cfg.Retention != NoRetention
	claims := make([]*driver.Claim, len(batch))
	var adaptive []lifecycle.Adaptive // nil while the batch has nothing that adapts
	for i, b := range batch {
		claims[i] = b.claim
		if b.adaptive.Any() && adaptive == nil {
			adaptive = make([]lifecycle.Adaptive, len(batch))
		}
		if b.adaptive.Any() {
			adaptive[i] = b.adaptive
		}
	}
	room := cp.reserve(claims)
	if len(room) > 0 {
		// Until the runs hold leases, the hand-offs are claims in
		// flight: the process's claim check must not take them for
		// strays.
		cp.proc.claiming.RLock()
		defer cp.proc.claiming.RUnlock()
	}
	var results []lifecycle.Result
	var handed map[string][]*driver.Claim
	var handOff func() map[string][]*driver.Claim // once committed
	var raised driver.Promotion                   // by adaptive limits' raises
	tries := 0
	err := cp.c.retryDB(ctx, "record completions", func() error {
		tries++
		run, inTx := driver.InTx, true
		if !anyKeyed(claims) && adaptive == nil {
			// No slot to release, no job waiting for them, as they
			// were claimed, and no limit to raise: ending the claims is
			// one write.
			run, inTx = driver.Atomic, false
		}
		// In a transaction, the end of the claims and the release of
		// their keys go out together, every claim presumed to match;
		// should one not, that transaction rolls back and the batch is
		// written again at once, not presumed (lifecycle.ErrMismatch).
		for presume := inTx; ; presume = false {
			err := run(ctx, cp.c.drv, func(ex driver.Executor) (err error) {
				now := cp.c.cfg.Now()
				handOff, raised = nil, driver.Promotion{}
				if results, err = lifecycle.CompleteMany(ctx, ex, claims, keep, presume, now); err != nil {
					return err
				}
				if inTx {
					if err = lifecycle.SettleMany(ctx, ex, results, claims, now); err != nil {
						return err
					}
				}
				if len(room) > 0 {
					if handOff, err = lifecycle.HandOff(ctx, ex, results, room, cp.proc.ID(), now); err != nil {
						return err
					}
				}
				if adaptive != nil {
					raised, err = lifecycle.RecoverMany(ctx, ex, claims, adaptive, results, now)
				}
				return err
			})
			if !presume || !errors.Is(err, lifecycle.ErrMismatch) {
				return err
			}
		}
	})
	if err == nil && handOff != nil {
		handed = handOff() // committed: the hand-off's claims hold
	}
	if err == nil {
		cp.settleLate(results, claims)
	}
	cp.c.ReadyAll(raised.Queues)
	if len(room) > 0 && (err != nil || tries > 1) {
		// An attempt failed: its COMMIT may have landed unseen, with
		// hand-off claims no run holds; the next claim check unclaims
		// them.
		cp.proc.suspectStrays()
	}
	for q, n := range room {
		cp.workers[q].handed(ctx, handed[q], n)
		handedOff += len(handed[q])
	}
	for i, b := range batch {
		if err != nil {
			b.then(lifecycle.Result{}, err)
		} else {
			b.then(results[i], nil)
		}
	}
	return handedOff
}

// settleLate settles, in a transaction of its own, the completed jobs
// that others came to wait for while they ran, which one write ended
// without a transaction (write): rare, as a dependent is enqueued on a
// running job. Should it fail, or the process die first, the
// dispatcher's repair settles them (lifecycle.SettleEnded).
func (cp *completer) settleLate(results []lifecycle.Result, claims []*driver.Claim) {
	ctx := cp.ctx
	for i := range results {
		if !results[i].HasDependents {
			continue
		}
		err := cp.c.retryDB(ctx, "settle the jobs waiting for a completed job", func() error {
			return driver.InTx(ctx, cp.c.drv, func(ex driver.Executor) error {
				r := []lifecycle.Result{{HasDependents: true}}
				if err := lifecycle.SettleMany(ctx, ex, r, claims[i:i+1], cp.c.cfg.Now()); err != nil {
					return err
				}
				results[i].Promoted.Add(r[0].Promoted)
				return nil
			})
		})
		if err != nil {
			cp.c.log.Warn("bq: could not settle the jobs waiting for a completed job; the dispatcher will",
				"job_id", claims[i].ID, "err", err)
		}
		results[i].HasDependents = false
	}
}

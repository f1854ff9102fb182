package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
)

var _ = register(
	scenario{"ContentionSoak", testContentionSoak},
)

// conflictCounter is a driver that counts the transient conflicts
// (deadlocks, lock wait timeouts, busy database) its transactions meet.
type conflictCounter struct {
	driver.Driver
	seen *atomic.Int64
}

func (d conflictCounter) Retryable(err error) bool {
	retry := d.Driver.Retryable(err)
	if retry {
		d.seen.Add(1)
	}
	return retry
}

// testContentionSoak: 8 goroutines enqueue batches of 50 To=2 jobs over
// 20 shared keys, each batch in a random key order, while 3 worker
// processes x 4 slots drain them. The keys are a window that moves on
// every 500 ms, so new semaphores are created under contention too. The
// enqueuers keep a bounded backlog ahead of the workers, so the run is
// about 9 s of enqueue, claim and completion fighting over the same
// semaphores, and a few more of drain, on any database.
//
// No error reaches a caller (a deadlock must be retried inside bq, never
// surface from EnqueueMany), no key ever runs more than 2 jobs at once
// (from the runs the worker processes record), and every job completes
// exactly once.
func testContentionSoak(t *testing.T, h *harness) {
	const (
		enqueuers  = 8
		batch      = 50
		keys       = 20
		to         = 2
		enqueueFor = 9 * time.Second
		// The backlog the enqueuers keep ahead of the workers is what
		// the workers drain in about 2 s at their pace so far (SQLite
		// shared by four processes is far slower than a server), within
		// these bounds.
		minBacklog, maxBacklog = 50, 300
	)
	ctx := context.Background()
	var seen atomic.Int64
	client, err := bq.NewClient(driver.Seal(conflictCounter{Driver: h.driver(), seen: &seen}), testConfig())
	if err != nil {
		t.Fatal(err)
	}
	retriedBefore := driver.RetriedConflicts.Load()
	stopWorkers := h.spawnWorkers(3, 4)

	start := time.Now()
	deadline := start.Add(enqueueFor)
	var (
		enqueued, finished atomic.Int64
		backlog            atomic.Int64
		mu                 sync.Mutex
		ids                []int64
		wg                 sync.WaitGroup
		callerErrs         atomic.Int64
	)
	backlog.Store(minBacklog)
	for g := range enqueuers {
		wg.Go(func() {
			for seq := 0; ; seq++ {
				// Reserve the batch's place in the backlog, or wait.
				for enqueued.Add(batch)-finished.Load() > backlog.Load() {
					enqueued.Add(-batch)
					if time.Now().After(deadline) {
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
				if time.Now().After(deadline) {
					enqueued.Add(-batch)
					return
				}
				// The window of keys moves on every 500 ms, so enqueuers
				// also race to create the same new semaphores.
				window := int(time.Since(start) / (500 * time.Millisecond))
				order := rand.Perm(keys)
				args := make([]Args, batch)
				for i := range args {
					args[i] = Args{Test: h.test, Key: fmt.Sprintf("soak-%03d", window+order[i%keys]),
						Seq: g*1_000_000 + seq*batch + i, SleepMS: rand.IntN(8)}
				}
				res, err := limit2Job.EnqueueMany(ctx, client, args)
				if err != nil {
					callerErrs.Add(1)
					t.Errorf("enqueuer %d: EnqueueMany: %v", g, err)
					return
				}
				mu.Lock()
				for _, r := range res {
					if r.ID == 0 || r.State == bq.StateDiscarded {
						t.Errorf("enqueuer %d: %+v: want every job stored (Block)", g, r)
					}
					ids = append(ids, r.ID)
				}
				mu.Unlock()
			}
		})
	}
	enqueueDone := make(chan struct{})
	go func() { wg.Wait(); close(enqueueDone) }()
	countFinished := func() int64 {
		return int64(h.count(`SELECT count(*) FROM bq_jobs WHERE finished_at IS NOT NULL`))
	}
poll:
	for {
		select {
		case <-enqueueDone:
			break poll
		case <-time.After(50 * time.Millisecond):
			n := countFinished()
			finished.Store(n)
			rate := float64(n) / time.Since(start).Seconds()
			backlog.Store(min(max(int64(2*rate), minBacklog), maxBacklog))
		}
	}
	enqueueTime := time.Since(start)
	if callerErrs.Load() > 0 {
		t.Fatalf("%d EnqueueMany calls failed: a transient conflict must be retried inside bq", callerErrs.Load())
	}
	total := enqueued.Load()
	drained := time.Now().Add(30 * time.Second)
	for countFinished() != total {
		if time.Now().After(drained) {
			t.Fatalf("timed out after 30s waiting for %d jobs to complete: %d finished; ready %d, running %d, blocked %d, scheduled %d, failed %d; semaphores with free slots and blocked jobs: %d",
				total, countFinished(), h.count(`SELECT count(*) FROM bq_ready_executions`),
				h.count(`SELECT count(*) FROM bq_claimed_executions`), h.count(`SELECT count(*) FROM bq_blocked_executions`),
				h.count(`SELECT count(*) FROM bq_scheduled_executions`), h.count(`SELECT count(*) FROM bq_failed_executions`),
				h.count(`SELECT count(*) FROM bq_semaphores WHERE value > 0 AND blocked > 0`))
		}
		time.Sleep(20 * time.Millisecond)
	}
	drainTime := time.Since(start)
	stopWorkers()

	runs := h.dbRuns(t)
	perJob := map[int64]int{}
	for _, r := range runs {
		perJob[r.JobID]++
		if r.End.IsZero() || r.End.Before(r.Start) {
			t.Errorf("job %d: run has no end", r.JobID)
		}
	}
	if int64(len(ids)) != total {
		t.Fatalf("%d ids for %d jobs enqueued", len(ids), total)
	}
	bad := 0
	for _, id := range ids {
		if perJob[id] != 1 {
			if bad++; bad <= 10 {
				t.Errorf("job %d ran %d times, want exactly once", id, perJob[id])
			}
		}
	}
	if len(runs) != len(ids) {
		t.Errorf("%d runs recorded for %d jobs", len(runs), len(ids))
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs WHERE finished_at IS NULL OR discarded OR attempt <> 1`); n != 0 {
		t.Errorf("%d jobs not completed at their first attempt", n)
	}
	overlap := maxOverlap(runs)
	most, reached := 0, 0
	for key, n := range overlap {
		if n > to {
			t.Errorf("key %s: %d runs overlapped, limit %d", key, n, to)
		}
		most = max(most, n)
		if n == to {
			reached++
		}
	}
	// Reaching the limit is OverlapAcrossProcesses's to pin: jobs this
	// short, this spread over keys, may never meet; it is only logged.
	h.checkSemaphores()
	if n := h.count(`SELECT count(*) FROM bq_semaphores WHERE value <> lim OR blocked <> 0`); n != 0 {
		t.Errorf("%d semaphores still hold slots or blocked jobs after the drain", n)
	}
	workersRetried := h.count(`SELECT coalesce(sum(retried), 0) FROM test_conflicts`)
	t.Logf("%s: %d jobs in %d batches over windows of %d keys (To=%d): enqueued in %s, drained in %s (%.0f jobs/s); "+
		"transient conflicts met by enqueuers %d (every one retried: no EnqueueMany failed; this process's InTx retried %d meanwhile, other tests included); "+
		"retried by worker processes %d; max overlap %d (limit %d, reached on %d of %d keys)",
		h.db, total, total/batch, keys, to, enqueueTime.Round(time.Millisecond), drainTime.Round(time.Millisecond),
		float64(total)/drainTime.Seconds(), seen.Load(), driver.RetriedConflicts.Load()-retriedBefore,
		workersRetried, most, to, reached, len(overlap))
}

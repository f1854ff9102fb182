package drivertest

import (
	"slices"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Pauses: the paused-queue rows, and the gate the engine's claim rule
// reads from them (lifecycle.Claim).
var _ = add("pauses",
	test{"PauseQueueIsIdempotent", func(t *testing.T, f *fixture) {
		if ok, err := f.ex().QueuePause(f.ctx, "q", T0); err != nil || !ok {
			t.Fatalf("first PauseQueue = %v, %v; want true", ok, err)
		}
		if ok, err := f.ex().QueuePause(f.ctx, "q", T0.Add(time.Hour)); err != nil || ok {
			t.Errorf("second PauseQueue = %v, %v; want false (already paused)", ok, err)
		}
		_, err := f.ex().QueuePause(f.ctx, "a", T0)
		f.must(err)
		got, err := f.ex().QueueListPaused(f.ctx)
		f.must(err)
		if len(got) != 2 || got[0].Queue != "a" || got[1].Queue != "q" {
			t.Fatalf("PausedQueues = %+v, want a and q in queue order", got)
		}
		f.sameTime("q's paused_at (the first pause's)", got[1].PausedAt, T0)
	}},
	test{"ResumeQueueReportsWhetherPaused", func(t *testing.T, f *fixture) {
		if ok, err := f.ex().QueueResume(f.ctx, "q"); err != nil || ok {
			t.Errorf("ResumeQueue of a queue never paused = %v, %v; want false", ok, err)
		}
		_, err := f.ex().QueuePause(f.ctx, "q", T0)
		f.must(err)
		if ok, err := f.ex().QueueResume(f.ctx, "q"); err != nil || !ok {
			t.Errorf("ResumeQueue of a paused queue = %v, %v; want true", ok, err)
		}
		if got, err := f.ex().QueueListPaused(f.ctx); err != nil || len(got) != 0 {
			t.Errorf("PausedQueues after the resume = %+v, %v; want none", got, err)
		}
	}},
	test{"QueueGateReadsCapAndPause", func(t *testing.T, f *fixture) {
		_, err := f.ex().PolicyInsert(f.ctx, driver.Policy{Queue: "capped", Namespace: "ns", MaxActive: 4, UpdatedAt: T0})
		f.must(err)
		_, err = f.ex().QueuePause(f.ctx, "paused", T0)
		f.must(err)
		for queue, want := range map[string]driver.Gate{
			"free": {}, "capped": {MaxActive: 4}, "paused": {Paused: true},
		} {
			f.tx(func(ex driver.Executor) error {
				got, err := ex.QueueGateGet(f.ctx, queue)
				if err == nil && got != want {
					t.Errorf("QueueGate(%s) in a transaction = %+v, want %+v", queue, got, want)
				}
				return err
			})
			if got, err := f.ex().QueueGateGet(f.ctx, queue); err != nil || got != want {
				t.Errorf("QueueGate(%s) = %+v, %v; want %+v", queue, got, err, want)
			}
		}
	}},
	test{"ClaimKeepsEveryQueuesGate", func(t *testing.T, f *fixture) {
		// The driver's Claim, whatever way it takes (one statement, a
		// locking read that checks the gate, the rule's transaction):
		// an uncapped queue and one whose policy caps only keys give
		// their best jobs, a capped queue no more than its cap, a paused
		// one nothing.
		var ids []int64
		for _, q := range []string{"free", "policed", "capped", "paused"} {
			ids = append(ids, f.insert(T0, job(q, prio(1)), job(q), job(q))...)
		}
		_, err := f.ex().PolicyInsert(f.ctx, driver.Policy{Queue: "capped", Namespace: "ns", MaxActive: 1, UpdatedAt: T0})
		f.must(err)
		_, err = f.ex().PolicyInsert(f.ctx, driver.Policy{Queue: "policed", Namespace: "ns", MaxActivePerKey: 2, UpdatedAt: T0})
		f.must(err)
		_, err = f.ex().QueuePause(f.ctx, "paused", T0)
		f.must(err)
		for i, q := range []string{"free", "policed", "capped", "paused"} {
			got := f.engineClaim(q, 2, 3, T0)
			want := ids[3*i : 3*i+2] // the higher priority first, then FIFO
			switch q {
			case "capped":
				want = want[:1]
			case "paused":
				want = nil
			}
			if !slices.Equal(claimIDs(got), want) {
				t.Errorf("Claim(%s) took %v, want %v", q, claimIDs(got), want)
			}
			for _, c := range got {
				if c.Queue != q || !c.ClaimedAt.Equal(T0) || c.Fence == 0 {
					t.Errorf("claim of job %d: queue %q, claimed at %v, fence %d", c.ID, c.Queue, c.ClaimedAt, c.Fence)
				}
			}
			f.wantState(driver.StateRunning, want...)
		}
	}},
	test{"ClaimTakesNothingFromAPausedQueue", func(t *testing.T, f *fixture) {
		f.insert(T0, jobs(3, "q")...)
		_, err := f.ex().QueuePause(f.ctx, "q", T0)
		f.must(err)
		if got := f.engineClaim("q", 5, 1, T0); len(got) != 0 {
			t.Errorf("claim of a paused queue took %d", len(got))
		}
		f.insert(T0, job("q")) // enqueues go on while paused
		_, err = f.ex().QueueResume(f.ctx, "q")
		f.must(err)
		if got := f.engineClaim("q", 5, 1, T0); len(got) != 4 {
			t.Errorf("claim after the resume took %d of 4", len(got))
		}
	}},
)

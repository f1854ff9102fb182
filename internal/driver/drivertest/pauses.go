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
		if ok, err := f.ex().PauseQueue(f.ctx, "q", T0); err != nil || !ok {
			t.Fatalf("first PauseQueue = %v, %v; want true", ok, err)
		}
		if ok, err := f.ex().PauseQueue(f.ctx, "q", T0.Add(time.Hour)); err != nil || ok {
			t.Errorf("second PauseQueue = %v, %v; want false (already paused)", ok, err)
		}
		_, err := f.ex().PauseQueue(f.ctx, "a", T0)
		f.must(err)
		got, err := f.ex().PausedQueues(f.ctx)
		f.must(err)
		if len(got) != 2 || got[0].Queue != "a" || got[1].Queue != "q" {
			t.Fatalf("PausedQueues = %+v, want a and q in queue order", got)
		}
		f.sameTime("q's paused_at (the first pause's)", got[1].PausedAt, T0)
	}},
	test{"ResumeQueueReportsWhetherPaused", func(t *testing.T, f *fixture) {
		if ok, err := f.ex().ResumeQueue(f.ctx, "q"); err != nil || ok {
			t.Errorf("ResumeQueue of a queue never paused = %v, %v; want false", ok, err)
		}
		_, err := f.ex().PauseQueue(f.ctx, "q", T0)
		f.must(err)
		if ok, err := f.ex().ResumeQueue(f.ctx, "q"); err != nil || !ok {
			t.Errorf("ResumeQueue of a paused queue = %v, %v; want true", ok, err)
		}
		if got, err := f.ex().PausedQueues(f.ctx); err != nil || len(got) != 0 {
			t.Errorf("PausedQueues after the resume = %+v, %v; want none", got, err)
		}
	}},
	test{"QueueGateReadsCapAndPause", func(t *testing.T, f *fixture) {
		_, err := f.ex().InsertPolicy(f.ctx, driver.Policy{Queue: "capped", Namespace: "ns", MaxActive: 4, UpdatedAt: T0})
		f.must(err)
		_, err = f.ex().PauseQueue(f.ctx, "paused", T0)
		f.must(err)
		for queue, want := range map[string]driver.Gate{
			"free": {}, "capped": {MaxActive: 4}, "paused": {Paused: true},
		} {
			f.tx(func(ex driver.Executor) error {
				got, err := ex.QueueGate(f.ctx, queue)
				if err == nil && got != want {
					t.Errorf("QueueGate(%s) in a transaction = %+v, want %+v", queue, got, want)
				}
				return err
			})
			if got, err := f.ex().QueueGate(f.ctx, queue); err != nil || got != want {
				t.Errorf("QueueGate(%s) = %+v, %v; want %+v", queue, got, err, want)
			}
		}
	}},
	test{"ClaimUncappedTxLeavesCappedAndPausedQueues", func(t *testing.T, f *fixture) {
		var claimer bool
		f.tx(func(ex driver.Executor) error {
			_, claimer = ex.(driver.TxUncappedClaimer)
			return nil
		})
		if !claimer {
			t.Skip("the driver claims no uncapped queue without reading its gate in a transaction")
		}
		var ids []int64
		for _, q := range []string{"free", "policed", "capped", "paused"} {
			ids = append(ids, f.insert(T0, job(q, prio(1)), job(q), job(q))...)
		}
		_, err := f.ex().InsertPolicy(f.ctx, driver.Policy{Queue: "capped", Namespace: "ns", MaxActive: 4, UpdatedAt: T0})
		f.must(err)
		_, err = f.ex().InsertPolicy(f.ctx, driver.Policy{Queue: "policed", Namespace: "ns", MaxActivePerKey: 2, UpdatedAt: T0})
		f.must(err)
		_, err = f.ex().PauseQueue(f.ctx, "paused", T0)
		f.must(err)
		for i, q := range []string{"free", "policed", "capped", "paused"} {
			var got []*driver.Claim
			f.tx(func(ex driver.Executor) (err error) {
				got, err = ex.(driver.TxUncappedClaimer).ClaimUncappedTx(f.ctx, driver.ClaimParams{Queue: q, Max: 2, ProcessID: 3, Now: T0})
				return err
			})
			want := ids[3*i : 3*i+2] // the higher priority first, then FIFO
			if q == "capped" || q == "paused" {
				want = nil
			}
			if !slices.Equal(claimIDs(got), want) {
				t.Errorf("ClaimUncappedTx(%s) took %v, want %v", q, claimIDs(got), want)
			}
			for _, c := range got {
				if c.Queue != q || !c.ClaimedAt.Equal(T0) || c.Fence == 0 {
					t.Errorf("claim of job %d: queue %q, claimed at %v, fence %d", c.ID, c.Queue, c.ClaimedAt, c.Fence)
				}
			}
			f.wantState(driver.StateRunning, want...)
		}
		// The engine's claim still takes from the capped queue, within its
		// cap, and nothing from the paused one.
		if got := f.engineClaim("capped", 5, 3, T0); len(got) != 3 {
			t.Errorf("claim of the capped queue took %d of 3", len(got))
		}
		if got := f.engineClaim("paused", 5, 3, T0); len(got) != 0 {
			t.Errorf("claim of the paused queue took %d", len(got))
		}
	}},
	test{"ClaimTakesNothingFromAPausedQueue", func(t *testing.T, f *fixture) {
		f.insert(T0, jobs(3, "q")...)
		_, err := f.ex().PauseQueue(f.ctx, "q", T0)
		f.must(err)
		if got := f.engineClaim("q", 5, 1, T0); len(got) != 0 {
			t.Errorf("claim of a paused queue took %d", len(got))
		}
		if one, ok := f.d.Exec().(driver.OneStatementClaimer); ok {
			got, err := one.ClaimUncapped(f.ctx, driver.ClaimParams{Queue: "q", Max: 5, ProcessID: 1, Now: T0})
			if err != nil || len(got) != 0 {
				t.Errorf("ClaimUncapped of a paused queue took %d, %v; want none", len(got), err)
			}
		}
		f.insert(T0, job("q")) // enqueues go on while paused
		_, err = f.ex().ResumeQueue(f.ctx, "q")
		f.must(err)
		if got := f.engineClaim("q", 5, 1, T0); len(got) != 4 {
			t.Errorf("claim after the resume took %d of 4", len(got))
		}
	}},
)

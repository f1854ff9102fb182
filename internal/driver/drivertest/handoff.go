package drivertest

import (
	"slices"
	"testing"

	"github.com/bqueue/bq/internal/driver"
)

// Hand-off: the claim a finishing process makes, in its transaction, of
// the jobs that transaction promoted (lifecycle.HandOff). It keeps every
// rule of a claim: only ready jobs among the ids, of the queue named,
// highest priority first, none from a paused or capped queue, none with
// a rate key (its start needs its ring), none another claimer holds.
var _ = add("handoff",
	test{"HandOffClaimsOnlyTheIdsReadyInItsQueue", func(t *testing.T, f *fixture) {
		rated := func(j *driver.NewJob) { j.Rate = driver.RateSpec{Key: "g/r", Limit: 5, Period: 60e9} }
		// h: ready jobs of priorities 0, 2, 1, one rated, one scheduled;
		// other: a ready job.
		ids := f.insert(T0, job("h"), job("h", prio(2)), job("h", prio(1)), job("h", rated), job("h"), job("other"))
		sched := f.insert(T0, job("h", func(j *driver.NewJob) { j.State = driver.StateScheduled; j.ScheduledAt = T0.Add(60e9) }))
		all := append(slices.Clone(ids), sched...)
		var got []*driver.Claim
		f.tx(func(ex driver.Executor) (err error) {
			got, err = ex.ReadyClaimHandOff(f.ctx, driver.HandOffParams{Queue: "h", IDs: all, Max: 3, ProcessID: 9, Now: T0})
			return err
		})
		// The best three of h's plain ready jobs: priority 2, 1, then the
		// oldest of priority 0; not the rated one, not other's, not the
		// scheduled one.
		if want := []int64{ids[1], ids[2], ids[0]}; !slices.Equal(claimIDs(got), want) {
			t.Fatalf("hand-off took %v, want %v", claimIDs(got), want)
		}
		for _, c := range got {
			if c.Queue != "h" || !c.ClaimedAt.Equal(T0) || c.Fence == 0 {
				t.Errorf("claim of job %d: queue %q, claimed at %v, fence %d", c.ID, c.Queue, c.ClaimedAt, c.Fence)
			}
		}
		f.wantState(driver.StateRunning, ids[1], ids[2], ids[0])
		f.wantState(driver.StateReady, ids[3], ids[4], ids[5])
		// Only the ids given: ids[4] is ready in h but was not promoted.
		f.tx(func(ex driver.Executor) (err error) {
			got, err = ex.ReadyClaimHandOff(f.ctx, driver.HandOffParams{Queue: "h", IDs: ids[3:4], Max: 5, ProcessID: 9, Now: T0})
			return err
		})
		if len(got) != 0 {
			t.Errorf("hand-off of a rated job took %v, want none", claimIDs(got))
		}
		if h, err := f.ex().ClaimListOfProcess(f.ctx, 9); err != nil || len(h) != 3 {
			t.Errorf("process 9 holds %d claims (%v), want 3", len(h), err)
		}
	}},
	test{"HandOffTakesNothingFromAPausedOrCappedQueue", func(t *testing.T, f *fixture) {
		paused := f.insert(T0, job("paused"), job("paused"))
		capped := f.insert(T0, job("capped"), job("capped"))
		policed := f.insert(T0, job("policed"))
		_, err := f.ex().QueuePause(f.ctx, "paused", T0)
		f.must(err)
		_, err = f.ex().PolicyInsert(f.ctx, driver.Policy{Queue: "capped", Namespace: "ns", MaxActive: 5, UpdatedAt: T0})
		f.must(err)
		// A policy that caps only keys leaves the queue uncapped.
		_, err = f.ex().PolicyInsert(f.ctx, driver.Policy{Queue: "policed", Namespace: "ns", MaxActivePerKey: 2, UpdatedAt: T0})
		f.must(err)
		for q, want := range map[string][]int64{"paused": nil, "capped": nil, "policed": policed} {
			var got []*driver.Claim
			f.tx(func(ex driver.Executor) (err error) {
				got, err = ex.ReadyClaimHandOff(f.ctx, driver.HandOffParams{Queue: q, IDs: slices.Concat(paused, capped, policed), Max: 5, ProcessID: 9, Now: T0})
				return err
			})
			if !slices.Equal(claimIDs(got), want) {
				t.Errorf("hand-off from queue %s took %v, want %v", q, claimIDs(got), want)
			}
		}
		f.wantState(driver.StateReady, append(paused, capped...)...)
	}},
)

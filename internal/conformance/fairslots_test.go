package conformance

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(scenario{"FairShareCountsSlots", testFairShareCountsSlots})

// testFairShareCountsSlots: a fair-share queue capped at 12 slots
// (MaxActive), two tenants of equal weight, P's jobs of 2 slots and Q's
// of 1, worked by two processes of 10: while both have work, each uses
// about half the slots (P runs 3 jobs, Q 6), not half the jobs (P 4 = 8
// slots, Q 4), which is what counting running jobs instead of their
// slots settles at.
func testFairShareCountsSlots(t *testing.T, h *harness) {
	fleetTurn(t, h)
	ctx := context.Background()
	if err := h.client.SyncPolicies(ctx, "conformance", []bq.Policy{{Queue: "fair", FairShare: true, MaxActive: 12}}); err != nil {
		t.Fatal(err)
	}
	plan := planFor(h)
	np, nq := plan.xy/5, 2*plan.xy/5
	enqueueSlots := func(key string, n, slots int) {
		args := make([]Args, n)
		for i := range args {
			args[i] = Args{Test: h.test, Key: key, Seq: i, SleepMS: plan.runMS}
		}
		if _, err := fairJob.EnqueueMany(ctx, h.client, args, bq.Slots(slots)); err != nil {
			t.Fatalf("enqueue %d jobs of tenant %s: %v", n, key, err)
		}
	}
	enqueueSlots("P", np, 2)
	enqueueSlots("Q", nq, 1)
	var cmds []*exec.Cmd
	for range 2 {
		cmds = append(cmds, h.spawn("worker", fairSlots/2, "BQ_QUEUE=fair"))
	}
	h.eventually(90*time.Second, "P's and Q's jobs to complete", func() bool {
		return h.count(`SELECT count(*) FROM bq_jobs WHERE finished_at IS NOT NULL`) == np+nq
	})
	h.stop(cmds...)
	runs := h.dbRuns(t)
	ps, qs := runsOf(runs, "P"), runsOf(runs, "Q")
	// Slot-samples every 10 ms, from one run time after both started
	// until either has less left than its share of runs (3 and 6).
	var p, q, most int
	both := overlapWindow(ps, qs)
	for at := both.from.Add(time.Duration(plan.runMS) * time.Millisecond); at.Before(both.to); at = at.Add(10 * time.Millisecond) {
		if np-endedBy(ps, at) < 3 || nq-endedBy(qs, at) < 6 {
			continue
		}
		rp, rq := 2*runningAt(ps, at), runningAt(qs, at)
		p, q, most = p+rp, q+rq, max(most, rp+rq)
	}
	if p == 0 || q == 0 {
		t.Fatalf("P and Q never ran side by side with work left (P %d, Q %d slot-samples)", p, q)
	}
	ratio := float64(p) / float64(q)
	t.Logf("P (2 slots a job) : Q (1 slot) slots in use while both had work: %.2f; at most %d slots at once", ratio, most)
	if ratio < 0.75 || ratio > 1.33 {
		t.Errorf("P:Q slots in use %.2f, want 1 (equal weights) within a third; counting jobs instead of slots gives 2", ratio)
	}
	if most > 12 {
		t.Errorf("%d slots in use at once, past the queue's MaxActive 12", most)
	}
}

package conformance

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(scenario{"CappedQueueKeepsItsSlotsBusy", testCappedQueueKeepsItsSlotsBusy})

// testCappedQueueKeepsItsSlotsBusy: a queue capped at 2 by policy
// (MaxActive), 12 jobs of 100 ms (each on a key of its own, so only the
// cap binds), worked by one process of 6 slots that polls once a minute:
// the cap leaves each claim short, and the worker must claim again as its
// runs end rather than take the short claim for a drained queue and wait
// for its poll. Every job runs once within 30 s (the poll alone would
// take a minute a pair), and the queue runs 2 at a time, never more.
func testCappedQueueKeepsItsSlotsBusy(t *testing.T, h *harness) {
	ctx := context.Background()
	if err := h.client.SyncPolicies(ctx, "ops", []bq.Policy{{Queue: "capturn", MaxActive: 2}}); err != nil {
		t.Fatal(err)
	}
	const n = 12
	var ids []int64
	for i := range n {
		key := fmt.Sprintf("c%d", i)
		res := enqueue(t, h, slJob, Args{Key: key, Seq: i, SleepMS: 100}, bq.WithConcurrencyKey(key, 3), bq.Queue("capturn"))
		ids = append(ids, res.ID)
	}
	cmd := h.spawn("worker", 6, "BQ_QUEUE=capturn", "BQ_POLL=1m", "BQ_DISPATCH=1m")
	h.waitFinished(n, 30*time.Second)
	h.stop(cmd)
	runs := h.dbRuns(t)
	count := map[int64]int{}
	for i := range runs {
		count[runs[i].JobID]++
		runs[i].Key = "queue"
	}
	for _, id := range ids {
		if count[id] != 1 {
			t.Errorf("job %d ran %d times, want once", id, count[id])
		}
	}
	if m := maxOverlap(runs)["queue"]; m != 2 {
		t.Errorf("the queue capped at 2 ran %d jobs at its peak; want 2", m)
	}
	h.checkDrained(ids)
}

package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(scenario{"SlotsHoldTheQueueCap", testSlotsHoldTheQueueCap})

// testSlotsHoldTheQueueCap: a queue capped at 4 by policy (MaxActive),
// 40 jobs of 1, 2 and 3 slots, each on a key of its own (To 3, so only
// the queue's cap binds), worked by three processes of 4 slots each: the
// slots in use across the queue never pass 4 and reach at least 3, and
// every job runs once.
func testSlotsHoldTheQueueCap(t *testing.T, h *harness) {
	ctx := context.Background()
	if err := h.client.SyncPolicies(ctx, "ops", []bq.Policy{{Queue: "slotcap", MaxActive: 4}}); err != nil {
		t.Fatal(err)
	}
	var jobs []slEnqueued
	for i := range 40 {
		k := 1 + rand.IntN(3)
		key := fmt.Sprintf("q%d", i)
		res := enqueue(t, h, slJob, Args{Key: key, Seq: i, SleepMS: 20 + rand.IntN(31)},
			bq.WithConcurrencyKey(key, 3), bq.Slots(k), bq.Queue("slotcap"))
		jobs = append(jobs, slEnqueued{id: res.ID, slots: k, keys: key, enqueuedBefore: i})
	}
	var cmds []*exec.Cmd
	for range 3 {
		cmds = append(cmds, h.spawn("worker", 4, "BQ_QUEUE=slotcap"))
	}
	h.waitFinished(len(jobs), 90*time.Second)
	h.stop(cmds...)
	runs := h.dbRuns(t)
	count := map[int64]int{}
	for _, r := range runs {
		count[r.JobID]++
	}
	for _, j := range jobs {
		if count[j.id] != 1 {
			t.Errorf("job %d (%d slots) ran %d times, want once", j.id, j.slots, count[j.id])
		}
	}
	whole := slWeighted(runs, jobs)
	for i := range whole {
		whole[i].Key = "queue"
	}
	if n := maxOverlap(whole)["queue"]; n > 4 || n < 3 {
		t.Errorf("the queue capped at 4 had %d slots in use at its peak; want 3 or 4, never more", n)
	}
	h.checkSemaphores()
}

package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/dispatcher"
)

var _ = register(
	scenario{"CleanupAndStats", testCleanupAndStats},
)

// testCleanupAndStats: per-queue counts follow the jobs; the dispatcher's
// clean-up drops processes that stopped heartbeating and hold no claim;
// it deletes semaphores expired with every slot free and nothing blocked,
// and keeps those in use.
func testCleanupAndStats(t *testing.T, h *harness) {
	ctx := context.Background()
	enqueue(t, h, limit1Job, Args{Key: "idle"})
	enqueue(t, h, limit1Job, Args{Key: "busy"})
	enqueue(t, h, limit1Job, Args{Key: "busy"})
	enqueue(t, h, unkeyedJob, Args{}, bq.Queue("other"), bq.In(time.Hour))
	live := registerProcess(t, h, time.Now())
	idle := claimOne(t, h, live) // the oldest: idle's job
	claimOne(t, h, live)         // busy's first job
	dead := registerProcess(t, h, time.Now().Add(-time.Hour))

	stats, err := h.client.QueueStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []bq.QueueStats{
		{Queue: "default", Running: 2, Blocked: 1},
		{Queue: "other", Scheduled: 1},
	}
	if len(stats) != len(want) || stats[0] != want[0] || stats[1] != want[1] {
		t.Errorf("queue stats %+v, want %+v", stats, want)
	}

	if ok, err := complete(ctx, h, idle); err != nil || !ok {
		t.Fatalf("complete: %v %v", ok, err)
	}
	later := func() time.Time { return time.Now().Add(10 * time.Minute) }
	witness(t, h)
	pass(t, h, dispatcher.Config{Now: later, ProcessDeadAfter: 30 * time.Minute})
	if n := h.count(`SELECT count(*) FROM bq_processes WHERE id = ` + itoa(dead)); n != 0 {
		t.Errorf("the dead process without claims is still registered")
	}
	if n := h.count(`SELECT count(*) FROM bq_processes WHERE id = ` + itoa(live)); n != 1 {
		t.Errorf("the live process was deleted")
	}
	h.checkSemaphores()

	// The same pass deleted the expired idle semaphore (reclaiming skips
	// idle ones, so they stay expired) and kept the one in use.
	if n := h.count(`SELECT count(*) FROM bq_semaphores WHERE key = 'c.limit1/idle'`); n != 0 {
		t.Errorf("the expired idle semaphore is still there")
	}
	if n := h.count(`SELECT count(*) FROM bq_semaphores WHERE key = 'c.limit1/busy'`); n != 1 {
		t.Errorf("the semaphore of a key with a holder and a blocked job was deleted")
	}
	h.checkSemaphores()
}

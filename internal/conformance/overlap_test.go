package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"OverlapAcrossProcesses", testOverlapAcrossProcesses},
	scenario{"OverlapInProcess", testOverlapInProcess},
)

// testOverlapAcrossProcesses: 3 worker processes x 4 slots drain 200 jobs
// over 5 keys (four To=2, one To=1). Each run records its own start and
// end; per key, runs in progress at once never exceed To, and the To=2
// keys do reach 2 (the limit is not mere serialisation). Every job
// completes exactly once.
func testOverlapAcrossProcesses(t *testing.T, h *harness) {
	ctx := context.Background()
	limits := map[string]int{"k1": 2, "k2": 2, "k3": 2, "k4": 2, "k5": 1}
	var ids []int64
	for i := range 200 {
		key := fmt.Sprintf("k%d", i%5+1)
		job := limit2Job
		if limits[key] == 1 {
			job = limit1Job
		}
		res, err := job.Enqueue(ctx, h.client, Args{Test: h.test, Key: key, Seq: i, SleepMS: 20 + rand.IntN(40)})
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		ids = append(ids, res.ID)
	}
	h.checkSemaphores()
	stop := h.spawnWorkers(3, 4)
	h.eventually(90*time.Second, "200 jobs to complete", func() bool {
		return h.count(`SELECT count(*) FROM bq_jobs WHERE finished_at IS NOT NULL`) == 200
	})
	stop()

	runs := h.dbRuns(t)
	perJob := map[int64]int{}
	pids := map[int]bool{}
	for _, r := range runs {
		perJob[r.JobID]++
		pids[r.PID] = true
		if r.End.IsZero() || r.End.Before(r.Start) {
			t.Errorf("job %d: run has no end", r.JobID)
		}
	}
	for _, id := range ids {
		if perJob[id] != 1 {
			t.Errorf("job %d ran %d times, want exactly once", id, perJob[id])
		}
		if st := h.state(id); st != bq.StateCompleted {
			t.Errorf("job %d is %s, want completed", id, st)
		}
	}
	overlap := maxOverlap(runs)
	for key, to := range limits {
		if overlap[key] > to {
			t.Errorf("key %s: %d runs overlapped, limit %d", key, overlap[key], to)
		}
		if to == 2 && overlap[key] < 2 {
			t.Errorf("key %s: at most %d run at once; with To=2 and 12 slots two should overlap", key, overlap[key])
		}
	}
	if len(pids) < 2 {
		t.Errorf("runs came from %d process(es); want work spread over several", len(pids))
	}
	t.Logf("max overlap per key: %v; processes: %d", overlap, len(pids))
	h.checkSemaphores()
	if n := h.count(`SELECT count(*) FROM bq_semaphores WHERE value <> lim`); n != 0 {
		t.Errorf("%d semaphores still hold slots after the drain", n)
	}
}

// testOverlapInProcess: the same property with two clients in one process
// and a shared group, run under -race.
func testOverlapInProcess(t *testing.T, h *harness) {
	ctx := context.Background()
	for i := range 60 {
		job := groupAJob
		if i%2 == 1 {
			job = groupBJob
		}
		if _, err := job.Enqueue(ctx, h.client, Args{Test: h.test, Key: fmt.Sprintf("g%d", i%3), SleepMS: 2 + rand.IntN(8)}); err != nil {
			t.Fatal(err)
		}
	}
	rec := h.recorder()
	for range 2 {
		cfg := testConfig()
		cfg.Queues = map[string]int{"default": 5}
		h.run(h.clientWith(cfg))
	}
	h.eventually(30*time.Second, "60 runs", func() bool { return len(rec.all()) == 60 })
	for key, n := range maxOverlap(rec.all()) {
		if n > 1 {
			t.Errorf("key %s of a shared group with To=1: %d runs overlapped", key, n)
		}
	}
}

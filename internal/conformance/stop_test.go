package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(scenario{"GracefulStopLeavesNoClaim", testGracefulStopLeavesNoClaim})

// gracefulStops is how many times in a row a claiming worker is stopped.
const gracefulStops = 6

// testGracefulStopLeavesNoClaim: a worker process stopped with SIGTERM
// while it claims (jobs keep arriving, and the signal lands at a random
// moment of its claim loop) returns from Run leaving no claim of its own:
// every claim it committed was run to its end or went back to ready with
// its slot. Six stops in a row; then a worker drains what is left and
// every job completes once.
func testGracefulStopLeavesNoClaim(t *testing.T, h *harness) {
	ctx := context.Background()
	var mu sync.Mutex
	var ids []int64
	add := func(n int) {
		for i := range n {
			job, a := unkeyedJob, Args{Test: h.test, Mode: "poll-ctx", SleepMS: 30 + rand.IntN(50)}
			if i%3 == 0 {
				job, a.Key = limit2Job, fmt.Sprintf("gs%d", i%4)
			}
			res, err := job.Enqueue(ctx, h.client, a)
			if err != nil {
				t.Errorf("enqueue: %v", err)
				return
			}
			mu.Lock()
			ids = append(ids, res.ID)
			mu.Unlock()
		}
	}
	// A claim the database committed but the worker never saw (its
	// caller gave up as the statement committed) is returned too.
	orphan := enqueue(t, h, limit1Job, Args{Test: h.test, Key: "gs-orphan"})
	behind := enqueue(t, h, limit1Job, Args{Test: h.test, Key: "gs-orphan"})
	ids = append(ids, orphan.ID, behind.ID)
	claimOne(t, h, registerProcess(t, h, time.Now()))
	w := h.spawn("workers", 4, "BQ_POLL=1h")
	h.eventually(20*time.Second, "the worker to register", func() bool {
		return h.count(`SELECT count(*) FROM bq_processes WHERE name <> 'test'`) == 1
	})
	h.exec(`UPDATE bq_claimed_executions SET process_id = (SELECT max(id) FROM bq_processes)`,
		`UPDATE bq_claimed_executions SET process_id = (SELECT max(id) FROM bq_processes)`,
		`UPDATE bq_claimed_executions SET process_id = (SELECT max(id) FROM (SELECT id FROM bq_processes) p)`)
	h.exec(`DELETE FROM bq_processes WHERE name = 'test'`, `DELETE FROM bq_processes WHERE name = 'test'`,
		`DELETE FROM bq_processes WHERE name = 'test'`)
	_ = w.Process.Signal(syscall.SIGTERM)
	if err := w.Wait(); err != nil {
		t.Fatalf("the worker did not stop cleanly: %v", err)
	}
	if info := jobInfo(t, h, orphan.ID); info.State != bq.StateReady || info.Attempts != 0 {
		t.Errorf("a claim no run took, after a clean stop: %s with %d attempts, want ready with 0", info.State, info.Attempts)
	}
	if st := h.state(behind.ID); st != bq.StateBlocked {
		t.Errorf("the job behind it: %s, want blocked (the returned claim keeps its slot)", st)
	}
	h.checkSemaphores()

	add(20)
	left := 0
	for round := range gracefulStops {
		w := h.spawn("workers", 4, "BQ_POLL=10ms")
		h.waitProcesses(1)
		feeding := make(chan struct{})
		go func() { defer close(feeding); add(10) }()
		time.Sleep(time.Duration(rand.IntN(150)) * time.Millisecond)
		_ = w.Process.Signal(syscall.SIGTERM)
		if err := w.Wait(); err != nil {
			t.Fatalf("round %d: the worker did not stop cleanly: %v", round, err)
		}
		<-feeding
		n := h.count(`SELECT count(*) FROM bq_claimed_executions`)
		left += n
		if n != 0 {
			t.Errorf("round %d: %d claims left behind by a worker that stopped cleanly", round, n)
		}
		if p := h.count(`SELECT count(*) FROM bq_processes`); p != 0 {
			t.Errorf("round %d: %d process rows left behind", round, p)
		}
	}

	stop := h.spawnWorkers(1, 4)
	h.waitFinished(len(ids), 60*time.Second)
	stop()
	for _, id := range ids {
		if info := jobInfo(t, h, id); info.Attempts != 1 {
			t.Errorf("job %d completed after %d attempts, want 1: a stop spent an attempt", id, info.Attempts)
		}
	}
	h.checkDrained(ids)
	t.Logf("%s: %d jobs over %d graceful stops; %d claims left behind", h.db, len(ids), gracefulStops, left)
}

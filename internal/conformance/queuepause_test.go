package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
)

var _ = register(
	scenario{"QueuePauseStopsClaimsInEveryProcess", testQueuePauseAcrossProcesses},
	scenario{"QueuePauseGatesEveryClaimPath", testQueuePauseClaimPaths},
	scenario{"QueuePauseKeepsSlotsOfSharedKey", testQueuePauseSharedKey},
	scenario{"QueuePauseBadInputAndRepeats", testQueuePauseBadInput},
)

// testQueuePauseAcrossProcesses: a pause made by one client stops the
// claims of two other worker processes; enqueues go on; resuming wakes
// those workers, whose poll is 10 s, so the jobs start at once.
func testQueuePauseAcrossProcesses(t *testing.T, h *harness) {
	ctx := context.Background()
	q := bq.Queue("pq")
	stop := func() {}
	defer func() { stop() }()
	w1 := h.spawn("workers", 4, "BQ_POLL=10s", "BQ_QUEUE=pq")
	w2 := h.spawn("workers", 4, "BQ_POLL=10s", "BQ_QUEUE=pq")
	stop = func() { h.stop(w1, w2) }
	h.eventually(20*time.Second, "the workers to register", func() bool {
		return h.count(`SELECT count(*) FROM bq_processes`) == 2
	})
	first := enqueue(t, h, unkeyedJob, Args{Seq: 0}, q).ID
	if _, ok := h.startedAt(first, 20*time.Second); !ok {
		t.Fatal("the first job did not start: the workers are not claiming")
	}
	if err := h.client.PauseQueue(ctx, "pq"); err != nil {
		t.Fatal(err)
	}
	var ids, keyed []int64
	for i := range 6 {
		// Each enqueue wakes the workers: they claim, and find the queue paused.
		ids = append(ids, enqueue(t, h, unkeyedJob, Args{Seq: i + 1, SleepMS: 50}, q).ID)
	}
	// A key of limit 1: the first takes the slot and waits ready, the rest blocked.
	for i := range 4 {
		keyed = append(keyed, enqueue(t, h, limit1Job, Args{Key: "pk", Seq: i, SleepMS: 50}, q).ID)
	}
	time.Sleep(time.Second)
	if n := h.count(`SELECT count(*) FROM test_runs`); n != 1 {
		t.Fatalf("%d runs while the queue was paused: want only the one before the pause", n-1)
	}
	if n := h.count(`SELECT count(*) FROM bq_ready_executions`); n != len(ids)+1 {
		t.Errorf("%d jobs ready while paused, want the %d unkeyed and the key's holder", n, len(ids))
	}
	stats, err := h.client.QueueStats(ctx)
	if err != nil || len(stats) != 1 || !stats[0].Paused || stats[0].Ready != len(ids)+1 || stats[0].Blocked != len(keyed)-1 {
		t.Errorf("QueueStats = %+v, %v: want pq paused with %d ready and %d blocked", stats, err, len(ids)+1, len(keyed)-1)
	}
	h.checkSemaphores()

	resumed := time.Now()
	if err := h.client.ResumeQueue(ctx, "pq"); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		started, ok := h.startedAt(id, 20*time.Second)
		if !ok {
			t.Fatalf("job %d did not start after the resume", id)
		}
		// The workers poll every 10 s: only the resume's wake-up starts them this soon.
		if took := started.Sub(resumed); took > 3*time.Second {
			t.Errorf("job %d started %s after the resume: want the workers woken at once", id, took)
		}
	}
	for _, id := range append(ids, keyed...) {
		h.waitState(id, bq.StateCompleted)
	}
	stop()
	stop = func() {}
	if n, want := h.count(`SELECT count(*) FROM test_runs`), len(ids)+len(keyed)+1; n != want {
		t.Errorf("%d runs, want %d: each job once", n, want)
	}
	if n := maxOverlap(h.dbRuns(t))["pk"]; n > 1 {
		t.Errorf("key pk (limit 1) ran %d jobs at once across the two processes", n)
	}
	h.checkSemaphores()
}

// testQueuePauseClaimPaths: the engine's claim rule takes nothing from a
// paused queue whether it is uncapped (PostgreSQL's one-statement claim)
// or capped by MaxActive (the claim's transaction), and takes again once
// resumed.
func testQueuePauseClaimPaths(t *testing.T, h *harness) {
	ctx := context.Background()
	if err := h.client.SyncPolicies(ctx, "test", []bq.Policy{{Queue: "capped", MaxActive: 5}}); err != nil {
		t.Fatal(err)
	}
	process := registerProcess(t, h, time.Now())
	claim := func(queue string) int {
		claims, err := lifecycle.Claim(ctx, h.driver(), driver.ClaimParams{Queue: queue, Max: 1, ProcessID: process, Now: time.Now()})
		if err != nil {
			t.Fatalf("claim from %s: %v", queue, err)
		}
		return len(claims)
	}
	for _, queue := range []string{"default", "capped"} {
		for range 2 {
			enqueue(t, h, unkeyedJob, Args{}, bq.Queue(queue))
		}
		if err := h.client.PauseQueue(ctx, queue); err != nil {
			t.Fatal(err)
		}
		if n := claim(queue); n != 0 {
			t.Errorf("%s: claimed %d jobs while paused, want 0", queue, n)
		}
		if err := h.client.ResumeQueue(ctx, queue); err != nil {
			t.Fatal(err)
		}
		if n := claim(queue); n != 1 {
			t.Errorf("%s: claimed %d jobs after the resume, want 1", queue, n)
		}
	}
}

// testQueuePauseSharedKey pins docs/limits.md: a paused queue's ready
// keyed job keeps its slot, so a job of another queue sharing its key
// stays blocked behind it, while that other queue's other keys run; the
// resume runs the holder and then promotes the blocked job, one at a time.
func testQueuePauseSharedKey(t *testing.T, h *harness) {
	ctx := context.Background()
	cfg := testConfig()
	cfg.Queues = map[string]int{"default": 2, "other": 2}
	h.run(h.clientWith(cfg))
	if err := h.client.PauseQueue(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	holder := enqueue(t, h, groupAJob, Args{Key: "k", SleepMS: 100})
	if holder.State != bq.StateReady {
		t.Fatalf("the paused queue's job: %+v, want ready (it takes the free slot)", holder)
	}
	waiter := enqueue(t, h, groupBJob, Args{Key: "k", SleepMS: 100}, bq.Queue("other"))
	if waiter.State != bq.StateBlocked {
		t.Fatalf("the other queue's job of the same key: %+v, want blocked behind the holder", waiter)
	}
	free := enqueue(t, h, groupBJob, Args{Key: "k2"}, bq.Queue("other"))
	h.waitState(free.ID, bq.StateCompleted)
	time.Sleep(500 * time.Millisecond)
	if s := h.state(holder.ID); s != bq.StateReady {
		t.Errorf("the holder is %s while its queue is paused, want ready", s)
	}
	if s := h.state(waiter.ID); s != bq.StateBlocked {
		t.Errorf("the waiter is %s while the holder's queue is paused, want blocked", s)
	}
	h.checkSemaphores()
	// Explain says why each waits: the pause, and the holder the pause keeps.
	for id, want := range map[int64]string{
		holder.ID: `in queue "default", which is paused`,
		waiter.ID: `Queue "default", where 1 ready holder waits, is paused: it keeps its slot until the queue is resumed.`,
	} {
		if ex, err := h.client.Explain(ctx, id); err != nil || !strings.Contains(ex.Summary, want) {
			t.Errorf("Explain(%d) = %v: want a summary containing %q", id, err, want)
			if ex != nil {
				t.Logf("summary: %s", ex.Summary)
			}
		}
	}

	if err := h.client.ResumeQueue(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	h.waitState(holder.ID, bq.StateCompleted)
	h.waitState(waiter.ID, bq.StateCompleted)
	h.checkSemaphores()
	for key, n := range maxOverlap(h.recorder().all()) {
		if n > 1 {
			t.Errorf("key %q ran %d jobs at once, want at most 1", key, n)
		}
	}
}

// testQueuePauseBadInput: a queue name that breaks the naming rule is
// refused with the rule; pausing or resuming twice changes nothing more;
// a queue no job uses yet may be paused, and reports show it.
func testQueuePauseBadInput(t *testing.T, h *harness) {
	ctx := context.Background()
	for _, bad := range []string{"", "no spaces", strings.Repeat("q", 200)} {
		for name, op := range map[string]func(context.Context, string) error{
			"PauseQueue": h.client.PauseQueue, "ResumeQueue": h.client.ResumeQueue,
		} {
			err := op(ctx, bad)
			if !errors.Is(err, bq.ErrInvalidArgument) || !strings.Contains(err.Error(), "queue name") {
				t.Errorf("%s(%.20q) = %v, want ErrInvalidArgument naming the queue name rule", name, bad, err)
			}
		}
	}
	if n := h.count(`SELECT count(*) FROM bq_paused_queues`); n != 0 {
		t.Errorf("%d paused queues after bad input, want none", n)
	}

	for range 2 {
		if err := h.client.PauseQueue(ctx, "unused"); err != nil {
			t.Fatalf("pause a queue no job uses: %v", err)
		}
	}
	paused, err := h.client.PausedQueues(ctx)
	if err != nil || len(paused) != 1 || paused[0].Queue != "unused" {
		t.Fatalf("PausedQueues = %+v, %v: want unused once", paused, err)
	}
	health, err := h.client.Health(ctx, bq.HealthOptions{})
	if err != nil || len(health.Queues) != 1 || !health.Queues[0].Paused {
		t.Errorf("Health queues = %+v, %v: want unused, paused, with no jobs", health.Queues, err)
	}
	for range 2 {
		if err := h.client.ResumeQueue(ctx, "unused"); err != nil {
			t.Fatalf("resume: %v", err)
		}
	}
	if paused, err := h.client.PausedQueues(ctx); err != nil || len(paused) != 0 {
		t.Errorf("PausedQueues after resume = %+v, %v: want none", paused, err)
	}
}

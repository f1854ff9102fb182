package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
)

var _ = register(
	scenario{"HealthCountsQueuesGroupsKeysProcesses", testHealth},
	scenario{"HealthIsBounded", testHealthBounded},
	scenario{"ExplainBlockedJob", testExplainBlocked},
	scenario{"ExplainOtherStates", testExplainOthers},
)

// fail moves a claimed job to failed, as a worker whose job failed for good.
func fail(t *testing.T, h *harness, c *driver.Claim) {
	t.Helper()
	ctx := context.Background()
	err := driver.InTx(ctx, h.driver(), func(ex driver.Executor) error {
		_, err := lifecycle.Fail(ctx, ex, c, "boom: the job gave up", time.Now())
		return err
	})
	if err != nil {
		t.Fatalf("fail job %d: %v", c.ID, err)
	}
}

// failedJob enqueues a job of kind with key on queue "failing", claims
// and fails it.
func failedJob(t *testing.T, h *harness, job *bq.Job[Args], key string, process int64) int64 {
	t.Helper()
	res := enqueue(t, h, job, Args{Key: key}, bq.Queue("failing"))
	c := claimFrom(t, h, "failing", process)
	if c.ID != res.ID {
		t.Fatalf("claimed job %d, want %d", c.ID, res.ID)
	}
	fail(t, h, c)
	return res.ID
}

// claimFrom claims the next ready job of queue for process.
func claimFrom(t *testing.T, h *harness, queue string, process int64) *driver.Claim {
	t.Helper()
	claims, err := lifecycle.Claim(context.Background(), h.driver(), driver.ClaimParams{
		Queue: queue, Max: 1, ProcessID: process, Now: time.Now(),
	})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim from %s: %d claims, %v", queue, len(claims), err)
	}
	return claims[0]
}

func health(t *testing.T, h *harness, opts bq.HealthOptions) *bq.Health {
	t.Helper()
	hl, err := h.client.Health(context.Background(), opts)
	if err != nil {
		t.Fatalf("health: %v", err)
	}
	return hl
}

// testHealth: one of each state, and the figures of every section.
func testHealth(t *testing.T, h *harness) {
	live := registerProcess(t, h, time.Now())
	registerProcess(t, h, time.Now().Add(-time.Hour))
	failedJob(t, h, limit1Job, "hf", live)
	for range 5 {
		enqueue(t, h, limit2Job, Args{Key: "h"})
	}
	claimOne(t, h, live)
	claimOne(t, h, live)
	enqueue(t, h, unkeyedJob, Args{})
	enqueue(t, h, unkeyedJob, Args{}, bq.In(time.Hour))

	hl := health(t, h, bq.HealthOptions{})
	want := bq.QueueHealth{Queue: "default", Ready: 1, Running: 2, Scheduled: 1, Blocked: 3}
	if len(hl.Queues) != 2 || hl.Queues[1] != (bq.QueueHealth{Queue: "failing", Failed: 1}) {
		t.Fatalf("queues %+v, want default and failing (1 failed)", hl.Queues)
	}
	got := hl.Queues[0]
	if got.OldestReadyAge < 0 || got.OldestReadyAge > time.Minute {
		t.Errorf("oldest ready age %s, want a few milliseconds", got.OldestReadyAge)
	}
	got.OldestReadyAge = 0
	if got != want {
		t.Errorf("queue %+v, want %+v", got, want)
	}
	groups := map[string]bq.GroupHealth{}
	for _, g := range hl.Groups {
		groups[g.Group] = g
	}
	if g := groups["c.limit2"]; g != (bq.GroupHealth{Group: "c.limit2", Keys: 1, MinLimit: 2, MaxLimit: 2, Active: 2, Blocked: 3, Saturated: 1}) {
		t.Errorf("group c.limit2: %+v, want 1 key, limit 2, 2 active, 3 blocked, 1 saturated", g)
	}
	if g := groups["c.limit1"]; g.Active != 0 || g.Saturated != 0 || g.Limits() != "1" {
		t.Errorf("group c.limit1 (its only job failed): %+v, want nothing active or saturated", g)
	}
	if len(hl.TopKeys) != 1 || hl.TopKeys[0] != (bq.KeyHealth{Key: "c.limit2/h", Group: "c.limit2", Limit: 2, Holders: 2, Free: 0, Blocked: 3}) {
		t.Errorf("top keys %+v, want c.limit2/h with 2 holders and 3 blocked", hl.TopKeys)
	}
	alive := map[bool]int{}
	for _, p := range hl.Processes {
		alive[p.Alive]++
	}
	if len(hl.Processes) != 2 || alive[true] != 1 || alive[false] != 1 {
		t.Errorf("processes %+v, want one alive and one silent for an hour", hl.Processes)
	}
}

// testHealthBounded: the report lists the most blocked keys, at most
// TopKeys (default 10) of them, whatever the number of keys.
func testHealthBounded(t *testing.T, h *harness) {
	for i := range 12 {
		enqueue(t, h, limit1Job, Args{Key: fmt.Sprintf("k%02d", i)})
		enqueue(t, h, limit1Job, Args{Key: fmt.Sprintf("k%02d", i)})
	}
	for range 4 {
		enqueue(t, h, limit1Job, Args{Key: "big"})
	}
	hl := health(t, h, bq.HealthOptions{})
	if len(hl.TopKeys) != 10 || hl.TopKeys[0].Key != "c.limit1/big" || hl.TopKeys[0].Blocked != 3 {
		t.Fatalf("%d top keys, first %+v; want 10, the most blocked (c.limit1/big, 3) first", len(hl.TopKeys), hl.TopKeys[0])
	}
	if hl := health(t, h, bq.HealthOptions{TopKeys: 1_000_000}); len(hl.TopKeys) != 13 {
		t.Errorf("%d top keys with a huge TopKeys, want all 13 (the bound is 100)", len(hl.TopKeys))
	}
	if g := hl.Groups[0]; g.Keys != 13 || g.Saturated != 13 || g.Blocked != 15 {
		t.Errorf("group %+v, want 13 keys, all saturated, 15 blocked", g)
	}
}

func explain(t *testing.T, h *harness, id int64) *bq.Explanation {
	t.Helper()
	e, err := h.client.Explain(context.Background(), id)
	if err != nil {
		t.Fatalf("explain job %d: %v", id, err)
	}
	return e
}

func wantSummary(t *testing.T, e *bq.Explanation, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(e.Summary, p) {
			t.Errorf("job %d (%s): summary %q lacks %q", e.Job.ID, e.Job.State, e.Summary, p)
		}
	}
}

// testExplainBlocked: a blocked job names its key's limit and free value,
// the holders with their processes, and its place in line, which follows
// promotion order (priority first, then FIFO).
func testExplainBlocked(t *testing.T, h *harness) {
	proc := registerProcess(t, h, time.Now())
	enqueue(t, h, limit2Job, Args{Key: "e"})
	enqueue(t, h, limit2Job, Args{Key: "e"})
	first, second := claimOne(t, h, proc), claimOne(t, h, proc)
	b1 := enqueue(t, h, limit2Job, Args{Key: "e"})
	b2 := enqueue(t, h, limit2Job, Args{Key: "e"})
	urgent := enqueue(t, h, limit2Job, Args{Key: "e"}, bq.Priority(5))

	e := explain(t, h, b2.ID)
	if e.Job.State != bq.StateBlocked || e.Key == nil || e.Key.Limit != 2 || e.Key.Free != 0 || e.Key.Blocked != 3 {
		t.Fatalf("explanation %+v key %+v: want blocked on a full key of limit 2 with 3 blocked", e, e.Key)
	}
	if e.Position != 3 {
		t.Errorf("position %d, want 3 (behind the priority-5 job and the earlier one)", e.Position)
	}
	if len(e.Key.Holders) != 2 {
		t.Fatalf("holders %+v, want the 2 running jobs", e.Key.Holders)
	}
	for i, hd := range e.Key.Holders {
		want := []int64{first.ID, second.ID}[i]
		if hd.JobID != want || hd.State != bq.StateRunning || hd.ProcessID != proc || hd.ProcessName != "test" ||
			!hd.ProcessAlive || hd.RunningSince.IsZero() {
			t.Errorf("holder %d: %+v, want job %d running on live process %d (test) with its claim time", i, hd, want, proc)
		}
	}
	wantSummary(t, e, `Waiting for one of 2 running jobs of key "c.limit2/e" to finish`, "2 ahead of it")
	if p := explain(t, h, urgent.ID).Position; p != 1 {
		t.Errorf("priority-5 job at position %d, want 1", p)
	}
	wantSummary(t, explain(t, h, urgent.ID), "it is next in line")
	if p := explain(t, h, b1.ID).Position; p != 2 {
		t.Errorf("first blocked job at position %d, want 2", p)
	}

	// Once a holder completes, the slot passes to the priority job and
	// the rest move up.
	if ok, err := complete(context.Background(), h, first); err != nil || !ok {
		t.Fatalf("complete: %v %v", ok, err)
	}
	if e := explain(t, h, b2.ID); e.Position != 2 {
		t.Errorf("position %d after a promotion, want 2", e.Position)
	}
	e = explain(t, h, b1.ID)
	wantSummary(t, e, "2 holders", "1 running, 1 ready")
}

// testExplainOthers: every other state gets its sentence.
func testExplainOthers(t *testing.T, h *harness) {
	proc := registerProcess(t, h, time.Now())
	running := enqueue(t, h, unkeyedJob, Args{})
	claim := claimOne(t, h, proc)
	ready := enqueue(t, h, unkeyedJob, Args{})
	later := enqueue(t, h, limit1Job, Args{Key: "s"}, bq.In(time.Hour))
	failed := failedJob(t, h, onceJob, "", proc)

	er := explain(t, h, running.ID)
	wantSummary(t, er, "Running on process test (#", "attempt 1 of", fmt.Sprintf("fencing token %d.", claim.Fence))
	if er.Token != claim.Fence {
		t.Errorf("a running job's Token %d, want its claim's fence %d", er.Token, claim.Fence)
	}
	wantSummary(t, explain(t, h, ready.ID), `waiting for a worker of queue "default"`, `No live process works queue "default"`)
	e := explain(t, h, later.ID)
	if e.DueAt.IsZero() {
		t.Errorf("scheduled job without a due time: %+v", e)
	}
	wantSummary(t, e, "Scheduled: due at", "(in ", `admitted through key "c.limit1/s"`)
	wantSummary(t, explain(t, h, failed), "Failed at", "after 1 attempt: boom: the job gave up")

	if _, err := h.client.Explain(context.Background(), 1<<40); !errors.Is(err, bq.ErrJobNotFound) {
		t.Errorf("explain a missing job: %v, want ErrJobNotFound", err)
	}
}

package conformance

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

// sequenceBackoff is the wait before a sequence job's retry: long enough
// that a job taking the key's slot meanwhile would start in the gap.
const sequenceBackoff = 300 * time.Millisecond

var (
	sequenceJob = bq.Define("c.sequence", behave, bq.JobOptions[Args]{
		MaxAttempts: 5, Backoff: func(int) time.Duration { return sequenceBackoff },
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, Sequence: true}})
	// slowSequenceJob retries a minute later: its retry holds the key.
	slowSequenceJob = bq.Define("c.sequence.slow", behave, bq.JobOptions[Args]{
		MaxAttempts: 25, Backoff: func(int) time.Duration { return time.Minute },
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, Sequence: true, Group: "c.sequence"}})
)

var _ = register(
	scenario{"SequenceKeepsItsPlaceThroughRetries", testSequenceKeepsItsPlace},
	scenario{"SequenceHeldRetryIsAHolder", testSequenceHeldRetry},
	scenario{"SequenceRefusesALimitAboveOne", testSequenceRefusesALimitAboveOne},
	scenario{"SequenceHaltsAfterAFailure", testSequenceHaltsAfterAFailure},
)

// testSequenceKeepsItsPlaceThroughRetries: from three worker processes, a
// sequence of 8 jobs on one key whose 2nd job fails three attempts (each
// retried 300 ms later) and whose 5th fails for good. Judged from the
// runs' own start and end records: no two runs of the key overlap, the
// jobs start in enqueue order, no job starts before every run of the job
// before it ended (the failing job's retries included), and the line goes
// on past the job that failed for good.
func testSequenceKeepsItsPlace(t *testing.T, h *harness) {
	ctx := context.Background()
	modes := map[int]Args{1: {Mode: "fail-n", N: 3, SleepMS: 20}, 4: {Mode: "permanent"}}
	var ids []int64
	for i := range 8 {
		a := modes[i]
		a.Test, a.Key, a.Seq = h.test, "s", i
		if a.Mode == "" {
			a.SleepMS = 30
		}
		res, err := sequenceJob.Enqueue(ctx, h.client, a)
		if err != nil {
			t.Fatalf("enqueue %d: %v", i, err)
		}
		ids = append(ids, res.ID)
	}
	stop := h.spawnWorkers(3, 4)
	h.eventually(90*time.Second, "the 8 jobs to finish", func() bool {
		return h.count(`SELECT count(*) FROM bq_jobs WHERE finished_at IS NOT NULL OR id IN (SELECT job_id FROM bq_failed_executions)`) == 8
	})
	stop()

	runs := h.dbRuns(t)
	slices.SortFunc(runs, func(a, b run) int { return a.Start.Compare(b.Start) })
	perJob := map[int64][]run{}
	for _, r := range runs {
		if r.End.IsZero() || r.End.Before(r.Start) {
			t.Errorf("job %d: a run has no end", r.JobID)
		}
		perJob[r.JobID] = append(perJob[r.JobID], r)
	}
	for i, id := range ids {
		want := 1
		if i == 1 {
			want = 4 // three failed attempts, then done
		}
		if got := len(perJob[id]); got != want {
			t.Errorf("job %d (#%d of the sequence) ran %d times, want %d", id, i, got, want)
		}
		if i == 0 {
			continue
		}
		prev := perJob[ids[i-1]]
		if len(prev) == 0 || len(perJob[id]) == 0 {
			continue
		}
		last, first := prev[len(prev)-1], perJob[id][0]
		if first.Start.Before(last.End) {
			t.Errorf("job #%d of the sequence started at %s, before the last run of job #%d ended (%s): it did not wait its turn",
				i, first.Start.Format(time.StampMilli), i-1, last.End.Format(time.StampMilli))
		}
	}
	var order []int64 // job ids by first start
	for _, r := range runs {
		if !slices.Contains(order, r.JobID) {
			order = append(order, r.JobID)
		}
	}
	if !slices.Equal(order, ids) {
		t.Errorf("jobs started in the order %v, want enqueue order %v", order, ids)
	}
	if n := maxOverlap(runs)["s"]; n > 1 {
		t.Errorf("a sequence ran %d jobs at once", n)
	}
	states := []bq.JobState{}
	for _, id := range ids {
		states = append(states, h.state(id))
	}
	for i, st := range states {
		want := bq.StateCompleted
		if i == 4 {
			want = bq.StateFailed
		}
		if st != want {
			t.Errorf("job #%d of the sequence is %s, want %s (states %v)", i, st, want, states)
		}
	}
	h.checkSemaphores()
}

// testSequenceHeldRetry: a sequence job scheduled for its retry holds the
// key: KeyState lists it as a scheduled holder, the semaphore and Verify
// count it (no drift, no free slot), a reclaim of the expired semaphore
// leaves it held, Explain of the next job names the retry; cancelling it
// releases the slot to the next job.
func testSequenceHeldRetry(t *testing.T, h *harness) {
	ctx := context.Background()
	failing := enqueue(t, h, slowSequenceJob, Args{Key: "h", Mode: "fail-n", N: 100})
	next := enqueue(t, h, slowSequenceJob, Args{Key: "h", SleepMS: 10})
	if failing.State != bq.StateReady || next.State != bq.StateBlocked {
		t.Fatalf("enqueue: %+v %+v, want ready then blocked", failing, next)
	}
	worker(h, 2)
	h.eventually(20*time.Second, "the failing job's retry to be scheduled", func() bool {
		info := jobInfo(t, h, failing.ID)
		return info.State == bq.StateScheduled && info.Attempts == 1
	})
	if info := jobInfo(t, h, failing.ID); !info.Sequence || !info.HoldsSlot {
		t.Errorf("the scheduled retry: Sequence %v, HoldsSlot %v, want both", info.Sequence, info.HoldsSlot)
	}
	if e, err := h.client.Explain(ctx, failing.ID); err != nil || !strings.Contains(e.Summary, "keeps key") {
		t.Errorf("Explain of the held retry: %v %v, want it to say it keeps the key's slot", e, err)
	}
	// Past a dispatcher pass or two, the next job still waits.
	time.Sleep(500 * time.Millisecond)
	if st := h.state(next.ID); st != bq.StateBlocked {
		t.Fatalf("the next job is %s while the sequence's failing job waits for its retry, want blocked", st)
	}
	const key = "c.sequence/h"
	k, err := h.client.KeyState(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if k.Free != 0 || len(k.Holders) != 1 || k.Holders[0].JobID != failing.ID || k.Holders[0].State != bq.StateScheduled {
		t.Errorf("KeyState: free %d, holders %+v, want none free and the failing job holding, scheduled", k.Free, k.Holders)
	}
	h.checkSemaphores()
	// The Duration failsafe: expire the semaphore; the dispatcher
	// reclaims it and must find the retry still holding.
	h.exec(`UPDATE bq_semaphores SET expires_at = now() - interval '1 hour'`, `UPDATE bq_semaphores SET expires_at = 0`,
		`UPDATE bq_semaphores SET expires_at = 0`)
	time.Sleep(time.Second)
	if st := h.state(next.ID); st != bq.StateBlocked {
		t.Fatalf("after a reclaim of the expired semaphore the next job is %s, want still blocked behind the retry", st)
	}
	h.checkSemaphores()
	e, err := h.client.Explain(ctx, next.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Waiting for job " + strconv.FormatInt(failing.ID, 10) + " of the sequence, attempt 2 of 25, retrying at"} {
		if !strings.Contains(e.Summary, want) {
			t.Errorf("Explain: %q, want it to say %q", e.Summary, want)
		}
	}
	if _, err := h.client.Cancel(ctx, failing.ID); err != nil {
		t.Fatal(err)
	}
	h.waitState(failing.ID, bq.StateCancelled)
	h.waitState(next.ID, bq.StateCompleted)
	h.checkSemaphores()
}

// testSequenceRefusesALimitAboveOne: a sequence with To above 1, or given
// a limit above 1 by WithConcurrencyKey, is refused before it reaches the
// database, with an error naming the problem and the fix.
func testSequenceRefusesALimitAboveOne(t *testing.T, h *harness) {
	ctx := context.Background()
	bad := bq.Define("c.sequence.bad", behave, bq.JobOptions[Args]{
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 2, Sequence: true}})
	if err := bad.Err(); !errors.Is(err, bq.ErrInvalidJob) || !strings.Contains(err.Error(), "Sequence with To 2") || !strings.Contains(err.Error(), "set To to 1") {
		t.Errorf("Define of a sequence with To 2: %v, want ErrInvalidJob naming Sequence, To 2 and the fix", err)
	}
	if _, err := bad.Enqueue(ctx, h.client, Args{Test: h.test, Key: "b"}); !errors.Is(err, bq.ErrInvalidJob) {
		t.Errorf("enqueue of the bad definition: %v, want ErrInvalidJob", err)
	}
	_, err := sequenceJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "b"}, bq.WithConcurrencyKey("b", 3))
	if !errors.Is(err, bq.ErrInvalidJob) || !strings.Contains(err.Error(), "WithConcurrencyKey") || !strings.Contains(err.Error(), "pass a limit of 1") {
		t.Errorf("WithConcurrencyKey(b, 3) on a sequence: %v, want ErrInvalidJob naming it and the fix", err)
	}
	if _, err := sequenceJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "b"}, bq.WithRateKey("r", 1, time.Second)); !errors.Is(err, bq.ErrInvalidJob) || !strings.Contains(err.Error(), "drop the rate key") {
		t.Errorf("WithRateKey on a sequence: %v, want ErrInvalidJob naming the fix", err)
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs`); n != 0 {
		t.Errorf("%d jobs stored by refused enqueues, want none", n)
	}
	// A limit of 1 (or 0) is the sequence's own.
	if res, err := sequenceJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "b"}, bq.WithConcurrencyKey("b", 1)); err != nil || res.State != bq.StateReady {
		t.Errorf("WithConcurrencyKey(b, 1) on a sequence: %+v %v, want it ready", res, err)
	}
}

// haltingSequenceJob halts its sequence when a job fails for good.
var haltingSequenceJob = bq.Define("c.sequence.halt", behave, bq.JobOptions[Args]{
	MaxAttempts: 2, Backoff: func(int) time.Duration { return 50 * time.Millisecond },
	Concurrency: &bq.Concurrency[Args]{Key: keyOf, Sequence: true, SequenceHaltOnFailure: true}})

// testSequenceHaltsAfterAFailure: with SequenceHaltOnFailure, a job that
// fails for good keeps its key's slot: the next job waits (Explain says
// why, the semaphore and Verify count the failed holder) until the
// failed job is retried by hand, which runs it again before the next;
// a second failure discarded by hand lets the line go on.
func testSequenceHaltsAfterAFailure(t *testing.T, h *harness) {
	ctx := context.Background()
	failing := enqueue(t, h, haltingSequenceJob, Args{Key: "x", Mode: "permanent-first", SleepMS: 10})
	next := enqueue(t, h, haltingSequenceJob, Args{Key: "x", Mode: "permanent", SleepMS: 10})
	last := enqueue(t, h, haltingSequenceJob, Args{Key: "x", SleepMS: 10})
	rec := h.recorder()
	worker(h, 3)
	h.waitState(failing.ID, bq.StateFailed)
	time.Sleep(500 * time.Millisecond)
	if st := h.state(next.ID); st != bq.StateBlocked {
		t.Fatalf("the job after one that failed for good is %s, want blocked: the sequence halts", st)
	}
	if info := jobInfo(t, h, failing.ID); !info.HoldsSlot {
		t.Errorf("the failed job of a halting sequence: HoldsSlot false, want true")
	}
	h.checkSemaphores()
	e, err := h.client.Explain(ctx, next.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.Summary, "failed for good") || !strings.Contains(e.Summary, "halts the sequence") {
		t.Errorf("Explain: %q, want it to say the sequence halts on the failed job", e.Summary)
	}
	if st, err := h.client.RetryFailed(ctx, failing.ID); err != nil || st != bq.StateReady {
		t.Fatalf("RetryFailed of the halting job: %s, %v; want ready (it holds the slot)", st, err)
	}
	h.waitState(failing.ID, bq.StateCompleted)
	h.waitState(next.ID, bq.StateFailed) // fails for good at once: halts again
	time.Sleep(300 * time.Millisecond)
	if st := h.state(last.ID); st != bq.StateBlocked {
		t.Fatalf("the last job is %s behind a second failure, want blocked", st)
	}
	h.checkSemaphores()
	if err := h.client.DiscardFailed(ctx, next.ID); err != nil {
		t.Fatal(err)
	}
	h.waitState(last.ID, bq.StateCompleted)
	runs := rec.all()
	slices.SortFunc(runs, func(a, b run) int { return a.Start.Compare(b.Start) })
	var order []int64
	for _, r := range runs {
		order = append(order, r.JobID)
	}
	if want := []int64{failing.ID, failing.ID, next.ID, last.ID}; !slices.Equal(order, want) {
		t.Errorf("runs in the order %v, want %v", order, want)
	}
	if n := maxOverlap(runs)["x"]; n > 1 {
		t.Errorf("a sequence ran %d jobs at once", n)
	}
	h.checkSemaphores()
}

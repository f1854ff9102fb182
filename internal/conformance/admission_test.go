package conformance

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/dispatcher"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/semaphore"
)

var _ = register(
	scenario{"PromotionOrder", testPromotionOrder},
	scenario{"Discard", testDiscard},
	scenario{"SharedGroup", testSharedGroup},
	scenario{"ScheduledAdmittedWhenDue", testScheduledAdmittedWhenDue},
	scenario{"DiscardRetryTo1", testDiscardRetryTo1},
	scenario{"LostWakeup", testLostWakeup},
	scenario{"CappedIncrements", testCappedIncrements},
	scenario{"DoubleCompletionReleasesOnce", testDoubleCompletion},
	scenario{"UnkeyedNeverTouchesSemaphores", testUnkeyed},
	scenario{"LimitChangeAdjustsFreeSlots", testLimitChange},
	scenario{"EnqueueManyAdmitsInOrder", testEnqueueMany},
	scenario{"BatchCompletionReleasesMatchedClaimsOnce", testBatchCompletion},
	scenario{"BatchCompletionAcrossKeysNoLostWakeup", testBatchAcrossKeys},
)

func completeMany(ctx context.Context, h *harness, claims ...*driver.Claim) ([]lifecycle.Result, error) {
	var res []lifecycle.Result
	err := driver.InTx(ctx, h.driver(), func(ex driver.Executor) (err error) {
		res, err = lifecycle.CompleteMany(ctx, ex, claims, true, false, time.Now())
		return err
	})
	return res, err
}

// testBatchAcrossKeys: one batch finishing holders of several keys
// releases each key and promotes its next job, even one whose blocked row
// was committed while the batch waited for that key's lock.
func testBatchAcrossKeys(t *testing.T, h *harness) {
	ctx := context.Background()
	proc := registerProcess(t, h, time.Now())
	var holders []*driver.Claim
	var next []int64
	for _, k := range []string{"ka", "kb", "kc"} {
		enqueue(t, h, limit1Job, Args{Key: k})
		holders = append(holders, claimOne(t, h, proc))
		if k != "kb" {
			next = append(next, enqueue(t, h, limit1Job, Args{Key: k}).ID)
		}
	}
	// An enqueue of kb decides to block and holds kb's lock while the
	// batch completes.
	tx, commit := h.beginTx(ctx)
	late, err := limit1Job.EnqueueTx(ctx, h.client, tx, Args{Test: h.test, Key: "kb"})
	if err != nil || late.State != bq.StateBlocked {
		t.Fatalf("enqueue inside the transaction: %+v, %v; want blocked", late, err)
	}
	done := make(chan error, 1)
	go func() {
		res, err := completeMany(ctx, h, holders...)
		for i, r := range res {
			if err == nil && !r.Matched {
				err = fmt.Errorf("holder %d did not match", i)
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the batch finished (%v) while an enqueue held one of its keys", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, id := range append(next, late.ID) {
		if st := h.state(id); st != bq.StateReady {
			t.Errorf("job %d is %s after its key's holder finished in the batch; want ready", id, st)
		}
	}
	h.checkSemaphores()
}

// testBatchCompletion: a batch of completions releases one slot per claim
// whose fence matched, and a repeated or stale batch changes nothing.
func testBatchCompletion(t *testing.T, h *harness) {
	ctx := context.Background()
	var ids []int64
	for range 5 {
		ids = append(ids, enqueue(t, h, limit2Job, Args{Key: "bc"}).ID)
	}
	proc := registerProcess(t, h, time.Now())
	a, b := claimOne(t, h, proc), claimOne(t, h, proc)
	stale := *a
	stale.Fence += 1000
	batch := func(claims ...*driver.Claim) []lifecycle.Result {
		var res []lifecycle.Result
		err := driver.InTx(ctx, h.driver(), func(ex driver.Executor) (err error) {
			res, err = lifecycle.CompleteMany(ctx, ex, claims, true, false, time.Now())
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := batch(&stale, a, b)
	if res[0].Matched || !res[1].Matched || !res[2].Matched || res[1].Promoted.Jobs != 2 {
		t.Fatalf("batch: %+v, want the stale claim unmatched and 2 promoted for the 2 finished", res)
	}
	for i, want := range []bq.JobState{bq.StateCompleted, bq.StateCompleted, bq.StateReady, bq.StateReady, bq.StateBlocked} {
		if st := h.state(ids[i]); st != want {
			t.Errorf("job %d: %s, want %s", i, st, want)
		}
	}
	if res := batch(a, b); res[0].Matched || res[1].Matched {
		t.Errorf("repeated batch matched: %+v", res)
	}
	if st := h.state(ids[4]); st != bq.StateBlocked {
		t.Errorf("a repeated batch released a slot again: the last job is %s", st)
	}
	h.checkSemaphores()
}

func enqueue(t *testing.T, h *harness, job *bq.Job[Args], a Args, opts ...bq.EnqueueOption) bq.EnqueueResult {
	t.Helper()
	a.Test = h.test
	res, err := job.Enqueue(context.Background(), h.client, a, opts...)
	if err != nil {
		t.Fatalf("enqueue %s %+v: %v", job.Name(), a, err)
	}
	return res
}

func worker(h *harness, slots int) {
	cfg := testConfig()
	cfg.Queues = map[string]int{"default": slots}
	h.run(h.clientWith(cfg))
}

// testPromotionOrder: blocked jobs are promoted highest priority first,
// FIFO among equals.
func testPromotionOrder(t *testing.T, h *harness) {
	holder := enqueue(t, h, limit1Job, Args{Key: "p", Seq: 0, SleepMS: 20})
	for _, b := range []struct{ seq, prio int }{{1, 0}, {2, 5}, {3, 0}, {4, 5}} {
		res := enqueue(t, h, limit1Job, Args{Key: "p", Seq: b.seq, SleepMS: 5}, bq.Priority(b.prio))
		if res.State != bq.StateBlocked {
			t.Fatalf("job %d: %+v, want blocked behind the holder", b.seq, res)
		}
	}
	if holder.State == bq.StateBlocked {
		t.Fatal("first job of a free key was blocked")
	}
	worker(h, 4)
	rec := h.recorder()
	h.eventually(20*time.Second, "5 runs", func() bool { return len(rec.all()) == 5 })
	var order []int
	for _, r := range rec.all() {
		order = append(order, r.Seq)
	}
	if want := []int{0, 2, 4, 1, 3}; !equal(order, want) {
		t.Errorf("runs in order %v, want %v (priority, then FIFO)", order, want)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// testDiscard: with no free slot the result says Discarded and nothing is
// stored; once the slot frees, the key admits again.
func testDiscard(t *testing.T, h *harness) {
	first := enqueue(t, h, discard1Job, Args{Key: "d", SleepMS: 1})
	if first.State == bq.StateDiscarded || first.State == bq.StateBlocked || first.ID == 0 {
		t.Fatalf("first enqueue: %+v, want admitted", first)
	}
	second := enqueue(t, h, discard1Job, Args{Key: "d"})
	if second.State != bq.StateDiscarded || second.ID != 0 || second.Reason == "" {
		t.Fatalf("second enqueue: %+v, want discarded with a reason", second)
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs WHERE kind = 'c.discard1'`); n != 1 {
		t.Fatalf("%d jobs stored, want 1: a discarded job must not be inserted", n)
	}
	other := enqueue(t, h, discard1Job, Args{Key: "other"})
	if other.State == bq.StateDiscarded {
		t.Fatal("a different key was discarded")
	}
	worker(h, 2)
	h.waitState(first.ID, bq.StateCompleted)
	third := enqueue(t, h, discard1Job, Args{Key: "d"})
	if third.State == bq.StateDiscarded {
		t.Fatalf("enqueue after the slot freed was discarded: %+v", third)
	}
	h.waitState(third.ID, bq.StateCompleted)
	h.checkSemaphores()
}

// testSharedGroup: two job kinds with the same Group share one limit.
func testSharedGroup(t *testing.T, h *harness) {
	a := enqueue(t, h, groupAJob, Args{Key: "x"})
	b := enqueue(t, h, groupBJob, Args{Key: "x"})
	c := enqueue(t, h, groupBJob, Args{Key: "y"})
	if a.State == bq.StateBlocked || b.State != bq.StateBlocked || c.State == bq.StateBlocked {
		t.Fatalf("A(x) %+v, B(x) %+v, B(y) %+v: want only B(x) blocked", a, b, c)
	}
	worker(h, 4)
	h.waitState(b.ID, bq.StateCompleted)
	h.checkSemaphores()
}

// testScheduledAdmittedWhenDue: a scheduled job's key is checked when the
// dispatcher promotes it, not at enqueue.
func testScheduledAdmittedWhenDue(t *testing.T, h *harness) {
	ctx := context.Background()
	enqueue(t, h, limit1Job, Args{Key: "s"})
	enqueue(t, h, discard1Job, Args{Key: "s"})
	blockLater := enqueue(t, h, limit1Job, Args{Key: "s"}, bq.In(time.Hour))
	discardLater := enqueue(t, h, discard1Job, Args{Key: "s"}, bq.In(time.Hour))
	freeLater := enqueue(t, h, limit1Job, Args{Key: "free"}, bq.At(time.Now().Add(time.Hour)))
	for _, r := range []bq.EnqueueResult{blockLater, discardLater, freeLater} {
		if r.State != bq.StateScheduled || r.State == bq.StateDiscarded || r.State == bq.StateBlocked {
			t.Fatalf("%+v: want scheduled (its key is not checked until due)", r)
		}
	}
	early := dispatcher.New(h.driver(), dispatcher.Config{Now: func() time.Time { return time.Now().Add(30 * time.Minute) }})
	if err := early.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if st := h.state(blockLater.ID); st != bq.StateScheduled {
		t.Fatalf("before due: %s, want scheduled", st)
	}
	due := dispatcher.New(h.driver(), dispatcher.Config{Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
	if err := due.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if st := h.state(blockLater.ID); st != bq.StateBlocked {
		t.Errorf("blocking job due on a full key: %s, want blocked", st)
	}
	if st := h.state(discardLater.ID); st != bq.StateDiscarded {
		t.Errorf("discarding job due on a full key: %s, want discarded", st)
	}
	if st := h.state(freeLater.ID); st != bq.StateReady {
		t.Errorf("job due on a free key: %s, want ready", st)
	}
	h.checkSemaphores()
}

// testDiscardRetryTo1: a failing To=1 Discard job releases its slot before
// its retry is admitted, so the retry is not discarded by its own run.
func testDiscardRetryTo1(t *testing.T, h *harness) {
	res := enqueue(t, h, discard1Job, Args{Key: "r", Mode: "fail-first"})
	worker(h, 2)
	h.waitState(res.ID, bq.StateCompleted)
	info, err := h.client.Job(context.Background(), res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if info.Attempts != 2 {
		t.Errorf("attempts %d, want 2 (one failure, one success)", info.Attempts)
	}
	h.checkSemaphores()
}

// registerProcess registers a process whose last heartbeat is at beat.
func registerProcess(t *testing.T, h *harness, beat time.Time) int64 {
	t.Helper()
	id, err := h.driver().Exec().ProcessRegister(context.Background(), driver.Process{
		Kind: "worker", Name: "test", Hostname: "test", PID: 1, HeartbeatInterval: 200 * time.Millisecond, StartedAt: beat,
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// witness registers a process whose heartbeats have landed without a gap
// for the last two hours: the evidence a dispatcher needs that the
// database was writable while another process stayed silent.
func witness(t *testing.T, h *harness) int64 {
	t.Helper()
	since := time.Now().Add(-2 * time.Hour)
	id := registerProcess(t, h, since)
	if landed, err := h.driver().Exec().ProcessHeartbeat(context.Background(), driver.Beat{ProcessID: id, At: time.Now(), BeatingSince: since}); err != nil || !landed {
		t.Fatalf("witness heartbeat: landed %v, %v", landed, err)
	}
	return id
}

// claimOne claims the next ready job of the default queue for process.
func claimOne(t *testing.T, h *harness, process int64) *driver.Claim {
	t.Helper()
	claims, err := lifecycle.Claim(context.Background(), h.driver(), driver.ClaimParams{
		Queue: "default", Max: 1, ProcessID: process, Now: time.Now(),
	})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %d claims, %v", len(claims), err)
	}
	return claims[0]
}

func complete(ctx context.Context, h *harness, c *driver.Claim) (bool, error) {
	var r lifecycle.Result
	err := driver.InTx(ctx, h.driver(), func(ex driver.Executor) (err error) {
		r, err = lifecycle.Complete(ctx, ex, c, true, time.Now())
		return err
	})
	return r.Matched, err
}

// testLostWakeup: an enqueue transaction decides to block while the key's
// holder completes. The completion waits for the semaphore lock the
// enqueue holds, then sees the blocked row and promotes it.
func testLostWakeup(t *testing.T, h *harness) {
	ctx := context.Background()
	enqueue(t, h, limit1Job, Args{Key: "w"})
	holder := claimOne(t, h, registerProcess(t, h, time.Now()))

	tx, commit := h.beginTx(ctx)
	blocked, err := limit1Job.EnqueueTx(ctx, h.client, tx, Args{Test: h.test, Key: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if blocked.State != bq.StateBlocked {
		t.Fatalf("%+v: want blocked behind the running holder", blocked)
	}
	done := make(chan error, 1)
	go func() {
		ok, err := complete(ctx, h, holder)
		if err == nil && !ok {
			err = errStale
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the completion finished (%v) while the enqueue still held the semaphore lock", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("complete: %v", err)
	}
	if st := h.state(blocked.ID); st != bq.StateReady {
		t.Fatalf("blocked job is %s after its key's holder completed; want ready (lost wake-up)", st)
	}
	h.checkSemaphores()
}

var errStale = errorString("completion matched no claim")

type errorString string

func (e errorString) Error() string { return string(e) }

// testCappedIncrements: releasing a semaphore whose slots are all free
// leaves it at its limit.
func testCappedIncrements(t *testing.T, h *harness) {
	ctx := context.Background()
	err := driver.InTx(ctx, h.driver(), func(ex driver.Executor) error {
		s, err := semaphore.Lock(ctx, ex, driver.Limit{Key: "cap", To: 2, Duration: time.Minute}, "default", time.Now())
		if err != nil {
			return err
		}
		return s.Save(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		err := driver.InTx(ctx, h.driver(), func(ex driver.Executor) error {
			_, err := semaphore.Release(ctx, ex, "cap", time.Now())
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if v := h.count(`SELECT value FROM bq_semaphores WHERE key = 'cap'`); v != 2 {
		t.Fatalf("free slots %d after releasing an idle semaphore, want its limit 2", v)
	}
}

// testDoubleCompletion: completing one claim twice, or with a stale
// fence, releases the slot once and records nothing more.
func testDoubleCompletion(t *testing.T, h *harness) {
	ctx := context.Background()
	enqueue(t, h, limit1Job, Args{Key: "dc"})
	b := enqueue(t, h, limit1Job, Args{Key: "dc"})
	c := enqueue(t, h, limit1Job, Args{Key: "dc"})
	holder := claimOne(t, h, registerProcess(t, h, time.Now()))

	stale := *holder
	stale.Fence += 1000
	if ok, err := complete(ctx, h, &stale); err != nil || ok {
		t.Fatalf("completion with a wrong fence: ok=%v err=%v, want no match", ok, err)
	}
	if st := h.state(b.ID); st != bq.StateBlocked {
		t.Fatalf("a stale completion promoted a blocked job (%s)", st)
	}
	if ok, err := complete(ctx, h, holder); err != nil || !ok {
		t.Fatalf("first completion: ok=%v err=%v", ok, err)
	}
	if ok, err := complete(ctx, h, holder); err != nil || ok {
		t.Fatalf("second completion of the same claim: ok=%v err=%v, want no match", ok, err)
	}
	if st := h.state(b.ID); st != bq.StateReady {
		t.Errorf("next job: %s, want ready", st)
	}
	if st := h.state(c.ID); st != bq.StateBlocked {
		t.Errorf("job after it: %s, want still blocked (one release, one promotion)", st)
	}
	h.checkSemaphores()
}

// testUnkeyed: jobs without a key never write semaphore or blocked rows.
func testUnkeyed(t *testing.T, h *harness) {
	var last bq.EnqueueResult
	for i := range 20 {
		last = enqueue(t, h, unkeyedJob, Args{Seq: i})
	}
	// A keyed definition whose Key returns "" is unkeyed too.
	empty := enqueue(t, h, limit1Job, Args{Key: ""})
	worker(h, 4)
	h.waitState(last.ID, bq.StateCompleted)
	h.waitState(empty.ID, bq.StateCompleted)
	if n := h.count(`SELECT count(*) FROM bq_semaphores`) + h.count(`SELECT count(*) FROM bq_blocked_executions`); n != 0 {
		t.Fatalf("%d semaphore or blocked rows written for unkeyed jobs", n)
	}
}

// testLimitChange: a new limit moves the free slots by the difference and
// promotes blocked jobs into the new room before admitting the newcomer.
func testLimitChange(t *testing.T, h *harness) {
	enqueue(t, h, limit1Job, Args{Key: "lc"})
	b1 := enqueue(t, h, limit1Job, Args{Key: "lc"})
	b2 := enqueue(t, h, limit1Job, Args{Key: "lc"})
	raised := enqueue(t, h, limit1Job, Args{Key: "lc"}, bq.WithConcurrencyKey("lc", 3))
	if st1, st2 := h.state(b1.ID), h.state(b2.ID); st1 != bq.StateReady || st2 != bq.StateReady {
		t.Errorf("after raising the limit to 3: blocked jobs are %s and %s, want ready", st1, st2)
	}
	if raised.State != bq.StateBlocked {
		t.Errorf("the enqueue that raised the limit: %+v, want blocked (the blocked jobs go first)", raised)
	}
	h.checkSemaphores()
	lowered := enqueue(t, h, limit1Job, Args{Key: "lc"})
	if lowered.State != bq.StateBlocked {
		t.Errorf("back at limit 1 with 3 holders: %+v, want blocked", lowered)
	}
	if v := h.count(`SELECT value FROM bq_semaphores WHERE key = 'c.limit1/lc'`); v != -2 {
		t.Errorf("free slots %d, want -2 (limit 1, 3 holders)", v)
	}
	h.checkSemaphores()
}

// testEnqueueManyAdmitsInOrder: a bulk enqueue gives each key's slots to
// its first jobs and blocks or discards the rest, in input order.
func testEnqueueMany(t *testing.T, h *harness) {
	ctx := context.Background()
	var args []Args
	for i := range 12 {
		args = append(args, Args{Test: h.test, Key: []string{"b", "a", "c"}[i%3], Seq: i})
	}
	res, err := limit2Job.EnqueueMany(ctx, h.client, args)
	if err != nil {
		t.Fatal(err)
	}
	admitted := map[string]int{}
	for i, r := range res {
		if r.ID == 0 {
			t.Fatalf("result %d has no id", i)
		}
		if r.State != bq.StateBlocked {
			admitted[args[i].Key]++
			if i >= 6 {
				t.Errorf("job %d of key %s admitted ahead of earlier jobs of its key", i, args[i].Key)
			}
		}
	}
	for _, k := range []string{"a", "b", "c"} {
		if admitted[k] != 2 {
			t.Errorf("key %s: %d admitted, want its limit 2", k, admitted[k])
		}
	}
	dres, err := discard1Job.EnqueueMany(ctx, h.client, args[:6])
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range dres {
		if want := i >= 3; (r.State == bq.StateDiscarded) != want {
			t.Errorf("discard job %d: discarded=%v, want %v", i, r.State == bq.StateDiscarded, want)
		}
	}
	h.checkSemaphores()
}

package conformance

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/dispatcher"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
)

var _ = register(
	scenario{"CancelReady", testCancelReady},
	scenario{"CancelBlocked", testCancelBlocked},
	scenario{"CancelScheduled", testCancelScheduled},
	scenario{"CancelFailed", testCancelFailed},
	scenario{"CancelFinishedAndUnknown", testCancelFinishedAndUnknown},
	scenario{"CancelSelf", testCancelSelf},
	scenario{"CancelMarkedRunEnds", testCancelMarkedRunEnds},
	scenario{"CancelMarkedClaimReaped", testCancelMarkedClaimReaped},
	scenario{"CancelRunningCrossProcess", testCancelRunningCrossProcess},
	scenario{"CancelRacesCompletion", testCancelRacesCompletion},
)

// causes holds, by job id, the cause of each run of the cancel jobs whose
// context ended.
var causes sync.Map

// cancelBehave is behave, remembering why a run's context ended; Mode
// "self-cancel" returns bq.Cancel.
func cancelBehave(ctx context.Context, a Args) error {
	if a.Mode == "self-cancel" {
		return bq.Cancel(errors.New("nothing left to do"))
	}
	err := behave(ctx, a)
	if ctx.Err() != nil {
		meta, _ := bq.JobFromContext(ctx)
		causes.Store(meta.ID, context.Cause(ctx))
	}
	return err
}

var (
	// Retries are allowed and immediate: a cancelled run that were
	// retried would show.
	cancel1Job = bq.Define("c.cancel1", cancelBehave, bq.JobOptions[Args]{MaxAttempts: 5,
		Backoff: func(int) time.Duration { return 0 }, Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 1}})
	cancel2Job = bq.Define("c.cancel2", cancelBehave, bq.JobOptions[Args]{MaxAttempts: 5,
		Backoff: func(int) time.Duration { return 0 }, Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 2}})
)

// cancelJob cancels id through the test's client, which runs no worker.
func cancelJob(t *testing.T, h *harness, id int64) bq.JobState {
	t.Helper()
	st, err := h.client.Cancel(context.Background(), id)
	if err != nil {
		t.Fatalf("cancel job %d: %v", id, err)
	}
	return st
}

// wantCancelled checks a job finished cancelled with a finish time.
func wantCancelled(t *testing.T, h *harness, id int64) *bq.JobInfo {
	t.Helper()
	info := jobInfo(t, h, id)
	if info.State != bq.StateCancelled || info.FinishedAt == nil {
		t.Errorf("job %d: %s, finished %v; want cancelled with a finish time", id, info.State, info.FinishedAt)
	}
	return info
}

// wantExplained checks Explain's summary of id says want.
func wantExplained(t *testing.T, h *harness, id int64, want string) *bq.Explanation {
	t.Helper()
	e, err := h.client.Explain(context.Background(), id)
	if err != nil || !strings.Contains(e.Summary, want) {
		t.Errorf("Explain(%d) = %+v, %v; want a summary saying %q", id, e, err, want)
	}
	return e
}

// wantStates checks each job's state.
func wantStates(t *testing.T, h *harness, what string, want map[int64]bq.JobState) {
	t.Helper()
	for id, st := range want {
		if got := h.state(id); got != st {
			t.Errorf("%s: job %d is %s, want %s", what, id, got, st)
		}
	}
}

// testCancelReady: cancelling a ready keyed job releases its slot in the
// same call, passing it to the first blocked job of its key, and to that
// one only; an unkeyed ready job just finishes.
func testCancelReady(t *testing.T, h *harness) {
	holder := enqueue(t, h, cancel1Job, Args{Key: "r"})
	first := enqueue(t, h, cancel1Job, Args{Key: "r"})
	second := enqueue(t, h, cancel1Job, Args{Key: "r"})
	plain := enqueue(t, h, unkeyedJob, Args{})
	if holder.State != bq.StateReady || first.State != bq.StateBlocked || second.State != bq.StateBlocked {
		t.Fatalf("enqueue: %+v %+v %+v, want ready, blocked, blocked", holder, first, second)
	}
	if st := cancelJob(t, h, holder.ID); st != bq.StateCancelled {
		t.Fatalf("cancel a ready job: %s, want cancelled", st)
	}
	info := wantCancelled(t, h, holder.ID)
	wantExplained(t, h, holder.ID, "Cancelled at")
	if info.Attempts != 0 {
		t.Errorf("cancelled ready job: %d attempts, want 0 (it never ran)", info.Attempts)
	}
	// No dispatcher runs: the promotion is the cancel's own.
	wantStates(t, h, "after cancelling the holder", map[int64]bq.JobState{first.ID: bq.StateReady, second.ID: bq.StateBlocked})
	h.checkSemaphores()
	if st := cancelJob(t, h, first.ID); st != bq.StateCancelled {
		t.Fatalf("cancel the promoted job: %s", st)
	}
	wantStates(t, h, "after cancelling the promoted job", map[int64]bq.JobState{second.ID: bq.StateReady})
	if st := cancelJob(t, h, plain.ID); st != bq.StateCancelled {
		t.Fatalf("cancel an unkeyed ready job: %s", st)
	}
	wantCancelled(t, h, plain.ID)
	if n := h.count(`SELECT count(*) FROM bq_ready_executions`); n != 1 {
		t.Errorf("%d ready rows, want 1 (the last promoted job)", n)
	}
	h.checkSemaphores()
}

// testCancelBlocked: a blocked job leaves the line: the semaphore's
// blocked count drops, no slot changes, and the job behind it is next.
func testCancelBlocked(t *testing.T, h *harness) {
	holder := enqueue(t, h, cancel1Job, Args{Key: "b"})
	gone := enqueue(t, h, cancel1Job, Args{Key: "b"})
	next := enqueue(t, h, cancel1Job, Args{Key: "b"})
	if st := cancelJob(t, h, gone.ID); st != bq.StateCancelled {
		t.Fatalf("cancel a blocked job: %s, want cancelled", st)
	}
	wantCancelled(t, h, gone.ID)
	wantStates(t, h, "after cancelling a blocked job", map[int64]bq.JobState{holder.ID: bq.StateReady, next.ID: bq.StateBlocked})
	if n := h.count(`SELECT blocked FROM bq_semaphores`); n != 1 {
		t.Errorf("semaphore's blocked count %d, want 1", n)
	}
	h.checkSemaphores()
	cancelJob(t, h, holder.ID)
	wantStates(t, h, "after cancelling the holder", map[int64]bq.JobState{next.ID: bq.StateReady, gone.ID: bq.StateCancelled})
	h.checkSemaphores()
}

// testCancelScheduled: a scheduled job is cancelled before it is due and
// never admitted.
func testCancelScheduled(t *testing.T, h *harness) {
	holder := enqueue(t, h, cancel1Job, Args{Key: "s"})
	later := enqueue(t, h, cancel1Job, Args{Key: "s"}, bq.In(time.Hour))
	if later.State != bq.StateScheduled {
		t.Fatalf("enqueue In(1h): %+v, want scheduled", later)
	}
	if st := cancelJob(t, h, later.ID); st != bq.StateCancelled {
		t.Fatalf("cancel a scheduled job: %s, want cancelled", st)
	}
	wantCancelled(t, h, later.ID)
	if n := h.count(`SELECT count(*) FROM bq_scheduled_executions`); n != 0 {
		t.Errorf("%d scheduled rows left, want 0", n)
	}
	pass(t, h, dispatcher.Config{Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
	wantStates(t, h, "after its due time", map[int64]bq.JobState{later.ID: bq.StateCancelled, holder.ID: bq.StateReady})
	h.checkSemaphores()
}

// testCancelFailed: a failed job is cancelled like a discard by hand, but
// ends cancelled, its last error kept.
func testCancelFailed(t *testing.T, h *harness) {
	res := enqueue(t, h, onceJob, Args{Key: "f", Mode: "fail"})
	worker(h, 1)
	h.waitState(res.ID, bq.StateFailed)
	if st := cancelJob(t, h, res.ID); st != bq.StateCancelled {
		t.Fatalf("cancel a failed job: %s, want cancelled", st)
	}
	info := wantCancelled(t, h, res.ID)
	if info.Attempts != 1 || info.LastError != "boom" {
		t.Errorf("cancelled failed job: %d attempts, error %q; want 1 and its failure kept", info.Attempts, info.LastError)
	}
	if n := h.count(`SELECT count(*) FROM bq_failed_executions`); n != 0 {
		t.Errorf("%d failed rows left, want 0", n)
	}
	h.checkSemaphores()
}

// testCancelFinishedAndUnknown: a finished job and an unknown id are
// refused with errors naming the problem, and nothing changes.
func testCancelFinishedAndUnknown(t *testing.T, h *harness) {
	ctx := context.Background()
	done := enqueue(t, h, cancel1Job, Args{Key: "d"})
	worker(h, 1)
	h.waitState(done.ID, bq.StateCompleted)
	before := jobInfo(t, h, done.ID)
	st, err := h.client.Cancel(ctx, done.ID)
	if !errors.Is(err, bq.ErrJobFinished) || st != "" || !strings.Contains(err.Error(), "completed") ||
		!strings.Contains(err.Error(), "nothing changed") {
		t.Errorf("cancel a completed job: %q, %v; want ErrJobFinished naming its state and that nothing changed", st, err)
	}
	if after := jobInfo(t, h, done.ID); after.State != bq.StateCompleted || !after.FinishedAt.Equal(*before.FinishedAt) || after.Attempts != before.Attempts {
		t.Errorf("completed job after a refused cancel: %+v, want unchanged %+v", after, before)
	}
	gone := enqueue(t, h, unkeyedJob, Args{}, bq.In(time.Hour))
	cancelJob(t, h, gone.ID)
	if _, err := h.client.Cancel(ctx, gone.ID); !errors.Is(err, bq.ErrJobFinished) || !strings.Contains(err.Error(), "cancelled") {
		t.Errorf("cancel twice: %v, want ErrJobFinished naming cancelled", err)
	}
	if _, err := h.client.Cancel(ctx, 1<<40); !errors.Is(err, bq.ErrJobNotFound) {
		t.Errorf("cancel an unknown id: %v, want ErrJobNotFound", err)
	}
}

// testCancelSelf: a job returning bq.Cancel(err) ends cancelled at once,
// err its last error, not retried though attempts remain, and its slot
// goes to the next blocked job.
func testCancelSelf(t *testing.T, h *harness) {
	inner := errors.New("inner")
	if err := bq.Cancel(inner); !errors.Is(err, inner) || !errors.Is(err, bq.ErrCancelled) {
		t.Errorf("bq.Cancel(err) = %v: want errors.Is to see both err and ErrCancelled", err)
	}
	self := enqueue(t, h, cancel1Job, Args{Key: "self", Mode: "self-cancel"})
	next := enqueue(t, h, cancel1Job, Args{Key: "self", SleepMS: 10})
	rec := h.recorder()
	worker(h, 2)
	h.waitState(next.ID, bq.StateCompleted)
	info := wantCancelled(t, h, self.ID)
	wantExplained(t, h, self.ID, "nothing left to do")
	if info.Attempts != 1 || info.LastError != "nothing left to do" {
		t.Errorf("self-cancelled job: %d attempts, error %q; want 1 and the wrapped error's text", info.Attempts, info.LastError)
	}
	if runs := rec.all(); len(runs) != 1 || runs[0].JobID != next.ID {
		t.Errorf("runs %+v, want the next job's only: the cancelled one must not be retried", runs)
	}
	h.checkSemaphores()
}

// testCancelMarkedRunEnds: a cancel of a running job marks its claim and
// leaves its slot held; then each way a run can end decides: a
// completion still completes (the work was done), a retry, a failure, a
// snooze and a return at shutdown all finish it cancelled, the slot passed
// to the next blocked job in the same transaction.
func testCancelMarkedRunEnds(t *testing.T, h *harness) {
	ctx := context.Background()
	proc := registerProcess(t, h, time.Now())
	now := time.Now()
	ends := []struct {
		name string
		end  func(ex driver.Executor, c *driver.Claim) (lifecycle.Result, error)
		want bq.JobState
	}{
		{"complete", func(ex driver.Executor, c *driver.Claim) (lifecycle.Result, error) {
			return lifecycle.Complete(ctx, ex, c, true, now)
		}, bq.StateCompleted},
		{"retry", func(ex driver.Executor, c *driver.Claim) (lifecycle.Result, error) {
			return lifecycle.Retry(ctx, ex, c, "context canceled", now, now)
		}, bq.StateCancelled},
		{"fail", func(ex driver.Executor, c *driver.Claim) (lifecycle.Result, error) {
			return lifecycle.Fail(ctx, ex, c, "boom", now)
		}, bq.StateCancelled},
		{"snooze", func(ex driver.Executor, c *driver.Claim) (lifecycle.Result, error) {
			return lifecycle.Snooze(ctx, ex, c, now.Add(time.Hour), now)
		}, bq.StateCancelled},
		{"return", func(ex driver.Executor, c *driver.Claim) (lifecycle.Result, error) {
			return lifecycle.Unclaim(ctx, ex, c, now)
		}, bq.StateCancelled},
	}
	for _, e := range ends {
		key := "m-" + e.name
		running := enqueue(t, h, cancel1Job, Args{Key: key})
		behind := enqueue(t, h, cancel1Job, Args{Key: key})
		cl := claimOne(t, h, proc)
		if cl.ID != running.ID {
			t.Fatalf("%s: claimed job %d, want %d", e.name, cl.ID, running.ID)
		}
		if st := cancelJob(t, h, running.ID); st != bq.StateRunning {
			t.Fatalf("%s: cancel a running job: %s, want running (cancel requested)", e.name, st)
		}
		if n := h.count(`SELECT count(*) FROM bq_claimed_executions WHERE cancel_requested_at IS NOT NULL`); n != 1 {
			t.Errorf("%s: %d marked claims, want 1", e.name, n)
		}
		// Marked, still running: the slot stays held.
		wantStates(t, h, e.name+": after the cancel request", map[int64]bq.JobState{running.ID: bq.StateRunning, behind.ID: bq.StateBlocked})
		if x := wantExplained(t, h, running.ID, "its slot frees when the run ends"); x.CancelRequestedAt.IsZero() ||
			!strings.Contains(x.Summary, "Cancel requested at") {
			t.Errorf("%s: Explain of a running job with a pending cancel: %+v, want when it was requested", e.name, x)
		}
		if st := cancelJob(t, h, running.ID); st != bq.StateRunning {
			t.Errorf("%s: a second cancel of the running job: %s, want running", e.name, st)
		}
		var r lifecycle.Result
		err := driver.InTx(ctx, h.driver(), func(ex driver.Executor) (err error) {
			r, err = e.end(ex, cl)
			return err
		})
		if err != nil || !r.Matched {
			t.Fatalf("%s: end the run: %+v, %v", e.name, r, err)
		}
		wantStates(t, h, e.name+": after the run ended", map[int64]bq.JobState{running.ID: e.want, behind.ID: bq.StateReady})
		h.checkSemaphores()
		if _, err := h.client.Cancel(ctx, behind.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// testCancelMarkedClaimReaped: a claim marked for cancel whose process
// died is reaped as cancelled, not returned to ready, and its slot goes to
// the next blocked job.
func testCancelMarkedClaimReaped(t *testing.T, h *harness) {
	res := enqueue(t, h, cancel1Job, Args{Key: "rc"})
	behind := enqueue(t, h, cancel1Job, Args{Key: "rc"})
	claimOne(t, h, registerProcess(t, h, time.Now().Add(-time.Hour)))
	if st := cancelJob(t, h, res.ID); st != bq.StateRunning {
		t.Fatalf("cancel: %s, want running", st)
	}
	witness(t, h)
	pass(t, h, dispatcher.Config{ProcessDeadAfter: time.Minute})
	info := wantCancelled(t, h, res.ID)
	if info.Attempts != 1 || info.LastError != lifecycle.ReapMessage {
		t.Errorf("reaped cancelled claim: %d attempts, %q; want 1 and the lost process named", info.Attempts, info.LastError)
	}
	wantStates(t, h, "after the reap", map[int64]bq.JobState{behind.ID: bq.StateReady})
	h.checkSemaphores()
}

// testCancelRunningCrossProcess: two worker processes run keyed jobs (a
// To=1 key and a To=2 key); a client that runs neither cancels a running
// job of each. Its run's context ends promptly, well before any heartbeat
// could have told its process, with cause ErrCancelled; it ends
// cancelled, not retried; the next blocked job starts once; and runs of
// each key never overlap above its limit.
func testCancelRunningCrossProcess(t *testing.T, h *harness) {
	cfg := testConfig()
	// Beats every 5 s: a cancel seen sooner came through the wake-up.
	cfg.HeartbeatInterval, cfg.ProcessDeadAfter = 5*time.Second, 30*time.Second
	cfg.Queues = map[string]int{"default": 4}
	long := Args{SleepMS: 60_000}
	short := Args{SleepMS: 150}
	one := enqueue(t, h, cancel1Job, Args{Key: "x", SleepMS: long.SleepMS})
	oneNext := enqueue(t, h, cancel1Job, Args{Key: "x", SleepMS: short.SleepMS})
	twoA := enqueue(t, h, cancel2Job, Args{Key: "y", SleepMS: long.SleepMS})
	twoB := enqueue(t, h, cancel2Job, Args{Key: "y", SleepMS: 1500})
	twoNext := enqueue(t, h, cancel2Job, Args{Key: "y", SleepMS: short.SleepMS})
	rec := h.recorder()
	h.run(h.clientWith(cfg))
	h.run(h.clientWith(cfg))
	h.waitState(one.ID, bq.StateRunning)
	h.waitState(twoA.ID, bq.StateRunning)
	// The processes' listeners start beside their first claims; a signal
	// sent before one starts is no news to it (the heartbeat check is its
	// fallback), so give them a moment.
	time.Sleep(300 * time.Millisecond)

	for _, id := range []int64{one.ID, twoA.ID} {
		asked := time.Now()
		if st := cancelJob(t, h, id); st != bq.StateRunning {
			t.Fatalf("cancel running job %d: %s, want running (cancel requested)", id, st)
		}
		h.eventually(20*time.Second, "the cancelled job to end", func() bool { return h.state(id) == bq.StateCancelled })
		if took := time.Since(asked); took > 3*time.Second {
			t.Errorf("job %d took %s to end after its cancel, want well under the 5 s heartbeat: its process must be woken", id, took)
		}
		cause, _ := causes.Load(id)
		if err, _ := cause.(error); !errors.Is(err, bq.ErrCancelled) {
			t.Errorf("job %d's run ended with cause %v, want bq.ErrCancelled", id, cause)
		}
		if info := jobInfo(t, h, id); info.Attempts != 1 || !strings.Contains(info.LastError, "bq: job cancelled") {
			t.Errorf("job %d: %d attempts, last error %q; want 1 and the cancel named", id, info.Attempts, info.LastError)
		}
	}
	h.waitState(oneNext.ID, bq.StateCompleted)
	h.waitState(twoNext.ID, bq.StateCompleted)
	h.waitState(twoB.ID, bq.StateCompleted)
	runs := rec.all()
	count := map[int64]int{}
	for _, r := range runs {
		count[r.JobID]++
	}
	for _, id := range []int64{one.ID, oneNext.ID, twoA.ID, twoB.ID, twoNext.ID} {
		if count[id] != 1 {
			t.Errorf("job %d ran %d times, want once (a cancelled run is not retried)", id, count[id])
		}
	}
	over := maxOverlap(runs)
	if over["x"] > 1 || over["y"] > 2 {
		t.Errorf("overlap %v: want x (To=1) at most 1 and y (To=2) at most 2", over)
	}
	h.checkSemaphores()
}

// testCancelRacesCompletion: jobs that end quickly are cancelled, each
// from its own goroutine, as two worker processes run them. Each ends in
// exactly one of completed and cancelled, a job Cancel reported cancelled
// at once never runs after, none runs twice, and every slot comes back.
func testCancelRacesCompletion(t *testing.T, h *harness) {
	ctx := context.Background()
	const jobs = 40
	ids := make([]int64, jobs)
	for i := range ids {
		// Runs long enough that cancels, spread over 600 ms, land on
		// running jobs as well as on waiting and finished ones.
		ids[i] = enqueue(t, h, cancel2Job, Args{Key: string(rune('a' + i%4)), Seq: i, SleepMS: 100 + rand.N(200)}).ID
	}
	rec := h.recorder()
	worker(h, 3)
	worker(h, 3)
	// Cancels race runs only once both processes work, and are spread
	// from the first claim on (a loaded machine starts the workers late):
	// jobs of the first waves finish before their cancel, while later
	// ones are running when theirs lands.
	h.eventually(20*time.Second, "both worker processes to register", func() bool {
		return h.count(`SELECT count(*) FROM bq_processes`) == 2
	})
	h.eventually(20*time.Second, "a first claim", func() bool {
		return h.count(`SELECT count(*) FROM bq_claimed_executions`) > 0
	})
	type answer struct {
		state bq.JobState
		err   error
		at    time.Time
	}
	answers := make([]answer, jobs)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			time.Sleep(time.Duration(rand.N(600)) * time.Millisecond)
			st, err := h.client.Cancel(ctx, id)
			answers[i] = answer{st, err, time.Now()}
		})
	}
	wg.Wait()
	h.eventually(20*time.Second, "every job to finish", func() bool {
		return h.count(`SELECT count(*) FROM bq_jobs WHERE finished_at IS NULL`) == 0
	})
	runs := rec.all()
	ranAt := map[int64][]time.Time{}
	for _, r := range runs {
		ranAt[r.JobID] = append(ranAt[r.JobID], r.Start)
	}
	counted := map[string]int{}
	for i, id := range ids {
		a, st := answers[i], h.state(id)
		counted[string(st)]++
		if a.state == bq.StateRunning {
			counted["asked while running"]++
		}
		switch {
		case st != bq.StateCompleted && st != bq.StateCancelled:
			t.Errorf("job %d ended %s, want completed or cancelled", id, st)
		case len(ranAt[id]) > 1:
			t.Errorf("job %d ran %d times, want at most once", id, len(ranAt[id]))
		case a.err != nil && !errors.Is(a.err, bq.ErrJobFinished):
			t.Errorf("cancel job %d: %v", id, a.err)
		case a.err != nil && st != bq.StateCompleted:
			t.Errorf("job %d: cancel said finished (%v), but it ended %s", id, a.err, st)
		case a.state == bq.StateCancelled && st != bq.StateCancelled:
			t.Errorf("job %d: cancel said cancelled, but it ended %s", id, st)
		case a.state == bq.StateCancelled && len(ranAt[id]) > 0:
			// Cancelled at once means it was not running: it never ran.
			t.Errorf("job %d ran at %s, though its cancel returned cancelled at %s", id, ranAt[id][0], a.at)
		}
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs WHERE cancelled AND finished_at IS NULL`); n != 0 {
		t.Errorf("%d unfinished jobs marked cancelled", n)
	}
	if over := maxOverlap(runs); over["a"] > 2 || over["b"] > 2 || over["c"] > 2 || over["d"] > 2 {
		t.Errorf("overlap %v above To=2", over)
	}
	t.Logf("endings: %v", counted)
	if counted["asked while running"] == 0 || counted[string(bq.StateCompleted)] == 0 {
		t.Errorf("endings %v: no cancel raced a run, or none lost to a completion: the race this test is for did not happen", counted)
	}
	h.checkSemaphores()
}

package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"DependsDiamondUnderKill9", testDependsDiamondKill9},
	scenario{"DependsDiamondUnderPauses", testDependsDiamondPauses},
	scenario{"DependsFailureCancelsOrRuns", testDependsFailure},
	scenario{"DependsFanOutHoldsTheKeyLimit", testDependsFanOut},
	scenario{"DependsRetryRearmsTheCancelled", testDependsRearm},
)

// testDependsRearm: A fails for good on its first run, cancelling B,
// which waits for it, and C, which waits for B. Retrying A by hand makes
// B and C wait again; A completes, then B, then C run, in that order.
func testDependsRearm(t *testing.T, h *harness) {
	ctx := context.Background()
	a := enqueue(t, h, retryJob, Args{Seq: 0, SleepMS: 20, Mode: "permanent-first"})
	b := enqueue(t, h, unkeyedJob, Args{Seq: 1}, bq.DependsOn(a.ID))
	c := enqueue(t, h, unkeyedJob, Args{Seq: 2}, bq.DependsOn(b.ID))
	// A unique job waiting counts for its unique key by default.
	unique := bq.WithUnique(bq.Unique{ByArgs: true})
	u1 := enqueue(t, h, unkeyedJob, Args{Seq: 3}, bq.DependsOn(a.ID), unique)
	if u2 := enqueue(t, h, unkeyedJob, Args{Seq: 3}, bq.DependsOn(a.ID), unique); !u2.Duplicate || u2.DuplicateOf != u1.ID {
		t.Errorf("a second unique job while the first waits: %+v, want a duplicate of %d", u2, u1.ID)
	}
	worker(h, 2)
	h.waitState(a.ID, bq.StateFailed)
	h.waitState(c.ID, bq.StateCancelled)
	if st := h.state(b.ID); st != bq.StateCancelled {
		t.Fatalf("B is %s after A failed, want cancelled", st)
	}
	if _, err := h.client.RetryFailed(ctx, a.ID); err != nil {
		t.Fatalf("RetryFailed(A): %v", err)
	}
	h.waitState(c.ID, bq.StateCompleted)
	runs := map[int]run{}
	for _, r := range h.recorder().all() {
		runs[r.Seq] = r
	}
	if !runs[1].Start.After(runs[0].End) || !runs[2].Start.After(runs[1].End) {
		t.Errorf("after the retry: A %v-%v, B %v-%v, C %v-%v; want A, then B, then C",
			runs[0].Start, runs[0].End, runs[1].Start, runs[1].End, runs[2].Start, runs[2].End)
	}
	if n := h.count(`SELECT count(*) FROM bq_dependency_cancels`); n != 0 {
		t.Errorf("%d cancels left recorded after the re-arm", n)
	}
}

// testDependsDiamondKill9: diamonds A -> B, C -> D (D waits for B and C,
// which wait for A) enqueued for 6 s while three worker processes are
// killed with SIGKILL now and then. Every job completes; judged from the
// runs the jobs recorded, no dependent's run starts before the last run
// of each job it waits for ended (the run whose completion admitted it),
// and a D that was never reaped ran once.
func testDependsDiamondKill9(t *testing.T, h *harness) {
	f := h.chaosFleet(3, 4)
	f.busyFirst = true
	got := h.enqueueDiamonds(t, func() int { return 50 + rand.IntN(250) })
	f.killFor(6*time.Second, nil)
	diamonds := <-got
	byJob := h.checkDiamonds(t, diamonds, lastEnd)
	once := 0
	for _, x := range diamonds {
		if h.count(`SELECT attempt FROM bq_jobs WHERE id = `+itoa(x.d)) == 1 {
			once++
			if n := len(byJob[x.d]); n != 1 {
				t.Errorf("diamond end %d, never reaped, ran %d times", x.d, n)
			}
		}
	}
	t.Logf("%s: %d kills, %d diamonds, %d ends run once and never reaped", h.db, f.kills, len(diamonds), once)
}

// diamond is A, then B and C (each waiting for A), then D (waiting for
// both), by job id.
type diamond struct{ a, b, c, d int64 }

// enqueueDiamonds enqueues a diamond of unkeyed jobs (runs of sleep() ms)
// every 300 ms for 6 s, and on until 8 are in (at most 30 s: an enqueue
// may wait out a frozen SQLite writer, and a loaded machine made 4 in
// 6 s), and sends them all once done.
func (h *harness) enqueueDiamonds(t *testing.T, sleep func() int) <-chan []diamond {
	out := make(chan []diamond, 1)
	go func() {
		ctx := context.Background()
		var diamonds []diamond
		defer func() { out <- diamonds }()
		for start := time.Now(); time.Since(start) < 6*time.Second || len(diamonds) < 8 && time.Since(start) < 30*time.Second; {
			in := func(opts ...bq.EnqueueOption) int64 {
				res, err := unkeyedJob.Enqueue(ctx, h.client, Args{Test: h.test, SleepMS: sleep()}, opts...)
				if err != nil {
					t.Errorf("enqueue a diamond's job: %v", err)
					return 0
				}
				return res.ID
			}
			var x diamond
			x.a = in()
			x.b = in(bq.DependsOn(x.a))
			x.c = in(bq.DependsOn(x.a))
			x.d = in(bq.DependsOn(x.b, x.c))
			if x.a == 0 || x.b == 0 || x.c == 0 || x.d == 0 {
				return
			}
			diamonds = append(diamonds, x)
			time.Sleep(300 * time.Millisecond)
		}
	}()
	return out
}

// checkDiamonds waits for every job of diamonds to complete, then checks
// that each completed once, that no edge or waiting row is left, and,
// from the runs the jobs recorded, that no dependent's run started before
// depEnd of each job it waits for (depEnd reads a job's runs). It returns
// the runs by job.
func (h *harness) checkDiamonds(t *testing.T, diamonds []diamond, depEnd func([]run) time.Time) map[int64][]run {
	t.Helper()
	var ids []int64
	for _, x := range diamonds {
		ids = append(ids, x.a, x.b, x.c, x.d)
	}
	h.waitFinished(len(ids), 2*time.Minute)
	h.checkDrained(ids)
	for _, table := range []string{"bq_waiting_executions", "bq_dependencies"} {
		if n := h.count(`SELECT count(*) FROM ` + table); n != 0 {
			t.Errorf("%d rows left in %s after every job completed", n, table)
		}
	}
	byJob := map[int64][]run{}
	for _, r := range h.dbRuns(t) {
		byJob[r.JobID] = append(byJob[r.JobID], r)
	}
	after := func(dependent int64, deps ...int64) {
		for _, dep := range deps {
			end := depEnd(byJob[dep])
			for _, r := range byJob[dependent] {
				if end.IsZero() || !r.Start.After(end) {
					t.Errorf("job %d started at %s, before job %d, which it waits for, ended (%s)", dependent, r.Start, dep, end)
				}
			}
		}
	}
	for _, x := range diamonds {
		after(x.b, x.a)
		after(x.c, x.a)
		after(x.d, x.b, x.c)
	}
	if len(diamonds) < 5 {
		t.Errorf("only %d diamonds were enqueued: the scenario tested little", len(diamonds))
	}
	return byJob
}

// lastEnd is when the last of runs that ended did: the run whose
// completion committed (a run killed before its end recorded none).
func lastEnd(runs []run) time.Time {
	var end time.Time
	for _, r := range runs {
		if r.End.UnixNano() > 0 && r.End.After(end) {
			end = r.End
		}
	}
	return end
}

// firstEnd is when the first of runs that ended did: under pauses a
// stale run may end after the one whose completion committed, so only
// "some run had ended" can be judged from the runs alone.
func firstEnd(runs []run) time.Time {
	var end time.Time
	for _, r := range runs {
		if r.End.UnixNano() > 0 && (end.IsZero() || r.End.Before(end)) {
			end = r.End
		}
	}
	return end
}

// testDependsFailure: A fails for good. B, waiting for A, is cancelled,
// and so is D, waiting for B; C, waiting for A with
// EvenIfDependenciesFail, runs after A failed. A job enqueued to wait for
// the already failed A is cancelled at once; one waiting for a job that
// does not exist, or naming id 0, is refused and nothing is stored.
func testDependsFailure(t *testing.T, h *harness) {
	ctx := context.Background()
	a := enqueue(t, h, onceJob, Args{Seq: 0, SleepMS: 300, Mode: "permanent"})
	b := enqueue(t, h, unkeyedJob, Args{Seq: 1}, bq.DependsOn(a.ID))
	c := enqueue(t, h, unkeyedJob, Args{Seq: 2}, bq.DependsOn(a.ID), bq.EvenIfDependenciesFail())
	d := enqueue(t, h, unkeyedJob, Args{Seq: 3}, bq.DependsOn(b.ID, c.ID))
	for _, r := range []bq.EnqueueResult{b, c, d} {
		if r.State != bq.StateWaiting {
			t.Fatalf("a job waiting for others: %+v, want waiting", r)
		}
	}
	want := fmt.Sprintf("for jobs %d and %d (0 of 2 done)", b.ID, c.ID)
	if ex, err := h.client.Explain(ctx, d.ID); err != nil || !strings.Contains(ex.Summary, want) ||
		!slices.Equal(ex.WaitingFor, []int64{b.ID, c.ID}) {
		t.Errorf("Explain of a waiting job = %+v, %v; want it to say %q", ex, err, want)
	}
	worker(h, 4)
	h.waitState(a.ID, bq.StateFailed)
	h.waitState(c.ID, bq.StateCompleted)
	h.waitState(b.ID, bq.StateCancelled)
	h.waitState(d.ID, bq.StateCancelled)
	runs := map[int]run{}
	for _, r := range h.recorder().all() {
		runs[r.Seq] = r
	}
	if _, ran := runs[1]; ran {
		t.Errorf("B ran although A, which it waits for, failed")
	}
	if _, ran := runs[3]; ran {
		t.Errorf("D ran although B, which it waits for, was cancelled")
	}
	if cr, ok := runs[2]; !ok || !cr.Start.After(runs[0].End) {
		t.Errorf("C (EvenIfDependenciesFail) ran %v, want once after A ended at %s", cr, runs[0].End)
	}
	late := enqueue(t, h, unkeyedJob, Args{Seq: 4}, bq.DependsOn(a.ID))
	if late.State != bq.StateCancelled {
		t.Errorf("a job waiting for a failed job: %+v, want cancelled at once", late)
	}
	before := h.count(`SELECT count(*) FROM bq_jobs`)
	if _, err := unkeyedJob.Enqueue(ctx, h.client, Args{Test: h.test}, bq.DependsOn(a.ID, 1<<40)); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("enqueue waiting for a job that does not exist: %v, want refused naming it", err)
	}
	if _, err := unkeyedJob.Enqueue(ctx, h.client, Args{Test: h.test}, bq.DependsOn(0)); !errors.Is(err, bq.ErrInvalidJob) {
		t.Errorf("enqueue DependsOn(0): %v, want ErrInvalidJob", err)
	}
	if _, err := unkeyedJob.Enqueue(ctx, h.client, Args{Test: h.test}, bq.EvenIfDependenciesFail()); !errors.Is(err, bq.ErrInvalidJob) {
		t.Errorf("enqueue EvenIfDependenciesFail alone: %v, want ErrInvalidJob", err)
	}
	if after := h.count(`SELECT count(*) FROM bq_jobs`); after != before {
		t.Errorf("refused enqueues stored %d jobs", after-before)
	}
}

// testDependsFanOutHoldsTheKeyLimit: 100 tasks of one key (To 2) wait for
// a root job. While the root runs they hold no slot of the key; once it
// completes, three worker processes run them, never more than 2 at once,
// each after the root ended.
func testDependsFanOut(t *testing.T, h *harness) {
	ctx := context.Background()
	stop := h.spawnWorkers(3, 4)
	defer stop()
	root := enqueue(t, h, unkeyedJob, Args{Seq: -1, SleepMS: 1500})
	args := make([]Args, 100)
	for i := range args {
		args[i] = Args{Test: h.test, Key: "fan", Seq: i, SleepMS: 10 + rand.IntN(20)}
	}
	tasks, err := limit2Job.EnqueueMany(ctx, h.client, args, bq.DependsOn(root.ID))
	if err != nil {
		t.Fatalf("enqueue the fan-out: %v", err)
	}
	ids := []int64{root.ID}
	for _, r := range tasks {
		ids = append(ids, r.ID)
	}
	h.waitState(root.ID, bq.StateRunning)
	if st, err := h.client.KeyState(ctx, bq.Key("c.limit2", "fan")); err != nil || (st.Exists && st.Taken != 0) {
		t.Errorf("the key while its 100 tasks wait for the root: %+v, %v; want no slot taken", st, err)
	}
	h.waitFinished(len(ids), 2*time.Minute)
	h.checkDrained(ids)
	runs := h.dbRuns(t)
	var rootEnd time.Time
	var fan []run
	for _, r := range runs {
		if r.JobID == root.ID {
			rootEnd = r.End
		} else {
			fan = append(fan, r)
		}
	}
	for _, r := range fan {
		if !r.Start.After(rootEnd) {
			t.Errorf("task %d started %s before the root ended", r.JobID, rootEnd.Sub(r.Start))
		}
	}
	overlap := checkOverlap(t, fan, map[string]int{"fan": 2})
	h.checkSemaphores()
	t.Logf("%s: %d runs of the fan-out, max overlap %v", h.db, len(fan), overlap)
}

// pauseFor freezes a worker (one with a run in progress when there is
// one) with SIGSTOP past ProcessDeadAfter, so its claims are reaped and
// run elsewhere, then resumes it, over and over for d.
func (f *chaosFleet) pauseFor(d, frozen time.Duration) int {
	n := 0
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		time.Sleep(time.Second + rand.N(time.Second))
		busy := f.busy()
		f.mu.Lock()
		victim := f.victim(busy)
		f.mu.Unlock()
		f.h.pause(victim)
		time.Sleep(frozen)
		f.h.resume(victim)
		n++
	}
	return n
}

// testDependsDiamondPauses: diamonds A -> B, C -> D while the worker
// processes are frozen (SIGSTOP) past ProcessDeadAfter and resumed, so
// runs are reaped and run again elsewhere while the frozen run may still
// finish (its completion fenced). Every job completes once; no dependent
// starts before a run of each job it waits for ended, nor twice at once,
// and the bookkeeping is empty after.
func testDependsDiamondPauses(t *testing.T, h *harness) {
	f := h.chaosFleet(3, 4)
	f.busyFirst = true
	got := h.enqueueDiamonds(t, func() int { return 100 + rand.IntN(300) })
	pauses := f.pauseFor(6*time.Second, chaosDeadAfter+time.Second)
	diamonds := <-got
	h.checkDiamonds(t, diamonds, firstEnd)
	if pauses == 0 {
		t.Error("no pause: the scenario tested nothing of a frozen worker")
	}
	again := h.count(`SELECT count(*) FROM bq_jobs WHERE attempt > 1`)
	t.Logf("%s: %d pauses of %s, %d diamonds, %d jobs run again after a pause", h.db, pauses, chaosDeadAfter+time.Second, len(diamonds), again)
}

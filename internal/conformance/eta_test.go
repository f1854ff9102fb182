package conformance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"ExpectedStartTracksTheActualWait", testExpectedStart},
	scenario{"MaxWaitRefusesAndStoresNothing", testMaxWait},
)

// etaMaxWait is maxWaitJob's bound.
const etaMaxWait = time.Second

var (
	etaJob = bq.Define("c.eta", behave, bq.JobOptions[Args]{
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 2}})
	maxWaitJob = bq.Define("c.maxwait", behave, bq.JobOptions[Args]{
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 1, MaxWait: etaMaxWait}})
)

// testExpectedStart: a key of limit 2 whose jobs run 250 ms (long
// beside a loaded machine's claim latency, which moves with the load of
// the scenarios beside it) is worked by 2 processes; a blocked job enqueued before any release has no
// expected start (no made-up figure); once the key's release interval is
// measured, a job enqueued 10th in line has an ExpectedStart (in its
// result and in Explain) within 50% of its actual wait, judged from its
// own start record.
func testExpectedStart(t *testing.T, h *harness) {
	ctx := context.Background()
	const jobs, runMS, place = 40, 250, 10
	key := "eta"
	full := bq.Key("c.eta", key)
	args := make([]Args, jobs)
	for i := range args {
		args[i] = Args{Test: h.test, Key: key, Seq: i, SleepMS: runMS}
	}
	res, err := etaJob.EnqueueMany(ctx, h.client, args)
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	for i, r := range res {
		if r.State == bq.StateBlocked && !r.ExpectedStart.IsZero() {
			t.Fatalf("job %d blocked before any release: ExpectedStart %s, want zero (no interval measured yet)", i, r.ExpectedStart)
		}
	}
	stop := h.spawnWorkers(2, 2)
	defer stop()
	// Steady: the interval measured, the line down to place-1 jobs.
	var k *bq.KeyState
	h.eventually(60*time.Second, fmt.Sprintf("the line of %s down to %d with a release interval", full, place-1), func() bool {
		time.Sleep(3 * time.Millisecond)
		k, err = h.client.KeyState(ctx, full)
		return err == nil && k.ReleaseInterval > 0 && k.Blocked <= place-1
	})
	enqueued := time.Now()
	probe, err := etaJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: key, Seq: jobs, SleepMS: runMS})
	if err != nil {
		t.Fatalf("enqueue the probe: %v", err)
	}
	if probe.State != bq.StateBlocked {
		t.Fatalf("probe is %s, want blocked", probe.State)
	}
	if probe.ExpectedStart.IsZero() {
		t.Fatalf("probe blocked on a key with a release interval: no ExpectedStart")
	}
	e, err := h.client.Explain(ctx, probe.ID)
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	if e.Job.State == bq.StateBlocked && (e.ExpectedStart.IsZero() || !containsAll(e.Summary, "expected to start in", "release interval")) {
		t.Errorf("Explain of the blocked probe: ExpectedStart %s, summary %q: want an expected start", e.ExpectedStart, e.Summary)
	}
	h.eventually(60*time.Second, "the probe to start", func() bool {
		return h.count(fmt.Sprintf(`SELECT count(*) FROM test_runs WHERE job_id = %d`, probe.ID)) > 0
	})
	var startNS int64
	if err := h.raw.QueryRowContext(ctx, fmt.Sprintf(`SELECT min(started_ns) FROM test_runs WHERE job_id = %d`, probe.ID)).Scan(&startNS); err != nil {
		t.Fatal(err)
	}
	actual := time.Unix(0, startNS).Sub(enqueued)
	expected := probe.ExpectedStart.Sub(enqueued)
	t.Logf("%s: probe %d-th in line at most (the line held %d): expected to wait %s, waited %s (interval %s at the read before)",
		h.db, k.Blocked+1, k.Blocked, expected.Round(time.Millisecond), actual.Round(time.Millisecond), k.ReleaseInterval)
	if math.Abs(float64(expected-actual)) > 0.5*float64(actual) {
		t.Errorf("expected wait %s is not within 50%% of the actual wait %s", expected.Round(time.Millisecond), actual.Round(time.Millisecond))
	}
	h.eventually(60*time.Second, "every job to finish", func() bool {
		return h.count(`SELECT count(*) FROM bq_jobs WHERE finished_at IS NULL`) == 0
	})
	h.checkSemaphores()
}

// testMaxWait: Concurrency.MaxWait refuses an enqueue whose expected
// wait exceeds it, storing nothing, with a *WaitTooLongError carrying
// the key, the expected wait (place × the key's release interval, to the
// microsecond) and RetryAfter; an EnqueueMany reports it per job; a job
// whose expected wait is at the bound or under it is accepted, with its
// ExpectedStart; with no interval measured nothing is refused; a
// negative MaxWait is refused at Define. The interval is set on the
// key's row (100 ms), so the bound is exact on every database
// (ExpectedStartTracksTheActualWait measures one).
func testMaxWait(t *testing.T, h *harness) {
	ctx := context.Background()
	const jobs, iv = 21, 100 * time.Millisecond
	key := "mw"
	full := bq.Key("c.maxwait", key)
	// No interval yet: a line of 20 is far above the bound, nothing refused.
	var ids []int64
	for i := range jobs {
		ids = append(ids, enqueue(t, h, maxWaitJob, Args{Key: key, Seq: i}).ID)
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs`); n != jobs {
		t.Fatalf("%d jobs stored with no release interval measured, want all %d", n, jobs)
	}
	if _, err := h.raw.ExecContext(ctx, fmt.Sprintf(`UPDATE bq_semaphores SET release_interval_us = %d`, iv.Microseconds())); err != nil {
		t.Fatal(err)
	}
	if k, err := h.client.KeyState(ctx, full); err != nil || k.ReleaseInterval != iv || k.Blocked != jobs-1 {
		t.Fatalf("KeyState: %+v, %v; want a release interval of %s and %d blocked", k, err, iv, jobs-1)
	}
	// 21st in line: expected to wait 2.1s, above MaxWait 1s.
	want := time.Duration(jobs) * iv
	_, err := maxWaitJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: key, Seq: jobs})
	var tl *bq.WaitTooLongError
	if !errors.Is(err, bq.ErrWaitTooLong) || !errors.As(err, &tl) {
		t.Fatalf("enqueue 21st in line × %s: %v, want a *bq.WaitTooLongError", iv, err)
	}
	if tl.Key != full || tl.ExpectedWait != want || tl.MaxWait != etaMaxWait || tl.Interval != iv || tl.RetryAfter != want-etaMaxWait {
		t.Errorf("refusal %+v, want key %q, expected wait %s, MaxWait %s, RetryAfter %s", tl, full, want, etaMaxWait, want-etaMaxWait)
	}
	wantErr(t, err, full, "expected to wait 2.1s", "MaxWait 1s", "enqueue again after 1.1s")
	if n := h.count(`SELECT count(*) FROM bq_jobs`); n != jobs {
		t.Errorf("%d jobs stored after the refusal, want %d: a refused job stores nothing", n, jobs)
	}
	many, err := maxWaitJob.EnqueueMany(ctx, h.client, []Args{{Test: h.test, Key: key, Seq: jobs + 1}, {Test: h.test, Key: key, Seq: jobs + 2}})
	if err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	for i, r := range many {
		// A refused job takes no place: the second is 21st in line too.
		if r.Refused == nil || r.State != bq.StateDiscarded || r.ID != 0 || r.Refused.ExpectedWait != want {
			t.Errorf("EnqueueMany[%d]: %+v, want refused (Refused set with %s, discarded, no id)", i, r, want)
		}
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs`); n != jobs {
		t.Errorf("%d jobs stored after EnqueueMany's refusals, want %d", n, jobs)
	}
	// 8 left in line: the 9th and 10th (0.9s, 1s) fit, the 11th does not.
	for _, id := range ids[9:] {
		if _, err := h.client.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for place := 9; place <= 10; place++ {
		before := time.Now()
		r, err := maxWaitJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: key, Seq: jobs + place})
		if err != nil {
			t.Fatalf("enqueue %d-th in line (expected wait %s, MaxWait %s): %v", place, time.Duration(place)*iv, etaMaxWait, err)
		}
		if r.State != bq.StateBlocked || r.ExpectedStart.Before(before.Add(time.Duration(place)*iv)) || r.ExpectedStart.After(time.Now().Add(time.Duration(place)*iv)) {
			t.Errorf("%d-th in line: %s, expected start %s, want blocked, %s after the enqueue", place, r.State, r.ExpectedStart, time.Duration(place)*iv)
		}
	}
	if _, err := maxWaitJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: key, Seq: jobs + 11}); !errors.As(err, &tl) || tl.ExpectedWait != 11*iv {
		t.Errorf("enqueue 11th in line: %v, want refused, expected to wait 1.1s", err)
	}
	h.checkSemaphores()

	bad := bq.Define("c.maxwait.bad."+h.test, behave, bq.JobOptions[Args]{
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 1, MaxWait: -time.Second}})
	if !errors.Is(bad.Err(), bq.ErrInvalidJob) {
		t.Fatalf("Define with MaxWait -1s: %v, want bq.ErrInvalidJob", bad.Err())
	}
	wantErr(t, bad.Err(), "MaxWait is -1s", "positive duration", "0 for no bound")
}

// containsAll reports whether s holds every part.
func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

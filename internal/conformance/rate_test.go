package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"RateAcrossProcesses", testRateAcrossProcesses},
	scenario{"RateWithConcurrencyKey", testRateWithConcurrencyKey},
	scenario{"RateKill9", testRateKill9},
	scenario{"RateFrozenInsideTransaction", testRateFrozen},
	scenario{"RateSaturatedKeyDoesNotSlowOthers", testRateNoHeadOfLine},
	scenario{"RateRetryIsANewStart", testRateRetry},
	scenario{"RateOverride", testRateOverride},
	scenario{"RateExplain", testRateExplain},
	scenario{"RateBadInput", testRateBadInput},
)

const ratePeriod = 400 * time.Millisecond

var (
	// rateJob: at most 3 starts per 400ms per key (WithRateKey changes
	// it per test).
	rateJob = bq.Define("c.rate", behave, bq.JobOptions[Args]{
		MaxAttempts: 3, Backoff: func(int) time.Duration { return 0 },
		Rate: &bq.Rate[Args]{Key: keyOf, Limit: 3, Period: ratePeriod}})
	// rateChaosJob: 5 starts per 300ms, and the default 25 attempts, so
	// a job killed mid-run several times is still run to the end.
	rateChaosJob = bq.Define("c.ratechaos", behave, bq.JobOptions[Args]{
		Rate: &bq.Rate[Args]{Key: keyOf, Limit: 5, Period: 300 * time.Millisecond}})
	// rateKeyedJob: one at a time per key, and at most 4 starts per 400ms.
	rateKeyedJob = bq.Define("c.ratekeyed", behave, bq.JobOptions[Args]{
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 1},
		Rate:        &bq.Rate[Args]{Key: keyOf, Limit: 4, Period: ratePeriod}})
)

// maxStarts returns, per key, the most starts that fell within one window
// shorter than period: two starts less than a period apart share a window.
func maxStarts(starts map[string][]time.Time, period time.Duration) map[string]int {
	out := map[string]int{}
	for key, ts := range starts {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		i := 0
		for j := range ts {
			for ts[j].Sub(ts[i]) >= period {
				i++
			}
			out[key] = max(out[key], j-i+1)
		}
	}
	return out
}

// startsOf groups the runs' starts by key.
func startsOf[R any](runs []R, key func(R) string, start func(R) time.Time) map[string][]time.Time {
	out := map[string][]time.Time{}
	for _, r := range runs {
		out[key(r)] = append(out[key(r)], start(r))
	}
	return out
}

func dbStarts(t *testing.T, h *harness) map[string][]time.Time {
	return startsOf(h.dbRuns(t), func(r run) string { return r.Key }, func(r run) time.Time { return r.Start })
}

// checkRate fails when a key had more than limits[key] starts within one
// period, and when one whose jobs were many never reached its limit (the
// limit is not mere serialisation).
func checkRate(t *testing.T, starts map[string][]time.Time, limits map[string]int, period time.Duration) map[string]int {
	t.Helper()
	return checkRateReach(t, starts, limits, period, true)
}

// checkRateReach is checkRate that asks the limit to be reached only
// with reach (a concurrency key beside the rate may bind first).
func checkRateReach(t *testing.T, starts map[string][]time.Time, limits map[string]int, period time.Duration, reach bool) map[string]int {
	t.Helper()
	most := maxStarts(starts, period)
	for key, limit := range limits {
		if most[key] > limit {
			t.Errorf("key %s: %d starts within %s, limit %d", key, most[key], period, limit)
		}
		if reach && len(starts[key]) >= 3*limit && most[key] < limit {
			t.Errorf("key %s: at most %d starts within %s of %d; with limit %d and idle workers the limit should be reached",
				key, most[key], period, len(starts[key]), limit)
		}
	}
	return most
}

// testRateAcrossProcesses: three worker processes x 4 slots start the
// jobs of two rate keys (3 and 2 per 400ms). From the jobs' own start
// records: no window of 400ms holds more starts than the key's limit, the
// limit is reached, and every job completes exactly once.
func testRateAcrossProcesses(t *testing.T, h *harness) {
	ctx := context.Background()
	limits := map[string]int{"r1": 3, "r2": 2}
	var ids []int64
	for i := range 36 {
		key := []string{"r1", "r2"}[i%2]
		var opts []bq.EnqueueOption
		if key == "r2" {
			opts = append(opts, bq.WithRateKey(key, 2, ratePeriod))
		}
		res, err := rateJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: key, Seq: i, SleepMS: 10 + rand.IntN(50)}, opts...)
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		ids = append(ids, res.ID)
	}
	if n := h.count(`SELECT count(*) FROM bq_ready_executions`); n > 5 {
		t.Errorf("%d jobs ready after the enqueue; the rates let at most 5 start now, the rest wait in their lines", n)
	}
	h.checkSemaphores()
	stop := h.spawnWorkers(3, 4)
	h.waitFinished(len(ids), 90*time.Second)
	stop()
	runs := h.dbRuns(t)
	perJob := map[int64]int{}
	pids := map[int]bool{}
	for _, r := range runs {
		perJob[r.JobID]++
		pids[r.PID] = true
	}
	for _, id := range ids {
		if perJob[id] != 1 {
			t.Errorf("job %d ran %d times, want exactly once", id, perJob[id])
		}
	}
	most := checkRate(t, dbStarts(t, h), limits, ratePeriod)
	if len(pids) < 2 {
		t.Errorf("runs came from %d process(es); want work spread over several", len(pids))
	}
	h.checkDrained(ids)
	t.Logf("%s: most starts in one %s window per key: %v; processes: %d", h.db, ratePeriod, most, len(pids))
}

// testRateWithConcurrencyKey: jobs with both a concurrency key (To=1)
// and a rate (4 per 400ms) on one key, from three processes: runs never
// overlap, no window holds more than 4 starts, and the semaphores are
// whole at the end (a job waiting for a start keeps its slot).
func testRateWithConcurrencyKey(t *testing.T, h *harness) {
	ctx := context.Background()
	var ids []int64
	for i := range 24 {
		key := fmt.Sprintf("rk%d", i%2)
		res, err := rateKeyedJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: key, Seq: i, SleepMS: 5 + rand.IntN(40)})
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		ids = append(ids, res.ID)
	}
	stop := h.spawnWorkers(3, 3)
	h.waitFinished(len(ids), 90*time.Second)
	stop()
	runs := h.dbRuns(t)
	for key, n := range maxOverlap(runs) {
		if n > 1 {
			t.Errorf("key %s: %d runs overlapped, limit 1", key, n)
		}
	}
	// One at a time, runs of 5-45 ms: the concurrency key may bind
	// before the rate does.
	most := checkRateReach(t, dbStarts(t, h), map[string]int{"rk0": 4, "rk1": 4}, ratePeriod, false)
	h.checkDrained(ids)
	h.checkSemaphores()
	if n := h.count(`SELECT count(*) FROM bq_semaphores WHERE value <> lim OR blocked <> 0`); n != 0 {
		t.Errorf("%d semaphores not whole after the drain", n)
	}
	t.Logf("%s: most starts per window %v", h.db, most)
}

// testRateKill9: three worker processes and a dispatcher drain jobs of a
// rate key (5 per 300ms) while a worker is killed with SIGKILL every
// ~1.5s and replaced. A killed run's start counts, and its retry is a new
// start: counting every start the jobs recorded, no window of 300ms holds
// more than 5; every job completes.
func testRateKill9(t *testing.T, h *harness) {
	const period = 300 * time.Millisecond
	ctx := context.Background()
	f := h.chaosFleet(3, 4)
	var ids []int64
	for i := range 60 {
		res, err := rateChaosJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "rc", Seq: i, SleepMS: 20 + rand.IntN(130)})
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		ids = append(ids, res.ID)
	}
	// The rate row's waiting count never falls below its line's rows (a
	// count too low would let the row be taken for idle and deleted).
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stopSampling:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var waiting, line int
			err := h.raw.QueryRowContext(ctx, `SELECT
	coalesce((SELECT sum(waiting) FROM bq_rate_limits), 0),
	(SELECT count(*) FROM bq_blocked_executions WHERE concurrency_key LIKE '/rate/%')`).Scan(&waiting, &line)
			if err == nil && waiting < line {
				t.Errorf("at %s: the rate row counts %d waiting, its line holds %d", time.Now().Format("15:04:05.000"), waiting, line)
				return
			}
		}
	}()
	f.killFor(6*time.Second, nil)
	h.waitFinished(len(ids), 2*time.Minute)
	close(stopSampling)
	<-sampled
	// Safety only: a killed run's start keeps its ring slot, and a
	// process stalled past the start slack (6 ms here) gives its slot
	// back unused, so on a loaded machine no window may reach the limit
	// (4 of 5 seen). Reaching it is RateAcrossProcesses' check; here every
	// job still has to complete within waitFinished's bound.
	most := checkRateReach(t, dbStarts(t, h), map[string]int{"rc": 5}, period, false)
	h.checkDrained(ids)
	t.Logf("%s: %d kills, %d runs of %d jobs, most starts per %s: %v", h.db, f.kills, len(h.dbRuns(t)), len(ids), period, most)
}

// testRateFrozenInsideTransaction: one of two worker processes is frozen
// (SIGSTOP) inside one of bq's own transactions, just before its commit
// (a claim's start of rated jobs, a completion), for 2s, then resumed.
// The runs it claimed began long after their claim: they must not run
// then (their start was counted at the claim), and no window of 400ms
// holds more starts than the limit.
func testRateFrozen(t *testing.T, h *harness) {
	ctx := context.Background()
	var ids []int64
	for i := range 30 {
		res, err := rateJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "rf", Seq: i, SleepMS: 5 + rand.IntN(20)},
			bq.WithRateKey("rf", 2, ratePeriod))
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		ids = append(ids, res.ID)
	}
	env := []string{"BQ_HEARTBEAT=500ms", "BQ_DEAD_AFTER=10s"}
	freeze := filepath.Join(t.TempDir(), "freeze")
	w1 := h.spawn("workers", 2, append(env, "BQ_FREEZE_FILE="+freeze)...)
	w2 := h.spawn("worker", 2, env...)
	stop := h.fleet(w1, w2)
	h.eventually(30*time.Second, "4 runs", func() bool { return h.count(`SELECT count(*) FROM test_runs`) >= 4 })
	if err := os.WriteFile(freeze, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h.eventually(20*time.Second, "W1 to reach a commit", func() bool {
		_, err := os.Stat(freeze + ".frozen")
		return err == nil
	})
	if err := w1.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if stack, err := os.ReadFile(freeze + ".frozen"); err == nil {
		t.Logf("%s: W1 frozen committing: %s", h.db, bqFrames(string(stack)))
	}
	time.Sleep(2 * time.Second)
	h.resume(w1)
	h.waitFinished(len(ids), 90*time.Second)
	stop()
	most := checkRate(t, dbStarts(t, h), map[string]int{"rf": 2}, ratePeriod)
	h.checkDrained(ids)
	t.Logf("%s: most starts per window %v", h.db, most)
}

// testRateNoHeadOfLine: a rate key far over its rate (1 per 100ms, 30
// jobs) does not hold up unlimited jobs of its queue enqueued after it:
// they all finish while the rated ones still wait.
func testRateNoHeadOfLine(t *testing.T, h *harness) {
	ctx := context.Background()
	for i := range 30 {
		if _, err := rateJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "slow", Seq: i},
			bq.WithRateKey("slow", 1, 100*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 40 {
		enqueue(t, h, unkeyedJob, Args{Key: "free", Seq: i, SleepMS: 5})
	}
	worker(h, 4)
	rec := h.recorder()
	h.eventually(60*time.Second, "70 runs", func() bool { return len(rec.all()) == 70 })
	var lastFree time.Time
	var slow []time.Time
	for _, r := range rec.all() {
		if r.Key == "free" {
			lastFree = later(lastFree, r.End)
		} else {
			slow = append(slow, r.Start)
		}
	}
	slices.SortFunc(slow, func(a, b time.Time) int { return a.Compare(b) })
	if !lastFree.Before(slow[14]) {
		t.Errorf("the 40 unlimited jobs ended %s after the rated key's 15th start; a key over its rate must not hold up others",
			lastFree.Sub(slow[14]))
	}
	checkRate(t, map[string][]time.Time{"slow": slow}, map[string]int{"slow": 1}, 100*time.Millisecond)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// testRateRetry: a run that fails is retried at once, but its retry is a
// new start: it waits for the key's next slot (1 per 400ms).
func testRateRetry(t *testing.T, h *harness) {
	res := enqueue(t, h, rateJob, Args{Key: "rr", Mode: "fail-first"}, bq.WithRateKey("rr", 1, ratePeriod))
	enqueue(t, h, rateJob, Args{Key: "rr", Seq: 1}, bq.WithRateKey("rr", 1, ratePeriod))
	worker(h, 4)
	rec := h.recorder()
	h.eventually(20*time.Second, "3 runs", func() bool { return len(rec.all()) == 3 })
	h.waitState(res.ID, bq.StateCompleted)
	checkRate(t, startsOf(rec.all(), func(r run) string { return r.Key }, func(r run) time.Time { return r.Start }),
		map[string]int{"rr": 1}, ratePeriod)
}

// testRateOverride: SetKeyRate raises a key's rate at once (waiting jobs
// start without waiting out the old period); ClearKeyRate goes back to
// the jobs' own.
func testRateOverride(t *testing.T, h *harness) {
	ctx := context.Background()
	key := bq.Key(rateJob.Name(), "ov")
	for i := range 8 {
		enqueue(t, h, rateJob, Args{Key: "ov", Seq: i}, bq.WithRateKey("ov", 1, time.Hour))
	}
	worker(h, 4)
	rec := h.recorder()
	h.eventually(20*time.Second, "the first run", func() bool { return len(rec.all()) == 1 })
	st, err := h.client.RateState(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if st.Limit != 1 || st.Period != time.Hour || st.Waiting != 7 || st.Recent != 1 {
		t.Errorf("rate state before the override: %+v, want limit 1 per 1h, 7 waiting, 1 recent start", st)
	}
	set := time.Now()
	if err := h.client.SetKeyRate(ctx, key, 100, time.Second); err != nil {
		t.Fatal(err)
	}
	setTook := time.Since(set)
	h.eventually(10*time.Second, "8 runs", func() bool { return len(rec.all()) == 8 })
	if d := time.Since(set); d > 5*time.Second {
		// Typically 25-250 ms; one CI run measured 7.8 s on MySQL. What
		// the reader of such a run needs: where the time went.
		var starts []time.Duration
		for _, r := range rec.all() {
			starts = append(starts, r.Start.Sub(set).Round(time.Millisecond))
		}
		t.Errorf("the waiting jobs took %s to start after the rate was raised (SetKeyRate returned after %s; starts after the raise: %v)",
			d, setTook, starts)
	}
	if st, err = h.client.RateState(ctx, key); err != nil || !st.Overridden || st.Limit != 100 {
		t.Errorf("rate state after SetKeyRate: %+v, %v; want overridden, limit 100", st, err)
	}
	if err := h.client.ClearKeyRate(ctx, key); err != nil {
		t.Fatal(err)
	}
	if st, err = h.client.RateState(ctx, key); err != nil || st.Overridden {
		t.Errorf("rate state after ClearKeyRate: %+v, %v; want no override", st, err)
	}
}

// testRateExplain: a job waiting for a start is blocked, and Explain
// names its rate key, its place in line and the next start.
func testRateExplain(t *testing.T, h *harness) {
	ctx := context.Background()
	first := enqueue(t, h, rateJob, Args{Key: "ex"}, bq.WithRateKey("ex", 1, time.Hour))
	second := enqueue(t, h, rateJob, Args{Key: "ex", Seq: 1}, bq.WithRateKey("ex", 1, time.Hour))
	if first.State != bq.StateReady || second.State != bq.StateBlocked {
		t.Fatalf("enqueue states %s, %s; want ready (a start reserved), then blocked (waiting for the rate)", first.State, second.State)
	}
	worker(h, 2)
	h.waitState(first.ID, bq.StateCompleted)
	e, err := h.client.Explain(ctx, second.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Rate == nil || e.Position != 1 || !strings.Contains(e.Summary, "rate limit of key") || !strings.Contains(e.Summary, "next start at") {
		t.Errorf("explain of a job waiting for its rate: %q, rate %+v, position %d", e.Summary, e.Rate, e.Position)
	}
	if e.Rate != nil && (e.Rate.Waiting != 1 || len(e.Rate.Line) != 1 || e.Rate.Line[0].JobID != second.ID) {
		t.Errorf("rate state: %+v, want the second job alone in line", e.Rate)
	}
	if st := h.state(second.ID); st != bq.StateBlocked {
		t.Errorf("second job is %s, want blocked until the hour is up", st)
	}
	if _, err := h.client.Cancel(ctx, second.ID); err != nil {
		t.Fatal(err)
	}
	if st, _ := h.client.RateState(ctx, bq.Key(rateJob.Name(), "ex")); st == nil || st.Waiting != 0 {
		t.Errorf("rate state after cancelling the waiting job: %+v, want none waiting", st)
	}
}

// testRateBadInput: a rate that cannot be counted is refused before the
// database, with the same error on every database.
func testRateBadInput(t *testing.T, h *harness) {
	ctx := context.Background()
	for _, r := range []bq.Rate[Args]{
		{Key: keyOf, Limit: 0, Period: time.Second},
		{Key: keyOf, Limit: 1, Period: 0},
		{Key: keyOf, Limit: 1, Period: 1500 * time.Microsecond},
		{Key: keyOf, Limit: bq.MaxRateLimit + 1, Period: time.Second},
		{Key: nil, Limit: 1, Period: time.Second},
	} {
		j := bq.Define(fmt.Sprintf("c.badrate.%s.%d.%s.%t", h.test, r.Limit, r.Period, r.Key == nil), behave, bq.JobOptions[Args]{Rate: &r})
		if !errors.Is(j.Err(), bq.ErrInvalidJob) || !strings.Contains(j.Err().Error(), "Rate") {
			t.Errorf("Define with rate %+v: %v, want ErrInvalidJob naming Rate", r, j.Err())
		}
	}
	for _, opt := range []bq.EnqueueOption{
		bq.WithRateKey("k", -1, time.Second),
		bq.WithRateKey("k", 1, -time.Second),
		bq.WithRateKey("k\x00", 1, time.Second),
	} {
		if _, err := unkeyedJob.Enqueue(ctx, h.client, Args{Test: h.test}, opt); !errors.Is(err, bq.ErrInvalidJob) {
			t.Errorf("enqueue with a bad WithRateKey: %v, want ErrInvalidJob", err)
		}
	}
	if _, err := unkeyedJob.Enqueue(ctx, h.client, Args{Test: h.test}, bq.WithRateKey("k", 0, 0)); !errors.Is(err, bq.ErrInvalidJob) ||
		!strings.Contains(err.Error(), "Limit") {
		t.Errorf("WithRateKey with no limit on a kind without Rate: %v, want ErrInvalidJob naming the Limit", err)
	}
	if err := h.client.SetKeyRate(ctx, bq.Key("g", "k"), 0, time.Second); !errors.Is(err, bq.ErrInvalidArgument) {
		t.Errorf("SetKeyRate limit 0: %v, want ErrInvalidArgument", err)
	}
	if err := h.client.SetKeyRate(ctx, "", 1, time.Second); !errors.Is(err, bq.ErrInvalidArgument) {
		t.Errorf("SetKeyRate with an empty key: %v, want ErrInvalidArgument", err)
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs`); n != 0 {
		t.Errorf("%d jobs stored by refused enqueues", n)
	}
}

package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"AdaptiveLimitSettles", testAdaptiveLimitSettles},
	scenario{"AdaptiveBadInput", testAdaptiveBadInput},
)

// Adaptive scenario's bounds: the key's own limit (the most it rises
// to) and its floor.
const (
	adaptiveTo  = 12
	adaptiveMin = 2
)

// adaptiveJob's key adapts; a throttle spending an attempt would fail it
// (MaxAttempts 1).
var adaptiveJob = bq.Define("c.adaptive", behave, bq.JobOptions[Args]{
	MaxAttempts: 1,
	Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: adaptiveTo, Adaptive: &bq.Adaptive{Min: adaptiveMin}}})

// callDownstream is one call to a fake downstream shared by every
// process: a file holding the calls in flight, changed under flock. Above
// a.N at once it answers 429 at once: bq.Throttled, retry after
// a.SleepMS; else the call takes a.SleepMS.
func callDownstream(ctx context.Context, a Args) error {
	n, err := downstreamAdd(a.Downstream, +1)
	if err != nil {
		return err
	}
	defer func() { _, _ = downstreamAdd(a.Downstream, -1) }()
	if n > a.N {
		return bq.Throttled(fmt.Errorf("429 Too Many Requests: %d calls in flight, %d allowed", n, a.N), time.Duration(a.SleepMS)*time.Millisecond)
	}
	select {
	case <-time.After(time.Duration(a.SleepMS) * time.Millisecond):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// downstreamAdd adds delta to the count in file, under an exclusive
// flock, and returns the new count.
func downstreamAdd(file string, delta int) (n int, err error) {
	err = withDownstream(file, func(state string) string {
		n, _ = strconv.Atoi(strings.TrimSpace(state))
		n += delta
		return strconv.Itoa(n)
	})
	return n, err
}

// withDownstream rewrites the state of the fake downstream in file with
// change, under an exclusive flock: every process's calls see one state.
func withDownstream(file string, change func(state string) string) error {
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open downstream: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock downstream: %w", err)
	}
	defer func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }()
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("read downstream: %w", err)
	}
	next := change(string(b))
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("write downstream: %w", err)
	}
	if _, err := f.WriteAt([]byte(next), 0); err != nil {
		return fmt.Errorf("write downstream: %w", err)
	}
	return nil
}

// testAdaptiveLimitSettles: a fake downstream answers 429 (bq.Throttled)
// above N=5 calls at once; 3 worker processes x 6 slots drain one
// adaptive key (To 12, Min 2). From the runs' own start and end records,
// sampled over the second half of the drain (up to the completion that
// left 2N jobs to do: not its tail), the runs in progress settle
// within [0.7N, N] on average and at most a third of that half's runs are
// throttled; every job completes with MaxAttempts 1 (a throttle spends no
// attempt); the key's limit, read while it runs, stays within [Min, To],
// does fall below To, and shows in KeyState.Adaptive and
// Health.AdaptedKeys; no semaphore drifts (free = limit - holders, and
// Verify).
func testAdaptiveLimitSettles(t *testing.T, h *harness) {
	ctx := context.Background()
	const n, jobs, callMS = 5, 120, 800
	file := filepath.Join(t.TempDir(), "downstream")
	key := "down"
	full := bq.Key("c.adaptive", key)
	var ids []int64
	for i := range jobs {
		res, err := adaptiveJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: key, Seq: i, SleepMS: callMS, Mode: "downstream", N: n, Downstream: file})
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		ids = append(ids, res.ID)
	}
	stop := h.spawnWorkers(3, 6)
	lowest, highest := adaptiveTo, 0
	inView := false // seen lowered in KeyState and Health
	type reading struct {
		at    time.Time
		limit int
	}
	var limits []reading
	var read time.Time
	h.eventually(180*time.Second, fmt.Sprintf("%d jobs to finish", jobs), func() bool {
		if time.Since(read) < 100*time.Millisecond {
			return false // the test's own reads stay light beside the fleet's
		}
		read = time.Now()
		if k, err := h.client.KeyState(ctx, full); err == nil && k.Exists {
			lowest, highest = min(lowest, k.Limit), max(highest, k.Limit)
			limits = append(limits, reading{time.Now(), k.Limit})
			if a := k.Adaptive; a != nil && !inView {
				if a.Min != adaptiveMin || a.Limit < adaptiveMin || a.Limit >= adaptiveTo {
					t.Errorf("KeyState.Adaptive = %+v, want a limit in [%d, %d) of min %d", a, adaptiveMin, adaptiveTo, adaptiveMin)
				}
				hl, err := h.client.Health(ctx, bq.HealthOptions{})
				if err != nil {
					t.Fatalf("Health: %v", err)
				}
				inView = slices.ContainsFunc(hl.AdaptedKeys, func(k bq.AdaptedKey) bool { return k.Key == full })
			}
		}
		return h.count(`SELECT count(*) FROM bq_jobs WHERE finished_at IS NOT NULL`) == jobs
	})
	if !inView {
		t.Errorf("the key's lowered limit never showed in both KeyState.Adaptive and Health.AdaptedKeys")
	}
	stop()
	for _, id := range ids {
		if st := h.state(id); st != bq.StateCompleted {
			t.Errorf("job %d is %s, want completed: with MaxAttempts 1 a throttle must spend no attempt", id, st)
		}
	}
	if lowest < adaptiveMin || highest > adaptiveTo {
		t.Errorf("the key's limit went from %d to %d, want within [Min %d, To %d]", lowest, highest, adaptiveMin, adaptiveTo)
	}
	if lowest >= adaptiveTo {
		t.Errorf("the key's limit never fell below To %d: throttles did not adapt it", adaptiveTo)
	}

	rows, err := h.raw.QueryContext(ctx, `SELECT started_ns, ended_ns, outcome FROM test_runs WHERE kind = 'c.adaptive'`)
	if err != nil {
		t.Fatalf("read runs: %v", err)
	}
	defer rows.Close()
	var runs []run
	var throttles, done []time.Time
	for rows.Next() {
		var start, end int64
		var outcome string
		if err := rows.Scan(&start, &end, &outcome); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run{Start: time.Unix(0, start), End: time.Unix(0, end)})
		switch {
		case strings.Contains(outcome, "429"):
			throttles = append(throttles, time.Unix(0, start))
		case outcome == "ok":
			done = append(done, time.Unix(0, end))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(throttles) == 0 {
		t.Errorf("no run was throttled: the downstream never pushed back, nothing was tested")
	}
	if len(done) != jobs {
		t.Fatalf("%d runs completed, want %d", len(done), jobs)
	}
	// The run is judged while the key had work for N: up to the
	// completion that left 2N jobs to do, not through the drain's tail.
	slices.SortFunc(done, time.Time.Compare)
	mean, peak, half, end := inFlight(runs, done[jobs-2*n-1])
	var limitSum, limitN int
	for _, r := range limits {
		if !r.at.Before(half) && r.at.Before(end) {
			limitSum, limitN = limitSum+r.limit, limitN+1
		}
	}
	t.Logf("second half: the key's limit read %d times, %.2f on average", limitN, float64(limitSum)/float64(max(limitN, 1)))
	late, lateThrottled := 0, 0
	for _, r := range runs {
		if !r.Start.Before(half) && r.Start.Before(end) {
			late++
		}
	}
	for _, at := range throttles {
		if !at.Before(half) && at.Before(end) {
			lateThrottled++
		}
	}
	t.Logf("%d runs, %d throttled (%d of %d in the second half); the limit ranged %d..%d; second half (%s): %.2f running on average (N=%d), %d at most",
		len(runs), len(throttles), lateThrottled, late, lowest, highest, end.Sub(half).Round(time.Millisecond), mean, n, peak)
	if mean < 0.7*n || mean > n {
		t.Errorf("second half: %.2f running on average, want within [%.1f, %d] (0.7N to N)", mean, 0.7*n, n)
	}
	// Settled, the key runs at about N: a throttle or two as it probes
	// N+1 after each raise (one in six runs), not a storm of them
	// (without the decrease, about half of the runs are throttled).
	if late == 0 || 3*lateThrottled > late {
		t.Errorf("second half: %d of %d runs throttled, want at most a third", lateThrottled, late)
	}
	h.checkSemaphores()
}

// inFlight samples the runs in progress every 10 ms over the second
// half of the span from their first start to last and returns the mean,
// the most and where the half begins and ends.
func inFlight(runs []run, last time.Time) (mean float64, peak int, half, end time.Time) {
	first := last
	for _, r := range runs {
		first = minTime(first, r.Start)
	}
	var samples []int
	half = first.Add(last.Sub(first) / 2)
	for at := half; at.Before(last); at = at.Add(10 * time.Millisecond) {
		c := 0
		for _, r := range runs {
			if !r.Start.After(at) && r.End.After(at) {
				c++
			}
		}
		samples = append(samples, c)
	}
	mean, peak = meanMax(samples)
	return mean, peak, half, last
}

// meanMax is the mean and the most of samples, 0 and 0 for none.
func meanMax(samples []int) (float64, int) {
	if len(samples) == 0 {
		return 0, 0
	}
	sum := 0
	for _, c := range samples {
		sum += c
	}
	return float64(sum) / float64(len(samples)), slices.Max(samples)
}

// testAdaptiveBadInput: bounds no limit can keep, and a negative
// retryAfter, are refused before any database sees them, each with an
// error naming the problem and the fix.
func testAdaptiveBadInput(t *testing.T, h *harness) {
	for _, c := range []struct {
		name string
		spec bq.Concurrency[Args]
		more []bq.Concurrency[Args]
		want []string
	}{
		{"zero min", bq.Concurrency[Args]{Key: keyOf, To: 3, Adaptive: &bq.Adaptive{}}, nil, []string{"Adaptive.Min is 0", "1 or more"}},
		{"negative min", bq.Concurrency[Args]{Key: keyOf, To: 3, Adaptive: &bq.Adaptive{Min: -2}}, nil, []string{"Adaptive.Min is -2", "1 or more"}},
		{"min above max", bq.Concurrency[Args]{Key: keyOf, To: 3, Adaptive: &bq.Adaptive{Min: 5}}, nil, []string{"Min 5 is above Concurrency.To 3", "lower Min or raise To"}},
		{"negative max", bq.Concurrency[Args]{Key: keyOf, To: -1, Adaptive: &bq.Adaptive{Min: 1}}, nil, []string{"To"}},
		{"on a further key", bq.Concurrency[Args]{Key: keyOf, To: 3},
			[]bq.Concurrency[Args]{{Key: func(Args) string { return "x" }, Group: "other", To: 2, Adaptive: &bq.Adaptive{Min: 1}}},
			[]string{"MoreConcurrency[0].Adaptive", "move Adaptive to Concurrency"}},
	} {
		spec := c.spec
		refusedAtDefine(t, h, c.name, bq.Define(fmt.Sprintf("c.adaptive.bad.%s.%s", h.test, strings.ReplaceAll(c.name, " ", "-")), behave,
			bq.JobOptions[Args]{Concurrency: &spec, MoreConcurrency: c.more}), c.want)
	}
	err := bq.Throttled(errors.New("429"), -time.Second)
	if !errors.Is(err, bq.ErrInvalidArgument) || !strings.Contains(err.Error(), "retryAfter is -1s") || !strings.Contains(err.Error(), "Retry-After") {
		t.Errorf("Throttled with a negative retryAfter: %v, want bq.ErrInvalidArgument naming it and the fix", err)
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs`); n != 0 {
		t.Errorf("%d jobs stored from refused definitions", n)
	}
}

// refusedAtDefine fails unless definition j was refused (bq.ErrInvalidJob)
// saying each of want, and its enqueue is refused too.
func refusedAtDefine(t *testing.T, h *harness, what string, j *bq.Job[Args], want []string) {
	t.Helper()
	if !invalidSaying(t, what+": Define", j.Err(), want) {
		return
	}
	if _, err := j.Enqueue(context.Background(), h.client, Args{Test: h.test, Key: "k"}); !errors.Is(err, bq.ErrInvalidJob) {
		t.Errorf("%s: Enqueue: %v, want bq.ErrInvalidJob", what, err)
	}
}

// invalidSaying reports whether err is bq.ErrInvalidJob, failing t
// unless it is and says each of want.
func invalidSaying(t *testing.T, what string, err error, want []string) bool {
	t.Helper()
	if !errors.Is(err, bq.ErrInvalidJob) {
		t.Errorf("%s: %v, want bq.ErrInvalidJob", what, err)
		return false
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not say %q", what, err, w)
		}
	}
	return true
}

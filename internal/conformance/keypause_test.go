package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"KeyPauseStopsItsJobsInEveryProcess", testKeyPause},
	scenario{"KeyPauseBadInput", testKeyPauseBadInput},
)

// keyPauseSlack is how long after PauseKey returns a run of the key may
// still start: one claim that was in flight as the pause committed
// (begun before, it did not see it), as a queue's pause allows.
const keyPauseSlack = 50 * time.Millisecond

// testKeyPause: two worker processes (4 slots each, 10 s polls) run the
// jobs of keys k and l (20 each, limit 2, 150 ms each) while a third client pauses
// k: no job of k starts after PauseKey returns (but for a claim in flight
// as it committed), l's go on, k's jobs keep their states (its ready
// jobs their slots); Explain says why; ResumeKey wakes the workers, whose
// poll alone would take 10 s, and every job runs once, k never more than
// 2 at once.
func testKeyPause(t *testing.T, h *harness) {
	ctx := context.Background()
	w1 := h.spawn("workers", 4, "BQ_POLL=10s")
	w2 := h.spawn("workers", 4, "BQ_POLL=10s")
	defer h.stop(w1, w2)
	h.eventually(20*time.Second, "the workers to register", func() bool {
		return h.count(`SELECT count(*) FROM bq_processes`) == 2
	})
	k := bq.Key(limit2Job.Name(), "k") // runs record the key as enqueued: "k", "l"
	// One EnqueueMany, and the pause once k's first run has started: a
	// loaded machine that enqueued one job at a time ran all of k's jobs
	// before the pause (CI, SQLite).
	const perKey = 20
	var args []Args
	for i := range perKey {
		args = append(args, Args{Key: "k", Seq: i, SleepMS: 150}, Args{Key: "l", Seq: 100 + i, SleepMS: 150})
	}
	res, err := limit2Job.EnqueueMany(ctx, h.client, args)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, r := range res {
		ids = append(ids, r.ID)
	}
	h.eventually(20*time.Second, "a run of k to start", func() bool {
		return h.count(`SELECT count(*) FROM test_runs WHERE jkey = 'k'`) > 0
	})
	time.Sleep(200 * time.Millisecond) // k runs: two at a time
	if err := h.client.PauseKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	time.Sleep(1200 * time.Millisecond)
	var kLate, lAfter, kBefore int
	for _, r := range h.dbRuns(t) {
		switch {
		case r.Key == "k" && r.Start.After(paused.Add(keyPauseSlack)):
			kLate++
		case r.Key == "k":
			kBefore++
		case r.Key == "l" && r.Start.After(paused):
			lAfter++
		}
	}
	if kLate > 0 {
		t.Errorf("%d runs of key k started more than %s after PauseKey returned", kLate, keyPauseSlack)
	}
	if kBefore == 0 || kBefore >= perKey {
		t.Fatalf("%d runs of k before the pause, want some and not all (the scenario's timing)", kBefore)
	}
	if lAfter == 0 {
		t.Error("no run of key l started while k was paused: the pause held up another key")
	}
	if got, err := h.client.PausedKeys(ctx); err != nil || len(got) != 1 || got[0].Key != k {
		t.Errorf("PausedKeys = %+v, %v; want k", got, err)
	}
	// k's jobs wait as they were: ready ones holding their slots, the rest
	// blocked in line.
	page, err := h.client.ListJobs(ctx, bq.JobFilter{Key: k, States: []bq.JobState{bq.StateReady}})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) == 0 || len(page.Jobs) > 2 {
		t.Fatalf("%d ready jobs of k while paused, want its free slots' worth (1 or 2)", len(page.Jobs))
	}
	e, err := h.client.Explain(ctx, page.Jobs[0].ID)
	if err != nil || !strings.Contains(e.Summary, "is paused since") {
		t.Errorf("Explain of k's ready job: %v, %v; want it to say its key is paused", e, err)
	}
	h.checkSemaphores()

	resumed := time.Now()
	if err := h.client.ResumeKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		h.waitState(id, bq.StateCompleted)
	}
	var first time.Time
	for _, r := range h.dbRuns(t) {
		if r.Key == "k" && r.Start.After(resumed) && (first.IsZero() || r.Start.Before(first)) {
			first = r.Start
		}
	}
	if took := first.Sub(resumed); first.IsZero() || took > 3*time.Second {
		t.Errorf("k's first job after the resume started %s after it: want the workers woken at once (their poll is 10 s)", took)
	}
	if n := len(h.dbRuns(t)); n != len(ids) {
		t.Errorf("%d runs for %d jobs: want each once", n, len(ids))
	}
	if n := maxOverlap(h.dbRuns(t))["k"]; n > 2 {
		t.Errorf("key k (limit 2) ran %d jobs at once", n)
	}
	h.checkSemaphores()
	t.Logf("k: %d runs before the pause, none after; l: %d runs while k was paused; k's first run %s after the resume",
		kBefore, lAfter, first.Sub(resumed).Round(time.Millisecond))
}

// testKeyPauseBadInput: a key with no group, or empty, is refused with
// ErrInvalidArgument naming the fix; pausing twice and resuming a key
// that is not paused change nothing.
func testKeyPauseBadInput(t *testing.T, h *harness) {
	ctx := context.Background()
	for _, key := range []string{"", "nogroup"} {
		for name, op := range map[string]func(context.Context, string) error{"PauseKey": h.client.PauseKey, "ResumeKey": h.client.ResumeKey} {
			if err := op(ctx, key); !errors.Is(err, bq.ErrInvalidArgument) || !strings.Contains(err.Error(), name) {
				t.Errorf("%s(%q) = %v, want ErrInvalidArgument naming %s", name, key, err, name)
			}
		}
	}
	k := bq.Key("g", "x")
	for range 2 {
		if err := h.client.PauseKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := h.client.ResumeKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := h.client.PausedKeys(ctx); err != nil || len(got) != 0 {
		t.Errorf("PausedKeys after pause, pause, resume, resume = %+v, %v; want none", got, err)
	}
}

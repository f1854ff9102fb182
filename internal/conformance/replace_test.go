package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"ReplaceLeavesOneQueued", testReplaceRace},
	scenario{"ReplaceSparesTheRunningHolder", testReplaceRunning},
	scenario{"ReplaceRefusesBadInput", testReplaceRefusesBadInput},
	scenario{"CancelRunningStopsTheHolder", testCancelRunning},
	scenario{"DebounceRunsOncePerQuietPeriod", testDebounce},
)

// replaceJob keeps one job of a key queued: each new one replaces it.
// cancelRunningJob also stops the key's running one.
var (
	replaceJob = bq.Define("c.replace", behave, bq.JobOptions[Args]{Queue: "replace",
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 1, OnConflict: bq.Replace}})
	cancelRunningJob = bq.Define("c.cancelrunning", behave, bq.JobOptions[Args]{Queue: "replace",
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 1, OnConflict: bq.CancelRunning, Group: "c.replace"}})
	debounceJob = bq.Define("c.debounce", behave, bq.JobOptions[Args]{Queue: "replace",
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 1, Debounce: debounceWait}})
)

// debounceWait is long beside the burst's 40 ms gaps, so a loaded machine
// stalling an enqueue does not end the quiet period.
const debounceWait = 2 * time.Second

// testReplaceRace: three clients (three connection pools) enqueue 20
// replacing jobs each on one key at once, with no worker. Exactly one job
// of the key is left queued; every other was cancelled, and named as
// replaced by exactly one enqueue's result.
func testReplaceRace(t *testing.T, h *harness) {
	ctx := context.Background()
	var mu sync.Mutex
	var stored []int64
	replacedBy := map[int64]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for p := range 3 {
		c := h.clientWith(testConfig())
		wg.Go(func() {
			for i := range 20 {
				res, err := replaceJob.Enqueue(ctx, c, Args{Test: h.test, Key: "r", Seq: p*100 + i})
				if errors.Is(err, bq.ErrConflict) {
					continue // a deadlock the database broke: nothing stored, retried by the caller
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				stored = append(stored, res.ID)
				for _, id := range res.Replaced {
					replacedBy[id]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("enqueue: %v", err)
	}
	var queued []int64
	for _, id := range stored {
		switch st := h.state(id); st {
		case bq.StateReady, bq.StateBlocked:
			queued = append(queued, id)
		case bq.StateCancelled:
			if replacedBy[id] != 1 {
				t.Errorf("job %d was cancelled and named replaced by %d results, want 1", id, replacedBy[id])
			}
		default:
			t.Errorf("job %d is %s, want queued or cancelled", id, st)
		}
	}
	for id, n := range replacedBy {
		if !slices.Contains(stored, id) || n != 1 {
			t.Errorf("job %d named replaced %d times (stored: %v)", id, n, slices.Contains(stored, id))
		}
	}
	if len(queued) != 1 {
		t.Fatalf("%d jobs of the key left queued (%v) after %d replacing enqueues, want exactly 1", len(queued), queued, len(stored))
	}
	if last := slices.Max(stored); queued[0] != last {
		// Each enqueue replaces what the one before it left: the survivor
		// is the last to commit, which need not be the highest id.
		t.Logf("the survivor is job %d; the highest id stored is %d", queued[0], last)
	}
	t.Logf("%d replacing enqueues from 3 clients, %d replaced, job %d left queued", len(stored), len(replacedBy), queued[0])
	h.checkSemaphores()
}

// testReplaceRunning: a replacing job never touches the key's running
// holder. J1 runs (1.5 s); J2 waits blocked; J3 replaces J2 (not J1) and
// runs once J1 is done, never beside it.
func testReplaceRunning(t *testing.T, h *harness) {
	ctx := context.Background()
	cmd := h.spawn("worker", 2, "BQ_QUEUE=replace")
	defer h.stop(cmd)
	j1, err := replaceJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "k", SleepMS: 1500})
	if err != nil {
		t.Fatal(err)
	}
	h.waitState(j1.ID, bq.StateRunning)
	j2, err := replaceJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "k", SleepMS: 10})
	if err != nil {
		t.Fatal(err)
	}
	if j2.State != bq.StateBlocked || len(j2.Replaced) != 0 {
		t.Fatalf("J2: %s, replaced %v; want blocked behind the running J1, replacing nothing", j2.State, j2.Replaced)
	}
	j3, err := replaceJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "k", SleepMS: 10})
	if err != nil {
		t.Fatal(err)
	}
	if j3.State != bq.StateBlocked || !slices.Equal(j3.Replaced, []int64{j2.ID}) {
		t.Fatalf("J3: %s, replaced %v; want blocked, replacing J2 (%d)", j3.State, j3.Replaced, j2.ID)
	}
	h.eventually(30*time.Second, "J1 and J3 to complete", func() bool {
		return h.state(j1.ID) == bq.StateCompleted && h.state(j3.ID) == bq.StateCompleted
	})
	if st := h.state(j2.ID); st != bq.StateCancelled {
		t.Errorf("J2 is %s, want cancelled (replaced)", st)
	}
	if e, err := h.client.Explain(ctx, j2.ID); err != nil || !strings.Contains(e.Summary, `replaced by a newer job of key "c.replace/k"`) {
		t.Errorf("Explain(J2) = %+v, %v; want it to say J2 was replaced", e, err)
	}
	runs := h.dbRuns(t)
	if len(runs) != 2 {
		t.Errorf("%d runs, want 2 (J1 and J3; J2 never ran)", len(runs))
	}
	if n := maxOverlap(runs)["k"]; n > 1 {
		t.Errorf("%d runs of the key overlapped, limit 1", n)
	}
	h.checkSemaphores()
}

// testReplaceRefusesBadInput: Replace on a job of several keys, with
// In, or twice on one key in one enqueue is refused, and nothing is
// stored.
func testReplaceRefusesBadInput(t *testing.T, h *harness) {
	ctx := context.Background()
	multi := bq.Define("c.replace.multi."+h.test, behave, bq.JobOptions[Args]{Queue: "replace",
		Concurrency:     &bq.Concurrency[Args]{Key: keyOf, OnConflict: bq.Replace},
		MoreConcurrency: []bq.Concurrency[Args]{{Key: keyOf, Group: "other"}}})
	if err := multi.Err(); err == nil || !errors.Is(err, bq.ErrInvalidJob) {
		t.Errorf("Define with Replace and MoreConcurrency: %v, want ErrInvalidJob", err)
	}
	negative := bq.Define("c.debounce.negative."+h.test, behave, bq.JobOptions[Args]{Queue: "replace",
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, Debounce: -time.Second}})
	if err := negative.Err(); err == nil || !strings.Contains(err.Error(), "Concurrency.Debounce is -1s") {
		t.Errorf("Define with a negative Debounce: %v, want it refused naming the field", err)
	}
	for name, enqueue := range map[string]func() error{
		"with In": func() error {
			_, err := replaceJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "x"}, bq.In(time.Minute))
			return err
		},
		"twice in one EnqueueMany": func() error {
			_, err := replaceJob.EnqueueMany(ctx, h.client, []Args{{Test: h.test, Key: "x"}, {Test: h.test, Key: "x"}})
			return err
		},
		"with a further key": func() error {
			_, err := replaceJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "x"}, bq.WithMoreConcurrencyKeys(bq.KeyLimit{Key: "other/x", To: 1}))
			return err
		},
		"(Debounce) with In": func() error {
			_, err := debounceJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "x"}, bq.In(time.Minute))
			return err
		},
		"(Debounce) with a further key": func() error {
			_, err := debounceJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "x"}, bq.WithMoreConcurrencyKeys(bq.KeyLimit{Key: "other/x", To: 1}))
			return err
		},
	} {
		if err := enqueue(); !errors.Is(err, bq.ErrInvalidJob) {
			t.Errorf("Replace %s: %v, want ErrInvalidJob", name, err)
		} else {
			t.Logf("Replace %s: %v", name, fmt.Sprint(err))
		}
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs`); n != 0 {
		t.Errorf("%d jobs stored by refused enqueues, want 0", n)
	}
}

// testCancelRunning: J1 runs (it would wait 15 s on its context); J2 is
// blocked behind it; J3 with CancelRunning replaces J2 and asks J1 to
// stop: J1's run sees its context cancelled and ends cancelled, then J3
// runs, never beside it, long before J1's 15 s.
func testCancelRunning(t *testing.T, h *harness) {
	ctx := context.Background()
	cmd := h.spawn("worker", 2, "BQ_QUEUE=replace")
	defer h.stop(cmd)
	j1, err := cancelRunningJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "k", Mode: "wait-ctx", SleepMS: 15000})
	if err != nil {
		t.Fatal(err)
	}
	h.waitState(j1.ID, bq.StateRunning)
	j2, err := replaceJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "k", SleepMS: 10})
	if err != nil {
		t.Fatal(err)
	}
	if j2.State != bq.StateBlocked {
		t.Fatalf("J2 is %s, want blocked behind the running J1 (one key: both kinds' Group is c.replace)", j2.State)
	}
	start := time.Now()
	j3, err := cancelRunningJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "k", SleepMS: 10})
	if err != nil {
		t.Fatal(err)
	}
	if j3.State != bq.StateBlocked || !slices.Equal(j3.Stopping, []int64{j1.ID}) || !slices.Equal(j3.Replaced, []int64{j2.ID}) {
		t.Fatalf("J3: %s, stopping %v, replaced %v; want blocked, stopping J1 (%d), replacing J2 (%d)", j3.State, j3.Stopping, j3.Replaced, j1.ID, j2.ID)
	}
	h.eventually(10*time.Second, "J3 to complete", func() bool { return h.state(j3.ID) == bq.StateCompleted })
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("J3 completed %s after its enqueue: J1 was not stopped", took.Round(time.Millisecond))
	}
	if st := h.state(j1.ID); st != bq.StateCancelled {
		t.Errorf("J1 is %s, want cancelled (stopped for J3)", st)
	}
	if st := h.state(j2.ID); st != bq.StateCancelled {
		t.Errorf("J2 is %s, want cancelled (replaced by J3)", st)
	}
	runs := h.dbRuns(t)
	if n := maxOverlap(runs)["k"]; n > 1 {
		t.Errorf("%d runs of the key overlapped, limit 1", n)
	}
	h.checkSemaphores()
}

// testDebounce: three clients enqueue 8 debounced jobs each (Debounce
// 2 s) on one key, 40 ms apart, while a worker process runs the queue:
// exactly one of them runs, the one left scheduled (the others cancelled,
// each named replaced by exactly one result), and not before the key's
// quiet period after the last enqueue. A later enqueue, after the quiet
// period, runs once more.
func testDebounce(t *testing.T, h *harness) {
	ctx := context.Background()
	cmd := h.spawn("worker", 2, "BQ_QUEUE=replace")
	defer h.stop(cmd)
	var mu sync.Mutex
	var stored []int64
	replacedBy := map[int64]int{}
	var last time.Time
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for p := range 3 {
		c := h.clientWith(testConfig())
		wg.Go(func() {
			for i := range 8 {
				res, err := debounceJob.Enqueue(ctx, c, Args{Test: h.test, Key: "d", Seq: p*100 + i, SleepMS: 10})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				stored = append(stored, res.ID)
				for _, id := range res.Replaced {
					replacedBy[id]++
				}
				last = time.Now()
				mu.Unlock()
				time.Sleep(40 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("enqueue: %v", err)
	}
	h.eventually(20*time.Second, "the debounced job to run", func() bool { return len(h.dbRuns(t)) >= 1 })
	time.Sleep(debounceWait) // a second run would show by now
	runs := h.dbRuns(t)
	if len(runs) != 1 {
		t.Fatalf("%d runs after one burst of %d debounced enqueues, want 1", len(runs), len(stored))
	}
	if early := last.Add(debounceWait).Sub(runs[0].Start); early > 50*time.Millisecond {
		t.Errorf("the debounced job started %s before the key's quiet period ended", early.Round(time.Millisecond))
	}
	for _, id := range stored {
		st := h.state(id)
		switch {
		case id == runs[0].JobID:
			if st != bq.StateCompleted {
				t.Errorf("the job that ran, %d, is %s", id, st)
			}
		case st != bq.StateCancelled || replacedBy[id] != 1:
			t.Errorf("job %d is %s, named replaced by %d results; want cancelled, named once", id, st, replacedBy[id])
		}
	}
	res, err := debounceJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "d", Seq: 999, SleepMS: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Replaced) != 0 {
		t.Errorf("an enqueue after the quiet period replaced %v, want nothing (the last burst's job ran)", res.Replaced)
	}
	h.waitState(res.ID, bq.StateCompleted)
	if n := len(h.dbRuns(t)); n != 2 {
		t.Errorf("%d runs after a second quiet period, want 2", n)
	}
	t.Logf("%d debounced enqueues from 3 clients: job %d ran %s after the last enqueue", len(stored), runs[0].JobID, runs[0].Start.Sub(last).Round(time.Millisecond))
}

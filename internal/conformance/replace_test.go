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
	scenario{"DebounceMaxWaitBoundsABurst", testDebounceMaxWait},
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
	// debounceBoundJob runs a burst at most debounceMaxWait after its
	// first enqueue, with the first enqueue's args.
	debounceBoundJob = bq.Define("c.debounce.bound", behave, bq.JobOptions[Args]{Queue: "replace",
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 1, Debounce: time.Second, DebounceMaxWait: debounceMaxWait, DebounceFirst: true}})
)

const debounceMaxWait = 2 * time.Second

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
	for want, c := range map[string]*bq.Concurrency[Args]{
		"Concurrency.Debounce is -1s":                                   {Key: keyOf, Debounce: -time.Second},
		"Concurrency.DebounceMaxWait is 1s, below Debounce 2s":          {Key: keyOf, Debounce: 2 * time.Second, DebounceMaxWait: time.Second},
		"Concurrency.DebounceMaxWait or DebounceFirst without Debounce": {Key: keyOf, DebounceFirst: true},
	} {
		d := bq.Define("c.debounce.bad."+h.test, behave, bq.JobOptions[Args]{Queue: "replace", Concurrency: c})
		if err := d.Err(); !errors.Is(err, bq.ErrInvalidJob) || !strings.Contains(err.Error(), want) {
			t.Errorf("Define with %+v: %v, want ErrInvalidJob saying %q", *c, err, want)
		}
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
		"with no key": func() error {
			_, err := replaceJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: ""})
			return err
		},
		"(Debounce) with no key": func() error {
			_, err := debounceJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: ""})
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
// 2 s) on one key, 40 ms apart, while a worker process runs the queue,
// then one enqueue more once they are done: every enqueue but the first
// joins the first's job (Debounced, its ID), nothing else is stored, and
// that one job runs once, with the last enqueue's args, not before the
// key's quiet period after the last enqueue. A later enqueue, after the
// quiet period, runs once more.
func testDebounce(t *testing.T, h *harness) {
	ctx := context.Background()
	cmd := h.spawn("worker", 2, "BQ_QUEUE=replace")
	defer h.stop(cmd)
	var mu sync.Mutex
	ids := map[int64]int{}
	debounced := 0
	var last time.Time
	// last is when the last enqueue began: the enqueue's own instant,
	// which its quiet period runs from, lies between its call and its
	// return (on a loaded machine, 100 ms and more apart), so a start
	// before last + debounceWait is early for certain.
	enqueue := func(c *bq.Client, seq int) error {
		began := time.Now()
		res, err := debounceJob.Enqueue(ctx, c, Args{Test: h.test, Key: "d", Seq: seq, SleepMS: 10})
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		ids[res.ID]++
		if res.Debounced {
			debounced++
			if res.State != bq.StateScheduled {
				t.Errorf("a debounced enqueue's result says %s, want scheduled", res.State)
			}
		}
		if began.After(last) {
			last = began
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for p := range 3 {
		c := h.clientWith(testConfig())
		wg.Go(func() {
			for i := range 8 {
				if err := enqueue(c, p*100+i); err != nil {
					errs <- err
					return
				}
				time.Sleep(40 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("enqueue: %v", err)
	}
	if err := enqueue(h.client, 777); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || debounced != 24 {
		t.Fatalf("25 debounced enqueues in one burst named jobs %v, %d of them debounced; want one job, 24 debounced into it", ids, debounced)
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs`); n != 1 {
		t.Errorf("%d jobs stored by one burst, want 1", n)
	}
	h.eventually(20*time.Second, "the debounced job to run", func() bool { return len(h.dbRuns(t)) >= 1 })
	time.Sleep(debounceWait) // a second run would show by now
	runs := h.dbRuns(t)
	if len(runs) != 1 {
		t.Fatalf("%d runs after one burst of 25 debounced enqueues, want 1", len(runs))
	}
	if _, ok := ids[runs[0].JobID]; !ok {
		t.Errorf("job %d ran, want the burst's job %v", runs[0].JobID, ids)
	}
	if early := last.Add(debounceWait).Sub(runs[0].Start); early > 50*time.Millisecond {
		t.Errorf("the debounced job started %s before the key's quiet period ended", early.Round(time.Millisecond))
	}
	if seq := h.argsOf(runs[0].JobID).Seq; seq != 777 {
		t.Errorf("the burst's job ran with the args of enqueue %d, want the last's (777)", seq)
	}
	res, err := debounceJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "d", Seq: 999, SleepMS: 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.Debounced || ids[res.ID] != 0 {
		t.Errorf("an enqueue after the quiet period joined job %d, want a job of its own (the last burst's job ran)", res.ID)
	}
	h.waitState(res.ID, bq.StateCompleted)
	if n := len(h.dbRuns(t)); n != 2 {
		t.Errorf("%d runs after a second quiet period, want 2", n)
	}
	// Three debounced jobs of one key in one EnqueueMany fold into one,
	// as three enqueues would: the last stored, the others joining it.
	many, err := debounceJob.EnqueueMany(ctx, h.client, []Args{
		{Test: h.test, Key: "e", Seq: 1, SleepMS: 10}, {Test: h.test, Key: "e", Seq: 2, SleepMS: 10}, {Test: h.test, Key: "e", Seq: 3, SleepMS: 10}})
	if err != nil {
		t.Fatalf("EnqueueMany of three debounced jobs of one key: %v", err)
	}
	if many[0].ID != many[2].ID || many[1].ID != many[2].ID || !many[0].Debounced || !many[1].Debounced || many[2].Debounced {
		t.Fatalf("EnqueueMany of three debounced jobs of one key = %+v, want one job, the first two Debounced into the last", many)
	}
	h.waitState(many[2].ID, bq.StateCompleted)
	if seq := h.argsOf(many[2].ID).Seq; seq != 3 {
		t.Errorf("the folded job ran with the args of item %d, want the last's (3)", seq)
	}
	if n := len(h.dbRuns(t)); n != 3 {
		t.Errorf("%d runs after the EnqueueMany's quiet period, want 3", n)
	}
	t.Logf("25 debounced enqueues from 3 clients into job %d: it ran %s after the last enqueue", runs[0].JobID, runs[0].Start.Sub(last).Round(time.Millisecond))
}

// testDebounceMaxWait: a client enqueues a debounced job (Debounce 1 s,
// DebounceMaxWait 2 s, DebounceFirst) every 150 ms for 3 s, so the key
// never goes quiet for its Debounce: the burst's job comes due 2 s after
// its first enqueue, not 1 s after the last, and runs with the first
// enqueue's args; the enqueues after it start a burst of their own, and
// every enqueue's job runs once.
func testDebounceMaxWait(t *testing.T, h *harness) {
	ctx := context.Background()
	cmd := h.spawn("worker", 2, "BQ_QUEUE=replace")
	defer h.stop(cmd)
	ids := map[int64]bool{}
	var first, last time.Time
	for i := range 20 {
		// The first enqueue's instant, which its bound runs from, lies
		// between its call and its return: the call's start bounds an
		// early start for certain.
		began := time.Now()
		res, err := debounceBoundJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "m", Seq: i, SleepMS: 10})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = began
			e, err := h.client.Explain(ctx, res.ID)
			if err != nil || !strings.Contains(e.Summary, "Debounced: each enqueue of its kind on its key joins it and moves it to 1s after that enqueue, but no later than") {
				t.Errorf("Explain of a waiting debounced job: %v, %v; want it to say what moves it and its bound", e, err)
			} else {
				t.Logf("Explain: %s", e.Summary)
			}
		}
		ids[res.ID] = true
		last = time.Now()
		time.Sleep(150 * time.Millisecond)
	}
	h.eventually(20*time.Second, "every burst's job to complete", func() bool {
		for id := range ids {
			if h.state(id) != bq.StateCompleted {
				return false
			}
		}
		return true
	})
	runs := h.dbRuns(t)
	slices.SortFunc(runs, func(a, b run) int { return a.Start.Compare(b.Start) })
	// Each burst takes the enqueues of one DebounceMaxWait, so the
	// enqueues' span makes that many jobs, and one more where a burst's
	// job came due while the next enqueue was under way: 2 or 3 for the
	// nominal 3 s, more when a loaded machine stretched the enqueues
	// (one CI run stored 4). One job would mean no bound; one per
	// enqueue, no folding.
	span := last.Sub(first)
	most := int((span+debounceMaxWait-1)/debounceMaxWait) + 1
	if len(runs) != len(ids) || len(runs) < 2 || len(runs) > most {
		t.Fatalf("%d runs for %d jobs stored over %s of enqueues every 150 ms, want one per job and 2 to %d jobs",
			len(runs), len(ids), span.Round(time.Millisecond), most)
	}
	if at := runs[0].Start.Sub(first); at < debounceMaxWait-50*time.Millisecond || at > debounceMaxWait+900*time.Millisecond {
		t.Errorf("the first burst's job started %s after its first enqueue, want its DebounceMaxWait (%s): the key never went quiet", at.Round(time.Millisecond), debounceMaxWait)
	}
	if seq := h.argsOf(runs[0].JobID).Seq; seq != 0 {
		t.Errorf("the first burst's job ran with the args of enqueue %d, want the first's (DebounceFirst)", seq)
	}
	t.Logf("%d jobs for 20 enqueues; the first burst's ran %s after its first enqueue", len(runs), runs[0].Start.Sub(first).Round(time.Millisecond))
}

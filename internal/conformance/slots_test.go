package conformance

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

// Jobs that take several slots of their keys (docs/concurrency.md, "Jobs
// that take several slots"). Args.Key lists the job's keys as in
// multikey_test.go; the slots each job took are known from its enqueue.
var _ = register(
	scenario{"SlotsHoldTheKeyLimit", testSlotsHoldTheKeyLimit},
	scenario{"SlotsHoldEveryKeyLimit", testSlotsHoldEveryKeyLimit},
	scenario{"SlotsNoBargingPastAHeavyHead", testSlotsNoBarging},
	scenario{"SlotsBadInputRefused", testSlotsBadInputRefused},
)

// slJob takes its keys at enqueue, all in group "sl", as mkJob does.
var slJob = bq.Define("c.sl", behave, bq.JobOptions[Args]{Backoff: mkNoBack,
	Concurrency: &bq.Concurrency[Args]{Key: part(""), Group: "sl"}})

// slEnqueued is one job enqueued by a slots scenario.
type slEnqueued struct {
	id             int64
	slots, prio    int
	keys           string
	enqueuedBefore int // its place in enqueue order
}

// slEnqueue enqueues n jobs of the keys named (limits[key] each), each
// of a random number of slots out of sizes and priority 0 or, one time
// in four, 5, sleeping 20-50 ms, from seq on.
func slEnqueue(t *testing.T, h *harness, keys []string, limits map[string]int, sizes []int, seq, n int) []slEnqueued {
	t.Helper()
	var out []slEnqueued
	for i := seq; i < seq+n; i++ {
		k := sizes[rand.IntN(len(sizes))]
		prio := 0
		if rand.IntN(4) == 0 {
			prio = 5
		}
		opts := []bq.EnqueueOption{bq.WithConcurrencyKey(keys[0], limits[keys[0]]), bq.Slots(k), bq.Priority(prio)}
		var more []bq.KeyLimit
		for _, m := range keys[1:] {
			more = append(more, bq.KeyLimit{Key: bq.Key("sl", m), To: limits[m]})
		}
		if len(more) > 0 {
			opts = append(opts, bq.WithMoreConcurrencyKeys(more...))
		}
		key := strings.Join(keys, ",")
		res := enqueue(t, h, slJob, Args{Key: key, Seq: i, SleepMS: 20 + rand.IntN(31)}, opts...)
		out = append(out, slEnqueued{id: res.ID, slots: k, prio: prio, keys: key, enqueuedBefore: i})
	}
	return out
}

// slWeighted repeats each run once per slot its job took, so maxOverlap
// counts slots in use rather than runs.
func slWeighted(runs []run, jobs []slEnqueued) []run {
	slots := map[int64]int{}
	for _, j := range jobs {
		slots[j.id] = j.slots
	}
	var out []run
	for _, r := range runs {
		for range max(slots[r.JobID], 1) {
			out = append(out, r)
		}
	}
	return out
}

// slNoBarging fails for every job that started clearly before a job of
// one of its keys enqueued before it with a priority at least its own: a
// lighter job behind a heavy head waits for the head. Clearly: by more
// than the claims of two ready jobs may differ by (concurrent claims skip
// each other's rows, a MySQL claim retried after a deadlock waits its
// backoff: 300 ms seen on a loaded machine). A barging job starts a run's
// length (20-50 ms) or more before the head in most cases, not all, so
// SlotsNoBargingPastAHeavyHead pins the rule step by step.
func slNoBarging(t *testing.T, runs []run, jobs []slEnqueued) {
	t.Helper()
	const slack = 500 * time.Millisecond
	start := map[int64]time.Time{}
	for _, r := range runs {
		start[r.JobID] = r.Start
	}
	shares := func(a, b string) bool {
		for _, k := range strings.Split(a, ",") {
			if slices.Contains(strings.Split(b, ","), k) {
				return true
			}
		}
		return false
	}
	barged := 0
	for _, later := range jobs {
		for _, earlier := range jobs {
			if earlier.enqueuedBefore >= later.enqueuedBefore || earlier.prio < later.prio || !shares(earlier.keys, later.keys) {
				continue
			}
			if start[later.id].Add(slack).Before(start[earlier.id]) {
				if barged++; barged <= 5 {
					t.Errorf("job %d (%d slots, priority %d) started %s before job %d (%d slots, priority %d) enqueued before it",
						later.id, later.slots, later.prio, start[earlier.id].Sub(start[later.id]), earlier.id, earlier.slots, earlier.prio)
				}
			}
		}
	}
}

// testSlotsHoldTheKeyLimit: one key of limit 4 and 60 jobs of 1, 2 and 3
// slots (random sizes, one in four at a higher priority), half enqueued
// before three worker processes start and half while they run, each
// running 20-50 ms. From the runs' own records: the slots of the runs in
// progress never add up above 4, yet reach 3 or more; every job ran once;
// none started before a job of its key enqueued earlier at a priority at
// least its own (no barging past a heavy head).
func testSlotsHoldTheKeyLimit(t *testing.T, h *harness) {
	limits := map[string]int{"K": 4}
	jobs := slEnqueue(t, h, []string{"K"}, limits, []int{1, 2, 3}, 0, 30)
	h.checkSemaphores()
	stop := h.spawnWorkers(3, 4)
	for i := 30; i < 60; i += 5 {
		jobs = append(jobs, slEnqueue(t, h, []string{"K"}, limits, []int{1, 2, 3}, i, 5)...)
		time.Sleep(40 * time.Millisecond)
	}
	h.waitFinished(len(jobs), 90*time.Second)
	stop()
	slCheck(t, h, jobs, limits, "K", 3)
	slNoBarging(t, h.dbRuns(t), jobs)
}

// testSlotsHoldEveryKeyLimit: as SlotsHoldTheKeyLimit, with jobs on keys
// A (limit 4) and B (limit 3) at once, some only on A: a job of 2 slots
// takes 2 of each of its keys or none. Start order is not checked: a job
// of A and B waits in one key's line at a time, so a job of A alone may
// rightly start before it.
func testSlotsHoldEveryKeyLimit(t *testing.T, h *harness) {
	limits := map[string]int{"A": 4, "B": 3}
	var jobs []slEnqueued
	stop := h.spawnWorkers(3, 4)
	for i := 0; i < 60; i += 6 {
		jobs = append(jobs, slEnqueue(t, h, []string{"A", "B"}, limits, []int{1, 2}, i, 4)...)
		jobs = append(jobs, slEnqueue(t, h, []string{"A"}, limits, []int{1, 2, 3}, i+4, 2)...)
		time.Sleep(30 * time.Millisecond)
	}
	h.waitFinished(len(jobs), 90*time.Second)
	stop()
	slCheck(t, h, jobs, limits, "A", 3)
}

// slCheck checks the runs of jobs: each once, the slots in use of every
// key within its limit, key busy reaching at least reach.
func slCheck(t *testing.T, h *harness, jobs []slEnqueued, limits map[string]int, busy string, reach int) {
	t.Helper()
	runs := h.dbRuns(t)
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.id
	}
	checkOnce(t, runs, ids)
	inUse := checkOverlap(t, slWeighted(runs, jobs), limits)
	if inUse[busy] < reach {
		t.Errorf("key %s had at most %d slots in use at once; want %d or more: the slots serialised the jobs", busy, inUse[busy], reach)
	}
	h.checkDrained(ids)
	t.Logf("%s: most slots in use at once per key %v", h.db, inUse)
}

// testSlotsBadInputRefused: each bad Slots is refused before anything is
// stored, with the same error on every database, naming the problem and
// the fix.
func testSlotsBadInputRefused(t *testing.T, h *harness) {
	ctx := context.Background()
	key := func(to int) bq.EnqueueOption { return bq.WithConcurrencyKey("K", to) }
	for _, c := range []struct {
		what  string
		job   *bq.Job[Args]
		opts  []bq.EnqueueOption
		parts []string
	}{
		{"negative", slJob, []bq.EnqueueOption{key(4), bq.Slots(-1)}, []string{"Slots is -1", "use 1 to 1000"}},
		{"above MaxSlots", slJob, []bq.EnqueueOption{key(4), bq.Slots(1001)}, []string{"Slots is 1001", "bq.MaxSlots"}},
		{"no concurrency key", unkeyedJob, []bq.EnqueueOption{bq.Slots(2)}, []string{"no concurrency key", "give the job a Concurrency key, or drop Slots"}},
		{"above the key's To", slJob, []bq.EnqueueOption{key(2), bq.Slots(3)}, []string{`"sl/K"`, "could never start", "raise To to at least 3 or lower Slots"}},
		{"above a further key's To", slJob, []bq.EnqueueOption{key(4), bq.WithMoreConcurrencyKeys(bq.KeyLimit{Key: bq.Key("sl", "B"), To: 1}), bq.Slots(2)},
			[]string{`"sl/B"`, "could never start"}},
		{"a sequence", seqSlotsJob, []bq.EnqueueOption{bq.Slots(2)}, []string{"Sequence", "drop Slots, or drop Sequence"}},
	} {
		_, err := c.job.Enqueue(ctx, h.client, Args{Test: h.test, Key: "K"}, c.opts...)
		if !errors.Is(err, bq.ErrInvalidJob) {
			t.Errorf("%s: %v, want ErrInvalidJob", c.what, err)
			continue
		}
		wantErr(t, err, c.parts...)
	}
	for _, c := range []struct {
		what string
		opts bq.JobOptions[Args]
		part string
	}{
		{"no key", bq.JobOptions[Args]{Slots: 2}, "no concurrency key"},
		{"above To", bq.JobOptions[Args]{Slots: 3, Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 2}}, "raise To to at least 3"},
		{"above Adaptive.Min", bq.JobOptions[Args]{Slots: 3, Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 4, Adaptive: &bq.Adaptive{Min: 2}}},
			"raise Min to at least 3 or lower Slots"},
	} {
		bad := bq.Define("c.sl.bad."+strings.ReplaceAll(c.what, " ", "-")+"."+h.test, behave, c.opts)
		if err := bad.Err(); !errors.Is(err, bq.ErrInvalidJob) || !strings.Contains(err.Error(), c.part) {
			t.Errorf("a definition with Slots %s: %v, want ErrInvalidJob saying %q", c.what, err, c.part)
		}
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs`); n != 0 {
		t.Errorf("%d jobs stored by refused enqueues", n)
	}
	if n := h.count(`SELECT count(*) FROM bq_semaphores`); n != 0 {
		t.Errorf("%d semaphores made by refused enqueues", n)
	}
}

// seqSlotsJob is a sequence's job, which may not take several slots.
var seqSlotsJob = bq.Define("c.sl.seq", behave, bq.JobOptions[Args]{
	Concurrency: &bq.Concurrency[Args]{Key: keyOf, Group: "sl.seq", Sequence: true}})

// testSlotsNoBarging, step by step on one key of limit 4, freeing slots by
// cancelling ready jobs (a release like any other): a lighter job behind
// a heavy head that cannot start waits behind it although slots are free;
// a release that frees enough starts the head, then the job behind it; a
// limit lowered below a waiting job's slots keeps it waiting, and Explain
// says so, until the limit is raised; a waiting head cancelled lets the
// job behind it start at once. The slots are counted exactly
// (checkSemaphores) at every step.
func testSlotsNoBarging(t *testing.T, h *harness) {
	ctx := context.Background()
	const key = "sl/N"
	job := func(slots int) int64 {
		t.Helper()
		return enqueue(t, h, slJob, Args{Key: "N"}, bq.WithConcurrencyKey("N", 4), bq.Slots(slots)).ID
	}
	want := func(step string, states map[int64]bq.JobState) {
		t.Helper()
		for id, st := range states {
			if got := h.state(id); got != st {
				t.Errorf("%s: job %d is %s, want %s", step, id, got, st)
			}
		}
		h.checkSemaphores()
	}
	cancel := func(id int64) {
		t.Helper()
		if _, err := h.client.Cancel(ctx, id); err != nil {
			t.Fatalf("cancel %d: %v", id, err)
		}
	}
	a, heavy, light := job(3), job(3), job(1)
	want("3 of 4 slots held, a job of 3 and one of 1 after it", map[int64]bq.JobState{a: bq.StateReady, heavy: bq.StateBlocked, light: bq.StateBlocked})
	cancel(a)
	want("the holder of 3 gone", map[int64]bq.JobState{heavy: bq.StateReady, light: bq.StateReady})
	two, one := job(2), job(1)
	want("every slot held", map[int64]bq.JobState{two: bq.StateBlocked, one: bq.StateBlocked})
	cancel(light)
	want("1 slot free, a job of 2 at the head", map[int64]bq.JobState{two: bq.StateBlocked, one: bq.StateBlocked})
	cancel(heavy)
	want("4 slots free", map[int64]bq.JobState{two: bq.StateReady, one: bq.StateReady})
	if err := h.client.SetKeyLimit(ctx, key, 1); err != nil {
		t.Fatal(err)
	}
	cancel(two)
	cancel(one)
	later := job(2)
	want("the limit lowered to 1", map[int64]bq.JobState{later: bq.StateBlocked})
	ex, err := h.client.Explain(ctx, later)
	if err != nil {
		t.Fatal(err)
	}
	if s := ex.Summary; !strings.Contains(s, "needs 2 slots") || !strings.Contains(s, "raise it") {
		t.Errorf("Explain of a job of 2 slots under a limit of 1 does not say it needs a higher limit:\n%s", s)
	}
	if err := h.client.SetKeyLimit(ctx, key, 4); err != nil {
		t.Fatal(err)
	}
	want("the limit raised to 4", map[int64]bq.JobState{later: bq.StateReady})
	// 2 of 4 held: a head of 3 waits, a job of 1 behind it; the head
	// cancelled, the job behind it takes a free slot at once.
	big, small := job(3), job(1)
	want("a head of 3 with 2 free", map[int64]bq.JobState{big: bq.StateBlocked, small: bq.StateBlocked})
	cancel(big)
	want("the head of 3 cancelled while it waited", map[int64]bq.JobState{small: bq.StateReady})
}

package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

// Several concurrency keys per job (docs/limits.md, "Several keys per
// job"). A job's Args.Key lists every key it carries, comma-separated, so
// each recorded run says which keys it held; multiRuns splits a run into
// one per key for the overlap checks.
var _ = register(
	scenario{"MultiKeyAcrossProcesses", testMultiKeyAcrossProcesses},
	scenario{"MultiKeyKill9", testMultiKeyKill9},
	scenario{"MultiKeyNoHoldAndWait", testMultiKeyNoHoldAndWait},
	scenario{"MultiKeyNoDeadlock", testMultiKeyNoDeadlock},
	scenario{"MultiKeyFIFOWithinAKey", testMultiKeyFIFO},
	scenario{"MultiKeyDiscard", testMultiKeyDiscard},
	scenario{"MultiKeyCancel", testMultiKeyCancel},
	scenario{"MultiKeyBadInput", testMultiKeyBadInput},
	scenario{"MultiKeyWithRate", testMultiKeyWithRate},
	scenario{"MultiKeyFrozenHolder", testMultiKeyFrozenHolder},
)

// part returns the key of Args.Key's list that starts with prefix ("" when
// none does: that limit is dropped for the job).
func part(prefix string) func(Args) string {
	return func(a Args) string {
		for _, k := range strings.Split(a.Key, ",") {
			if strings.HasPrefix(k, prefix) {
				return k
			}
		}
		return ""
	}
}

// Tenants t0..t2 (To=2), APIs a0..a1 (To=3), region r0 (To=4): limits set
// by the definitions, in two declared orders, shared through Group.
var (
	mkTenant = bq.Concurrency[Args]{Key: part("t"), To: 2, Group: "mk.tenant"}
	mkAPI    = bq.Concurrency[Args]{Key: part("a"), To: 3, Group: "mk.api"}
	mkRegion = bq.Concurrency[Args]{Key: part("r"), To: 4, Group: "mk.region"}
	mkNoBack = func(int) time.Duration { return 0 }
	// mkTARJob declares tenant, API, region; mkRATJob region, API, tenant.
	mkTARJob = bq.Define("c.mk.tar", behave, bq.JobOptions[Args]{Backoff: mkNoBack,
		Concurrency: &mkTenant, MoreConcurrency: []bq.Concurrency[Args]{mkAPI, mkRegion}})
	mkRATJob = bq.Define("c.mk.rat", behave, bq.JobOptions[Args]{Backoff: mkNoBack,
		Concurrency: &mkRegion, MoreConcurrency: []bq.Concurrency[Args]{mkAPI, mkTenant}})
	// mkRateJob: tenant and API keys plus one rate key for all (5 starts
	// per 400ms).
	mkRateJob = bq.Define("c.mk.rate", behave, bq.JobOptions[Args]{Backoff: mkNoBack,
		Concurrency: &mkTenant, MoreConcurrency: []bq.Concurrency[Args]{mkAPI},
		Rate: &bq.Rate[Args]{Key: func(Args) string { return "all" }, Limit: 5, Period: ratePeriod}})
	// mkJob takes its keys at enqueue (mkKeys), all in group "mk".
	mkJob = bq.Define("c.mk", behave, bq.JobOptions[Args]{Backoff: mkNoBack,
		Concurrency: &bq.Concurrency[Args]{Key: part(""), Group: "mk"}})
)

// mkLimits are the definitions' limits per key, as the runs name them.
var mkLimits = map[string]int{"t0": 2, "t1": 2, "t2": 2, "a0": 3, "a1": 3, "r0": 4}

// mkKeys are the enqueue options giving an mkJob the keys of "mk" named
// in order (with limits[key] each, 1 if absent; onConflict[key] if set),
// and the Args.Key recording them.
func mkKeys(keys []string, limits map[string]int, discard ...string) ([]bq.EnqueueOption, string) {
	to := func(k string) int { return max(limits[k], 1) }
	conflict := func(k string) bq.OnConflict {
		if slices.Contains(discard, k) {
			return bq.Discard
		}
		return bq.Block
	}
	opts := []bq.EnqueueOption{bq.WithConcurrencyKey(keys[0], to(keys[0]), conflict(keys[0]))}
	var more []bq.KeyLimit
	for _, k := range keys[1:] {
		more = append(more, bq.KeyLimit{Key: bq.Key("mk", k), To: to(k), OnConflict: conflict(k)})
	}
	if len(more) > 0 {
		opts = append(opts, bq.WithMoreConcurrencyKeys(more...))
	}
	return opts, strings.Join(keys, ",")
}

// mkEnqueue enqueues an mkJob with the keys named, in that order.
func mkEnqueue(t *testing.T, h *harness, keys []string, limits map[string]int, a Args, discard ...string) bq.EnqueueResult {
	t.Helper()
	opts, key := mkKeys(keys, limits, discard...)
	a.Key = key
	return enqueue(t, h, mkJob, a, opts...)
}

// multiRuns splits each run into one per key it held.
func multiRuns(runs []run) []run {
	var out []run
	for _, r := range runs {
		for _, k := range strings.Split(r.Key, ",") {
			if k != "" {
				rk := r
				rk.Key = k
				out = append(out, rk)
			}
		}
	}
	return out
}

// checkOverlap fails for every key whose runs overlapped beyond its limit.
func checkOverlap(t *testing.T, runs []run, limits map[string]int) map[string]int {
	t.Helper()
	overlap := maxOverlap(multiRuns(runs))
	for key, n := range overlap {
		to, ok := limits[key]
		if !ok {
			t.Errorf("key %s: runs of a key with no known limit", key)
		} else if n > to {
			t.Errorf("key %s: %d runs overlapped, limit %d", key, n, to)
		}
	}
	return overlap
}

// checkOnce fails for every job that did not run exactly once.
func checkOnce(t *testing.T, runs []run, ids []int64) {
	t.Helper()
	perJob := map[int64]int{}
	for _, r := range runs {
		perJob[r.JobID]++
	}
	for _, id := range ids {
		if perJob[id] != 1 {
			t.Errorf("job %d ran %d times, want exactly once", id, perJob[id])
		}
	}
}

// mkMixed enqueues n jobs of mkMixedJob from seq on.
func mkMixed(t *testing.T, h *harness, seq, n int, sleep func() int) []int64 {
	t.Helper()
	var ids []int64
	for i := seq; i < seq+n; i++ {
		job, a := mkMixedJob(i, sleep())
		res, err := job.Enqueue(context.Background(), h.client, Args{Test: h.test, Key: a.Key, Seq: i, SleepMS: a.SleepMS})
		if err != nil {
			t.Errorf("enqueue %s %q: %v", job.Name(), a.Key, err)
			return ids
		}
		ids = append(ids, res.ID)
	}
	return ids
}

// mkMixedJob is job number i: a random tenant and API key, and region r0
// one time in two, in one of the two declared orders.
func mkMixedJob(i, sleepMS int) (*bq.Job[Args], Args) {
	keys := []string{fmt.Sprintf("t%d", rand.IntN(3)), fmt.Sprintf("a%d", rand.IntN(2))}
	if rand.IntN(2) == 0 {
		keys = append(keys, "r0")
	}
	job := mkTARJob
	if i%2 == 1 {
		job = mkRATJob
		slices.Reverse(keys)
	}
	return job, Args{Key: strings.Join(keys, ","), SleepMS: sleepMS}
}

// testMultiKeyAcrossProcesses: three worker processes x 4 slots drain 90
// jobs each carrying two or three keys (tenant To=2, API To=3, region
// To=4) declared in two orders, half enqueued before the workers start,
// half while they run. From the runs' own records: no key ever
// had more runs at once than its limit, and every job completed once.
func testMultiKeyAcrossProcesses(t *testing.T, h *harness) {
	sleep := func() int { return 10 + rand.IntN(30) }
	ids := mkMixed(t, h, 0, 45, sleep)
	if t.Failed() {
		return
	}
	h.checkSemaphores()
	stop := h.spawnWorkers(3, 4)
	// The rest are admitted as the runs come and go.
	for i := 45; i < 90; i += 5 {
		ids = append(ids, mkMixed(t, h, i, 5, sleep)...)
		time.Sleep(50 * time.Millisecond)
	}
	h.waitFinished(len(ids), 90*time.Second)
	stop()
	runs := h.dbRuns(t)
	checkOnce(t, runs, ids)
	overlap := checkOverlap(t, runs, mkLimits)
	if overlap["r0"] < 2 {
		t.Errorf("region r0 (To=4) never had two runs at once: the keys serialised the jobs")
	}
	pids := map[int]bool{}
	for _, r := range runs {
		pids[r.PID] = true
	}
	if len(pids) < 2 {
		t.Errorf("runs came from %d process(es); want work spread over several", len(pids))
	}
	h.checkDrained(ids)
	t.Logf("%s: max overlap per key %v; processes %d", h.db, overlap, len(pids))
}

// testMultiKeyKill9: jobs as MultiKeyAcrossProcesses's, enqueued
// steadily for 6 s, drained by three worker processes and a dispatcher
// while a worker, one with a run in progress, is killed with SIGKILL
// every 1-2 s and replaced. A killed
// run's claim keeps every slot of its job until the dispatcher reaps it,
// which is never sooner than ProcessDeadAfter less a heartbeat after the
// process's last beat: the run counts as lasting until half of
// ProcessDeadAfter after its kill (its last beat may have been late), or
// its job's re-run if sooner. No key beyond its limit; every job
// completes.
func testMultiKeyKill9(t *testing.T, h *harness) {
	f := h.chaosFleet(3, 4)
	f.busyFirst = true
	var ids []int64
	enqueued := make(chan struct{})
	go func() {
		defer close(enqueued)
		for i, start := 0, time.Now(); time.Since(start) < 6*time.Second; i += 4 {
			got := mkMixed(t, h, i, 4, func() int { return 50 + rand.IntN(250) })
			ids = append(ids, got...)
			if len(got) < 4 {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	f.killFor(6*time.Second, nil)
	<-enqueued
	h.waitFinished(len(ids), 2*time.Minute)
	runs := f.endAtKill(t, h.dbRuns(t), chaosDeadAfter/2)
	overlap := checkOverlap(t, runs, mkLimits)
	h.checkDrained(ids)
	reaped := h.count(`SELECT count(*) FROM bq_jobs WHERE last_error LIKE 'process lost%'`)
	if reaped == 0 {
		t.Errorf("no job was reaped: the %d kills caught no run, so the scenario tested nothing of a lost claim", f.kills)
	}
	t.Logf("%s: %d kills, %d runs of %d jobs, %d reaped, max overlap per key %v", h.db, f.kills, len(runs), len(ids), reaped, overlap)
}

// testMultiKeyNoHoldAndWait: A (To=1) is held by a running job; a job of
// A and B (To=1) waits, holding nothing: a job of B alone enqueued after
// it runs and completes while it still waits. Once A frees, the A+B job
// runs.
func testMultiKeyNoHoldAndWait(t *testing.T, h *harness) {
	ctx := context.Background()
	worker(h, 4)
	holder := mkEnqueue(t, h, []string{"A"}, nil, Args{Seq: 0, SleepMS: 2500})
	h.waitState(holder.ID, bq.StateRunning)
	both := mkEnqueue(t, h, []string{"A", "B"}, nil, Args{Seq: 1, SleepMS: 10})
	if both.State != bq.StateBlocked {
		t.Fatalf("the A+B job: %+v, want blocked behind A's holder", both)
	}
	if st, err := h.client.KeyState(ctx, bq.Key("mk", "B")); err != nil || (st.Exists && st.Taken != 0) {
		t.Errorf("key B while the A+B job waits: %+v, %v; want no slot taken", st, err)
	}
	alone := mkEnqueue(t, h, []string{"B"}, nil, Args{Seq: 2, SleepMS: 10})
	if alone.State != bq.StateReady {
		t.Errorf("the B job: %+v, want ready: the waiting A+B job must not hold B's slot", alone)
	}
	h.waitState(alone.ID, bq.StateCompleted)
	if st := h.state(holder.ID); st != bq.StateRunning {
		t.Fatalf("A's holder is %s before the B job's end was checked; the scenario needs it still running", st)
	}
	if st := h.state(both.ID); st != bq.StateBlocked {
		t.Errorf("the A+B job is %s while A is held, want blocked", st)
	}
	h.waitState(both.ID, bq.StateCompleted)
	runs := h.recorder().all()
	at := map[int]run{}
	for _, r := range runs {
		at[r.Seq] = r
	}
	if at[1].Start.Before(at[0].End) {
		t.Errorf("the A+B job started %s before A's holder ended", at[0].End.Sub(at[1].Start))
	}
	if !at[2].End.Before(at[1].Start) {
		t.Errorf("the B job ended after the A+B job started; it should have run while that one waited")
	}
	h.checkSemaphores()
}

// testMultiKeyNoDeadlock: four goroutines enqueue jobs of crossing key
// sets ({A,B}, {B,A} declared in the opposite order, {B,C}, {C,A},
// {A,B,C}) while three worker processes run them. Everything finishes,
// no enqueue fails and no process reports a deadlock.
func testMultiKeyNoDeadlock(t *testing.T, h *harness) {
	ctx := context.Background()
	limits := map[string]int{"A": 1, "B": 2, "C": 1}
	var out lockedBuffer
	procs := h.fleet(h.spawnTo(&out, "worker", 3), h.spawnTo(&out, "worker", 3), h.spawnTo(&out, "worker", 3))
	sets := [][]string{{"A", "B"}, {"B", "A"}, {"B", "C"}, {"C", "A"}, {"A", "B", "C"}}
	var mu sync.Mutex
	var ids []int64
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				keys := sets[(g+i)%len(sets)]
				opts, key := mkKeys(keys, limits)
				res, err := mkJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: key, Seq: g*100 + i, SleepMS: 5 + rand.IntN(20)}, opts...)
				if err != nil {
					t.Errorf("enqueue %v: %v", keys, err)
					return
				}
				mu.Lock()
				ids = append(ids, res.ID)
				mu.Unlock()
				time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	h.waitFinished(len(ids), 60*time.Second)
	procs()
	runs := h.dbRuns(t)
	checkOnce(t, runs, ids)
	overlap := checkOverlap(t, runs, limits)
	h.checkDrained(ids)
	log := strings.ToLower(out.String())
	for _, word := range []string{"deadlock", "gave up after"} {
		if strings.Contains(log, word) {
			t.Errorf("a worker process reported %q:\n%s", word, out.String())
		}
	}
	retried := h.count(`SELECT coalesce(sum(retried), 0) FROM test_conflicts`)
	t.Logf("%s: %d jobs, max overlap %v, transient conflicts retried by the workers: %d", h.db, len(ids), overlap, retried)
}

// lockedBuffer collects the output of several processes, also copying it
// to the test's stderr.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, _ = os.Stderr.Write(p)
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testMultiKeyFIFO: with A To=1 held, jobs of A alone and of A and B (B
// free, declared before or after A) line up in A's line in enqueue
// order, and run in that order: a multi-key job is neither overtaken nor
// overtakes.
func testMultiKeyFIFO(t *testing.T, h *harness) {
	limits := map[string]int{"A": 1, "B": 10}
	sets := [][]string{{"A"}, {"A", "B"}, {"A"}, {"B", "A"}, {"A", "B"}, {"A"}, {"A"}, {"B", "A"}}
	var ids []int64
	for i, keys := range sets {
		res := mkEnqueue(t, h, keys, limits, Args{Seq: i, SleepMS: 20})
		if want := bq.StateBlocked; i > 0 && res.State != want {
			t.Fatalf("job %d %v: %+v, want blocked in A's line", i, keys, res)
		}
		ids = append(ids, res.ID)
	}
	worker(h, 4)
	rec := h.recorder()
	h.eventually(20*time.Second, "8 runs", func() bool { return len(rec.all()) == len(sets) })
	runs := rec.all()
	slices.SortFunc(runs, func(a, b run) int { return a.Start.Compare(b.Start) })
	var order []int
	for _, r := range runs {
		order = append(order, r.Seq)
	}
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7}; !equal(order, want) {
		t.Errorf("runs started in order %v, want %v (enqueue order on A)", order, want)
	}
	checkOverlap(t, runs, limits)
	for _, id := range ids {
		h.waitState(id, bq.StateCompleted)
	}
	h.checkSemaphores()
}

// testMultiKeyDiscard: a job whose first key is free and whose second is
// full and says Discard is discarded at enqueue, with a reason naming the
// full key, and takes nothing: its first key is still free.
func testMultiKeyDiscard(t *testing.T, h *harness) {
	ctx := context.Background()
	holder := mkEnqueue(t, h, []string{"D"}, nil, Args{SleepMS: 1})
	if holder.State != bq.StateReady {
		t.Fatalf("holder of D: %+v, want ready", holder)
	}
	res := mkEnqueue(t, h, []string{"X", "D"}, nil, Args{Seq: 1}, "D")
	if res.State != bq.StateDiscarded || res.ID != 0 || !strings.Contains(res.Reason, bq.Key("mk", "D")) {
		t.Errorf("X+D job with D full: %+v, want discarded with a reason naming %q", res, bq.Key("mk", "D"))
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs`); n != 1 {
		t.Errorf("%d jobs stored, want the holder alone", n)
	}
	if st, err := h.client.KeyState(ctx, bq.Key("mk", "X")); err != nil || (st.Exists && (st.Taken != 0 || st.Blocked != 0)) {
		t.Errorf("key X after the discard: %+v, %v; want nothing held or waiting", st, err)
	}
	h.checkSemaphores()
	x := mkEnqueue(t, h, []string{"X"}, nil, Args{Seq: 2})
	if x.State != bq.StateReady {
		t.Errorf("an X job after the discard: %+v, want ready", x)
	}
	worker(h, 2)
	h.waitState(holder.ID, bq.StateCompleted)
	h.waitState(x.ID, bq.StateCompleted)
	again := mkEnqueue(t, h, []string{"X", "D"}, nil, Args{Seq: 3}, "D")
	if again.State == bq.StateDiscarded {
		t.Errorf("X+D job with both free: %+v, want admitted", again)
	}
	h.waitState(again.ID, bq.StateCompleted)
	h.checkSemaphores()
}

// testMultiKeyCancel: with A held, a blocked A+B job and a ready C+D job
// are cancelled: afterwards A still has its one holder and an empty
// line, B, C and D nothing held or waiting, and the next job of each key
// runs.
func testMultiKeyCancel(t *testing.T, h *harness) {
	ctx := context.Background()
	holder := mkEnqueue(t, h, []string{"A"}, nil, Args{Seq: 0, SleepMS: 300})
	blocked := mkEnqueue(t, h, []string{"B", "A"}, nil, Args{Seq: 1})
	ready := mkEnqueue(t, h, []string{"C", "D"}, nil, Args{Seq: 2})
	if blocked.State != bq.StateBlocked || ready.State != bq.StateReady {
		t.Fatalf("B+A job %+v, C+D job %+v: want blocked and ready", blocked, ready)
	}
	for _, id := range []int64{blocked.ID, ready.ID} {
		cancelJob(t, h, id)
		wantCancelled(t, h, id)
	}
	free := func(key string, taken int) {
		t.Helper()
		st, err := h.client.KeyState(ctx, bq.Key("mk", key))
		if err != nil {
			t.Fatalf("KeyState %s: %v", key, err)
		}
		if st.Exists && (st.Taken != taken || st.Free != st.Limit-taken || st.Blocked != 0 || len(st.Line) != 0) {
			t.Errorf("key %s after the cancels: %+v; want %d taken, none blocked", key, st, taken)
		}
		if !st.Exists && taken > 0 {
			t.Errorf("key %s after the cancels has no semaphore; want its holder's", key)
		}
	}
	free("A", 1)
	for _, k := range []string{"B", "C", "D"} {
		free(k, 0)
	}
	h.checkSemaphores()
	next := map[string]bq.EnqueueResult{}
	for i, k := range []string{"A", "B", "C", "D"} {
		next[k] = mkEnqueue(t, h, []string{k}, nil, Args{Seq: 3 + i})
	}
	if next["A"].State != bq.StateBlocked {
		t.Errorf("next A job: %+v, want blocked behind the holder", next["A"])
	}
	for _, k := range []string{"B", "C", "D"} {
		if next[k].State != bq.StateReady {
			t.Errorf("next %s job: %+v, want ready: the cancelled jobs hold nothing", k, next[k])
		}
	}
	worker(h, 4)
	for _, res := range next {
		h.waitState(res.ID, bq.StateCompleted)
	}
	h.waitState(holder.ID, bq.StateCompleted)
	h.checkSemaphores()
}

// testMultiKeyBadInput: five keys, a key named twice, and a
// WithMoreConcurrencyKeys key without a group are refused before the
// database with ErrInvalidJob and a message naming the fix; a definition
// with five keys, or a limit without Key, reports through Err.
func testMultiKeyBadInput(t *testing.T, h *harness) {
	ctx := context.Background()
	five, _ := mkKeys([]string{"A", "B", "C", "D", "E"}, nil)
	twice, _ := mkKeys([]string{"A", "B", "A"}, nil)
	for _, c := range []struct {
		what  string
		opts  []bq.EnqueueOption
		parts []string
	}{
		{"five keys", five, []string{"MaxConcurrencyKeys", "at most 4"}},
		{"a key twice", twice, []string{`"mk/A"`, "twice", "different key"}},
		{"a key without a group", []bq.EnqueueOption{bq.WithConcurrencyKey("A", 1),
			bq.WithMoreConcurrencyKeys(bq.KeyLimit{Key: "nogroup", To: 1})}, []string{`"nogroup"`, "bq.Key(group, key)"}},
	} {
		_, err := mkJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "A"}, c.opts...)
		invalidSaying(t, c.what, err, c.parts)
	}
	// The same key twice from the definition: known only from the args.
	dup := bq.Define("c.mk.dup."+h.test, behave, bq.JobOptions[Args]{Concurrency: &mkTenant,
		MoreConcurrency: []bq.Concurrency[Args]{{Key: part("t"), Group: "mk.tenant"}}})
	if dup.Err() != nil {
		t.Fatalf("Define: %v", dup.Err())
	}
	if _, err := dup.Enqueue(ctx, h.client, Args{Test: h.test, Key: "t0"}); !errors.Is(err, bq.ErrInvalidJob) || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a definition naming one key twice: %v, want ErrInvalidJob saying twice", err)
	}
	more := []bq.Concurrency[Args]{mkAPI, mkRegion, {Key: part("x"), Group: "mk.x"}, {Key: part("y"), Group: "mk.y"}}
	bad := bq.Define("c.mk.five."+h.test, behave, bq.JobOptions[Args]{Concurrency: &mkTenant, MoreConcurrency: more})
	if err := bad.Err(); !errors.Is(err, bq.ErrInvalidJob) || !strings.Contains(err.Error(), "MaxConcurrencyKeys") {
		t.Errorf("a definition with five keys: %v, want ErrInvalidJob naming MaxConcurrencyKeys", err)
	}
	noKey := bq.Define("c.mk.nokey."+h.test, behave, bq.JobOptions[Args]{Concurrency: &mkTenant,
		MoreConcurrency: []bq.Concurrency[Args]{{To: 1}}})
	if err := noKey.Err(); !errors.Is(err, bq.ErrInvalidJob) || !strings.Contains(err.Error(), "MoreConcurrency[0]") {
		t.Errorf("a definition with a MoreConcurrency limit without Key: %v, want ErrInvalidJob naming MoreConcurrency[0]", err)
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs`); n != 0 {
		t.Errorf("%d jobs stored by refused enqueues", n)
	}
	if n := h.count(`SELECT count(*) FROM bq_semaphores`); n != 0 {
		t.Errorf("%d semaphores made by refused enqueues", n)
	}
}

// testMultiKeyWithRate: jobs of a tenant key (To=2) and an API key (To=3)
// that also share one rate key (5 starts per 400ms), run by three worker
// processes: neither concurrency key beyond its limit, no window of the
// period with more than 5 starts, and the rate reached.
func testMultiKeyWithRate(t *testing.T, h *harness) {
	var ids []int64
	for i := range 40 {
		key := fmt.Sprintf("t%d,a%d", i%2, i%3%2)
		ids = append(ids, enqueue(t, h, mkRateJob, Args{Key: key, Seq: i, SleepMS: 10 + rand.IntN(40)}).ID)
	}
	stop := h.spawnWorkers(3, 3)
	h.waitFinished(len(ids), 90*time.Second)
	stop()
	runs := h.dbRuns(t)
	checkOnce(t, runs, ids)
	overlap := checkOverlap(t, runs, mkLimits)
	most := checkRate(t, startsOf(runs, func(run) string { return "all" }, func(r run) time.Time { return r.Start }),
		map[string]int{"all": 5}, ratePeriod)
	h.checkDrained(ids)
	t.Logf("%s: max overlap %v, most starts per %s %v", h.db, overlap, ratePeriod, most)
}

// testMultiKeyFrozenHolder: W1 runs two multi-key jobs, {A,B} and {B,C}
// (A and C To=1, B To=2); jobs of {A,B}, {C} and {B} wait. W1 is paused
// (SIGSTOP) for 4.5 s, beyond ProcessDeadAfter (3 s); W2 runs workers and
// the dispatcher. No waiting job may start before W1's claims can be dead
// by the lease rule (3 s of silence since its last heartbeat, which came
// at most a heartbeat before the stop unless late: 2 s is the bound
// checked); then they run.
// After SIGCONT W1's runs stop; with the pause excluded no key ever
// exceeded its limit, and every job completes.
func testMultiKeyFrozenHolder(t *testing.T, h *harness) {
	limits := map[string]int{"A": 1, "B": 2, "C": 1}
	w1 := h.spawn("workers", 2, chaosEnv()...)
	var ids []int64
	var held []int64
	for _, keys := range [][]string{{"A", "B"}, {"B", "C"}} {
		// Still running when W1 resumes; a re-run ends at once.
		res := mkEnqueue(t, h, keys, limits, Args{Mode: "poll-ctx-first", SleepMS: 8000})
		held = append(held, res.ID)
	}
	for _, id := range held {
		h.waitState(id, bq.StateRunning)
	}
	ids = append(ids, held...)
	for _, keys := range [][]string{{"A", "B"}, {"C"}, {"B"}} {
		res := mkEnqueue(t, h, keys, limits, Args{Mode: "poll-ctx", SleepMS: 300})
		if res.State != bq.StateBlocked {
			t.Fatalf("job %v: %+v, want blocked behind W1's runs", keys, res)
		}
		ids = append(ids, res.ID)
	}
	w2 := h.spawn("worker", 3, chaosEnv()...)
	stop := h.fleet(w1, w2)
	h.waitProcesses(2)
	time.Sleep(500 * time.Millisecond)

	w := window{pid: w1.Process.Pid, stop: h.pause(w1)}
	time.Sleep(4500 * time.Millisecond)
	w.cont = h.resume(w1)
	h.waitFinished(len(ids), 60*time.Second)
	stop()

	all := h.outcomeRuns(t)
	rep := analysePause(slices.Clone(all), w)
	// Overlap and stale tails per key: the same analysis over the runs
	// split by key.
	var split []outcomeRun
	for _, r := range all {
		for _, k := range multiRuns([]run{r.run}) {
			split = append(split, outcomeRun{run: k, Outcome: r.Outcome})
		}
	}
	perKey := analysePause(split, w)
	rep.overlap, rep.stale = perKey.overlap, perKey.stale
	rep.log(t, h.db, limits)
	rep.check(t, limits)
	// The lease rule: W1's slots are not W2's before W1 has been silent
	// for ProcessDeadAfter.
	earliest := w.stop.Add(chaosDeadAfter - 4*chaosHeartbeat)
	for _, r := range all {
		if r.PID != w.pid && r.Start.After(w.stop) && r.Start.Before(earliest) {
			t.Errorf("job %d (%s) started %s into W1's pause, before its claims could be dead (%s)",
				r.JobID, r.Key, r.Start.Sub(w.stop).Round(time.Millisecond), earliest.Sub(w.stop).Round(time.Millisecond))
		}
	}
	h.checkDrained(ids)
}

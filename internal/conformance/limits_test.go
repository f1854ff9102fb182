package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"EnqueueTimeKeysAcrossProcesses", testEnqueueTimeKeys},
	scenario{"MaxActiveAcrossProcesses", testMaxActive},
	scenario{"SyncPolicies", testSyncPolicies},
	scenario{"PolicyPerKeyLimitAppliesAtOnce", testPolicyPerKey},
	scenario{"KeyLimitRaiseAndLower", testKeyLimit},
	scenario{"MaxBlockedDiscardsBeyondBacklog", testMaxBlocked},
	scenario{"NoStarvationBesideUnkeyedFlood", testNoStarvation},
	scenario{"FullKeyNeverDelaysOtherKeys", testFullKeyNeverDelays},
	scenario{"ConcurrentBulkEnqueue", testConcurrentBulk},
	scenario{"ConcurrentBulkEnqueueDistinctFirstKeys", testConcurrentBulkDistinctFirst},
)

// testEnqueueTimeKeys: limits attached at enqueue hold across three worker
// processes, and an enqueue-time limit beats the definition's.
func testEnqueueTimeKeys(t *testing.T, h *harness) {
	ctx := context.Background()
	limits := map[string]int{"ek1": 1, "ek2": 2, "ek3": 3}
	for i := range 150 {
		key := []string{"ek1", "ek2", "ek3"}[i%3]
		job := unkeyedJob
		if key == "ek1" {
			job = limit2Job // its definition says 2; the enqueue says 1
		}
		_, err := job.Enqueue(ctx, h.client, Args{Test: h.test, Key: key, SleepMS: 20 + rand.IntN(30)},
			bq.WithConcurrencyKey(key, limits[key]))
		if err != nil {
			t.Fatal(err)
		}
	}
	stop := h.spawnWorkers(3, 4)
	h.eventually(90*time.Second, "150 jobs to complete", func() bool {
		return h.count(`SELECT count(*) FROM bq_jobs WHERE finished_at IS NOT NULL`) == 150
	})
	stop()
	overlap := maxOverlap(h.dbRuns(t))
	for key, to := range limits {
		if overlap[key] > to {
			t.Errorf("key %s: %d runs overlapped, enqueue-time limit %d", key, overlap[key], to)
		}
		if to > 1 && overlap[key] < 2 {
			t.Errorf("key %s: at most %d at once with limit %d", key, overlap[key], to)
		}
	}
	t.Logf("max overlap per key: %v", overlap)
	h.checkSemaphores()
}

// testMaxActive: a queue capped at 3 by policy runs at most 3 jobs at once
// across three worker processes of 4 slots each, keyed jobs within their
// own limits too.
func testMaxActive(t *testing.T, h *harness) {
	ctx := context.Background()
	if err := h.client.SyncPolicies(ctx, "ops", []bq.Policy{{Queue: "capped", MaxActive: 3}}); err != nil {
		t.Fatal(err)
	}
	for i := range 90 {
		var err error
		a := Args{Test: h.test, Key: fmt.Sprintf("m%d", i%2), SleepMS: 20 + rand.IntN(30)}
		if i%3 == 0 {
			_, err = unkeyedJob.Enqueue(ctx, h.client, Args{Test: h.test, SleepMS: a.SleepMS}, bq.Queue("capped"))
		} else {
			_, err = limit1Job.Enqueue(ctx, h.client, a, bq.Queue("capped"))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var cmds []*exec.Cmd
	for range 3 {
		cmds = append(cmds, h.spawn("worker", 4, "BQ_QUEUE=capped"))
	}
	h.eventually(90*time.Second, "90 jobs to complete", func() bool {
		return h.count(`SELECT count(*) FROM bq_jobs WHERE finished_at IS NOT NULL`) == 90
	})
	h.stop(cmds...)
	runs := h.dbRuns(t)
	perKey := maxOverlap(runs)
	for _, k := range []string{"m0", "m1"} {
		if perKey[k] > 1 {
			t.Errorf("key %s: %d overlapped, limit 1", k, perKey[k])
		}
	}
	whole := slices.Clone(runs)
	for i := range whole {
		whole[i].Key = "queue"
	}
	if n := maxOverlap(whole)["queue"]; n > 3 || n < 3 {
		t.Errorf("the capped queue ran %d jobs at once; want exactly its MaxActive 3 at the peak", n)
	}
}

// testSyncPolicies: desired state per namespace.
func testSyncPolicies(t *testing.T, h *harness) {
	ctx := context.Background()
	c := h.client
	list := func() map[string]bq.StoredPolicy {
		ps, err := c.ListPolicies(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bq.StoredPolicy{}
		for _, p := range ps {
			out[p.Queue] = p
		}
		return out
	}
	set := []bq.Policy{{Queue: "mail", MaxActive: 20, MaxActivePerKey: 3}, {Queue: "sms", MaxActive: 5}}
	if err := c.SyncPolicies(ctx, "notify", set); err != nil {
		t.Fatal(err)
	}
	got := list()
	if len(got) != 2 || got["mail"].MaxActive != 20 || got["mail"].MaxActivePerKey != 3 || got["sms"].Namespace != "notify" {
		t.Fatalf("after create: %+v", got)
	}
	// Idempotence: the same set writes nothing.
	before := got["mail"].UpdatedAt
	time.Sleep(5 * time.Millisecond)
	if err := c.SyncPolicies(ctx, "notify", set); err != nil {
		t.Fatal(err)
	}
	if after := list()["mail"].UpdatedAt; !after.Equal(before) {
		t.Errorf("syncing the same set rewrote the policy (updated_at %v -> %v)", before, after)
	}
	// Update and prune.
	if err := c.SyncPolicies(ctx, "notify", []bq.Policy{{Queue: "mail", MaxActive: 10}}); err != nil {
		t.Fatal(err)
	}
	got = list()
	if _, ok := got["sms"]; ok || got["mail"].MaxActive != 10 || got["mail"].MaxActivePerKey != 0 {
		t.Errorf("after update and prune: %+v", got)
	}
	// Another namespace may not take mail, and leaves it untouched.
	err := c.SyncPolicies(ctx, "billing", []bq.Policy{{Queue: "mail", MaxActive: 1}, {Queue: "invoices", MaxActive: 2}})
	if !errors.Is(err, bq.ErrPolicyConflict) {
		t.Fatalf("sync of a queue another namespace owns: %v, want ErrPolicyConflict", err)
	}
	wantErr(t, err, `"mail"`, `"notify"`, `"billing"`)
	if got := list(); got["mail"].MaxActive != 10 || len(got) != 1 {
		t.Errorf("a refused sync changed the policies: %+v", got)
	}
	// Other namespaces' policies are not pruned.
	if err := c.SyncPolicies(ctx, "billing", []bq.Policy{{Queue: "invoices", MaxActive: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := c.SyncPolicies(ctx, "notify", nil); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 1 || got["invoices"].Namespace != "billing" {
		t.Errorf("pruning namespace notify: %+v, want only billing's invoices left", got)
	}
	wantErr(t, c.SyncPolicies(ctx, "", nil), "namespace is empty")
	wantErr(t, c.SyncPolicies(ctx, "x", []bq.Policy{{Queue: "q", MaxActive: -1}}), "MaxActive -1")
}

// testPolicyPerKey: keyed jobs that set no To take their queue policy's
// MaxActivePerKey, and a change applies at once.
func testPolicyPerKey(t *testing.T, h *harness) {
	ctx := context.Background()
	var res []bq.EnqueueResult
	for range 4 {
		res = append(res, enqueue(t, h, policyKeyedJob, Args{Key: "pk"}))
	}
	if res[0].State == bq.StateBlocked || res[1].State != bq.StateBlocked {
		t.Fatalf("without a policy: %+v, want limit 1", res)
	}
	if err := h.client.SyncPolicies(ctx, "ops", []bq.Policy{{Queue: "pq", MaxActivePerKey: 3}}); err != nil {
		t.Fatal(err)
	}
	if st1, st2, st3 := h.state(res[1].ID), h.state(res[2].ID), h.state(res[3].ID); st1 != bq.StateReady || st2 != bq.StateReady || st3 != bq.StateBlocked {
		t.Errorf("after the policy raised the per-key limit to 3: %s %s %s, want ready ready blocked", st1, st2, st3)
	}
	if r := enqueue(t, h, policyKeyedJob, Args{Key: "other"}); r.State == bq.StateBlocked {
		t.Error("a fresh key of the queue was blocked")
	}
	// A job's own To beats the policy.
	if r := enqueue(t, h, policyKeyedJob, Args{Key: "pk"}, bq.WithConcurrencyKey("own", 1)); r.State == bq.StateBlocked {
		t.Error("a job with its own limit was blocked by the policy's key")
	}
	h.checkSemaphores()
}

// testKeyLimit: raising a key's limit promotes blocked jobs at once;
// lowering it never lets running jobs exceed the new limit once drained.
func testKeyLimit(t *testing.T, h *harness) {
	ctx := context.Background()
	key := bq.Key("c.limit1", "kl")
	var ids []int64
	for i := range 6 {
		ids = append(ids, enqueue(t, h, limit1Job, Args{Key: "kl", Seq: i, SleepMS: 80}).ID)
	}
	if err := h.client.SetKeyLimit(ctx, key, 3); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bq.JobState{bq.StateReady, bq.StateReady, bq.StateReady, bq.StateBlocked} {
		if st := h.state(ids[i]); st != want {
			t.Errorf("after raising to 3, job %d is %s, want %s", i, st, want)
		}
	}
	// The override beats the definition's To at the next enqueue, too.
	if r := enqueue(t, h, limit1Job, Args{Key: "kl", Seq: 6, SleepMS: 80}); r.State != bq.StateBlocked {
		t.Error("an enqueue at the definition's limit reset the override")
	}
	h.checkSemaphores()
	if err := h.client.SetKeyLimit(ctx, key, 1); err != nil {
		t.Fatal(err)
	}
	worker(h, 4)
	rec := h.recorder()
	h.eventually(30*time.Second, "7 runs", func() bool { return len(rec.all()) == 7 })
	runs := rec.all()
	slices.SortFunc(runs, func(a, b run) int { return a.Start.Compare(b.Start) })
	// The three admitted at limit 3 may overlap; every later run starts
	// after they drained and overlaps nothing.
	for i, r := range runs[3:] {
		for j, o := range runs {
			if j != i+3 && r.Start.Before(o.End) && o.Start.Before(r.End) {
				t.Errorf("after lowering to 1, run of job %d overlapped job %d", r.JobID, o.JobID)
			}
		}
	}
	if err := h.client.ClearKeyLimit(ctx, key); err != nil {
		t.Fatal(err)
	}
	wantErr(t, h.client.SetKeyLimit(ctx, key, 0), "limit of 1 or more")
	h.checkSemaphores()
}

// testMaxBlocked: once MaxBlocked jobs of a key wait, further enqueues of
// the key are discarded with the reason; a policy sets it for keys whose
// definition does not.
func testMaxBlocked(t *testing.T, h *harness) {
	ctx := context.Background()
	var got []bool
	for range 4 {
		r := enqueue(t, h, backlogJob, Args{Key: "bl"})
		got = append(got, r.State == bq.StateDiscarded)
		if r.State == bq.StateDiscarded && !strings.Contains(r.Reason, "MaxBlocked") {
			t.Errorf("reason %q does not say the backlog is full", r.Reason)
		}
	}
	if want := []bool{false, false, false, true}; !slices.Equal(got, want) {
		t.Errorf("discarded %v, want %v (1 running, 2 waiting, then full)", got, want)
	}
	if err := h.client.SyncPolicies(ctx, "ops", []bq.Policy{{Queue: "pq", MaxBlocked: 1}}); err != nil {
		t.Fatal(err)
	}
	got = nil
	for range 3 {
		got = append(got, enqueue(t, h, policyKeyedJob, Args{Key: "pb"}).State == bq.StateDiscarded)
	}
	if want := []bool{false, false, true}; !slices.Equal(got, want) {
		t.Errorf("with a policy MaxBlocked 1: discarded %v, want %v", got, want)
	}
	h.checkSemaphores()
}

// testNoStarvation: while thousands of unkeyed jobs fill every slot, a
// key's jobs keep running at their FIFO turn rather than after the flood.
func testNoStarvation(t *testing.T, h *harness) {
	ctx := context.Background()
	const unkeyed, keyed = 5000, 20
	var keyedIDs []int64
	for i := range keyed {
		batch := make([]Args, unkeyed/keyed)
		for j := range batch {
			batch[j] = Args{Test: h.test}
		}
		if _, err := unkeyedJob.EnqueueMany(ctx, h.client, batch); err != nil {
			t.Fatal(err)
		}
		keyedIDs = append(keyedIDs, enqueue(t, h, limit1Job, Args{Key: "fair", Seq: i}).ID)
	}
	worker(h, 8)
	rec := h.recorder()
	h.progressing(time.Minute, "every job to run", func() int { return len(rec.all()) }, unkeyed+keyed)
	started := map[int64]time.Time{}
	var unkeyedRuns []run
	for _, r := range rec.all() {
		started[r.JobID] = r.Start
		if r.Kind == "c.unkeyed" {
			unkeyedRuns = append(unkeyedRuns, r)
		}
	}
	worst := 0
	for _, id := range keyedIDs {
		// Unkeyed jobs enqueued after this keyed job that started before it.
		overtook := 0
		for _, u := range unkeyedRuns {
			if u.JobID > id && u.Start.Before(started[id]) {
				overtook++
			}
		}
		worst = max(worst, overtook)
	}
	// A keyed job waits for its predecessor of the key (one job's run) and
	// then for a claim: a few batches of 8 may pass it, not the flood.
	if worst > 100 {
		t.Errorf("up to %d later unkeyed jobs started before a keyed job: keyed work starved", worst)
	}
	t.Logf("at most %d later unkeyed jobs overtook a keyed one", worst)
}

// testFullKeyNeverDelays: a key with 1,000 blocked jobs delays no other
// key: the next claim takes the other key's job.
func testFullKeyNeverDelays(t *testing.T, h *harness) {
	ctx := context.Background()
	batch := make([]Args, 1001)
	for i := range batch {
		batch[i] = Args{Test: h.test, Key: "full"}
	}
	if _, err := limit1Job.EnqueueMany(ctx, h.client, batch); err != nil {
		t.Fatal(err)
	}
	proc := registerProcess(t, h, time.Now())
	claimOne(t, h, proc) // the full key's one holder runs
	other := enqueue(t, h, limit1Job, Args{Key: "free"})
	if other.State == bq.StateBlocked {
		t.Fatal("a free key's job was blocked")
	}
	if c := claimOne(t, h, proc); c.ID != other.ID {
		t.Errorf("next claim took job %d, want the free key's job %d", c.ID, other.ID)
	}
	if n := h.count(`SELECT count(*) FROM bq_blocked_executions`); n != 1000 {
		t.Errorf("%d blocked, want 1000", n)
	}
	h.checkSemaphores()
}

// testConcurrentBulk: 10,000 jobs over 100 keys in random order from 4
// goroutines at once: no deadlock reaches a caller, and each key admits
// exactly its limit.
func testConcurrentBulk(t *testing.T, h *harness) {
	concurrentBulk(t, h, func(int) string { return fmt.Sprintf("b%02d", rand.IntN(100)) })
}

// testConcurrentBulkDistinctFirstKeys: as ConcurrentBulkEnqueue, but each
// goroutine's batch also holds a key of its own that sorts before all
// the shared ones, so no two batches share their first key: a driver
// that serialised batches by their first key alone, not by every key's
// own lock, would admit a shared key past its limit.
func testConcurrentBulkDistinctFirst(t *testing.T, h *harness) {
	concurrentBulk(t, h, func(g int) string {
		if rand.IntN(10) == 0 {
			return fmt.Sprintf("a%d", g)
		}
		return fmt.Sprintf("b%02d", rand.IntN(100))
	})
}

// concurrentBulk enqueues 4 batches of 2,500 jobs at once, goroutine g's
// keys drawn by key(g), and checks that each key admitted exactly its
// limit, that every job was stored, and the semaphores.
func concurrentBulk(t *testing.T, h *harness, key func(g int) string) {
	ctx := context.Background()
	var mu sync.Mutex
	admitted := map[string]int{}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			batch := make([]Args, 2500)
			for i := range batch {
				batch[i] = Args{Test: h.test, Key: key(g)}
			}
			res, err := limit2Job.EnqueueMany(ctx, h.client, batch)
			if err != nil {
				t.Errorf("EnqueueMany: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for i, r := range res {
				if r.State != bq.StateBlocked {
					admitted[batch[i].Key]++
				}
			}
		})
	}
	wg.Wait()
	for k, n := range admitted {
		if n != 2 {
			t.Errorf("key %s: %d admitted, want its limit 2", k, n)
		}
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs`); n != 10000 {
		t.Errorf("%d jobs stored, want 10000", n)
	}
	h.checkSemaphores()
}

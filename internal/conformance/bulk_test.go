package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

// Two kinds of one Concurrency.Group, limit 2: their jobs share keys.
var (
	pairAJob = bq.Define("c.pairA", behave, bq.JobOptions[Args]{
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 2, Group: "c.pair"}})
	pairBJob = bq.Define("c.pairB", behave, bq.JobOptions[Args]{
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 2, Group: "c.pair"}})
)

// stored counts the rows of the tables one enqueue writes.
func (h *harness) stored() string {
	return fmt.Sprintf("%d jobs, %d semaphores", h.count(`SELECT count(*) FROM bq_jobs`), h.count(`SELECT count(*) FROM bq_semaphores`))
}

// testBatchMixedItems: one tenant's batch of mixed items (two kinds of one
// group sharing a key, other keys, priorities, a run-at, another queue,
// an unkeyed job) is one transaction. A bad item refuses it whole, naming
// the item; a rolled-back caller's transaction (EnqueueBatchTx,
// EnqueueManyTx) leaves nothing, semaphores included; a commit stores every
// item as admission decided, results in the items' order.
func testBatchMixedItems(t *testing.T, h *harness) {
	ctx := context.Background()
	a := func(key string, seq int) Args { return Args{Test: h.test, Key: key, Seq: seq} }
	items := []bq.Item{
		limit2Job.Item(a("m", 0), bq.Priority(3)),
		unkeyedJob.Item(a("", 1), bq.Queue("other")),
		pairAJob.Item(a("t", 2)),
		pairBJob.Item(a("t", 3), bq.Priority(9)),
		pairAJob.Item(a("t", 4), bq.Priority(9)),
		limit1Job.Item(a("x", 5), bq.In(time.Hour), bq.Priority(9)),
		limit1Job.Item(a("x", 6)),
		unkeyedJob.Item(a("", 7), bq.WithConcurrencyKey("tenant:acme", 1, bq.Discard)),
		unkeyedJob.Item(a("", 8), bq.WithConcurrencyKey("tenant:acme", 1, bq.Discard)),
	}
	empty := h.stored()
	bad := append(slices.Clone(items), limit1Job.Item(a("\xff", 9)))
	_, err := h.client.EnqueueBatch(ctx, bad)
	wantErr(t, err, "items[9]", `"c.limit1"`, "UTF-8")
	if !errors.Is(err, bq.ErrInvalidJob) {
		t.Errorf("a bad item: %v, want ErrInvalidJob", err)
	}
	if got := h.stored(); got != empty {
		t.Fatalf("a refused batch left %s", got)
	}

	tx, _ := h.beginTx(ctx)
	if _, err := h.client.EnqueueBatchTx(ctx, tx, bad); err == nil {
		t.Fatal("EnqueueBatchTx with a bad item: no error")
	}
	if _, err := h.client.EnqueueBatchTx(ctx, tx, items); err != nil {
		t.Fatalf("EnqueueBatchTx after a refused batch: %v (a refusal must leave the transaction usable)", err)
	}
	if _, err := limit2Job.EnqueueManyTx(ctx, h.client, tx, []Args{a("m", 10), a("n", 11)}); err != nil {
		t.Fatal(err)
	}
	rollback(t, tx)
	if got := h.stored(); got != empty {
		t.Fatalf("a rolled-back EnqueueBatchTx and EnqueueManyTx left %s", got)
	}

	tx, commit := h.beginTx(ctx)
	res, err := h.client.EnqueueBatchTx(ctx, tx, items)
	if err != nil {
		t.Fatal(err)
	}
	many, err := limit2Job.EnqueueManyTx(ctx, h.client, tx, []Args{a("m", 10), a("m", 11)}, bq.Priority(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		kind, queue string
		state       bq.JobState
	}{
		{"c.limit2", "default", bq.StateReady},
		{"c.unkeyed", "other", bq.StateReady},
		// Key c.pair/t, limit 2: the two priority-9 items of either
		// kind take it, the earlier priority-0 one blocks.
		{"c.pairA", "default", bq.StateBlocked},
		{"c.pairB", "default", bq.StateReady},
		{"c.pairA", "default", bq.StateReady},
		// Due in an hour: stored scheduled, taking no slot of c.limit1/x
		// from the job due now, however high its priority.
		{"c.limit1", "default", bq.StateScheduled},
		{"c.limit1", "default", bq.StateReady},
		{"c.unkeyed", "default", bq.StateReady},
		{"c.unkeyed", "default", bq.StateDiscarded},
	}
	if len(res) != len(want) {
		t.Fatalf("%d results for %d items", len(res), len(want))
	}
	for i, w := range want {
		if res[i].State != w.state {
			t.Errorf("item %d: %s, want %s", i, res[i].State, w.state)
		}
		if w.state == bq.StateDiscarded {
			if res[i].ID != 0 || res[i].Reason == "" {
				t.Errorf("item %d: discarded with id %d, reason %q", i, res[i].ID, res[i].Reason)
			}
			continue
		}
		info := jobInfo(t, h, res[i].ID)
		var args Args
		_ = json.Unmarshal(info.Args, &args)
		if info.Kind != w.kind || info.Queue != w.queue || args.Seq != i || info.State != w.state {
			t.Errorf("item %d stored as %s in %s (seq %d), %s; want %s in %s (seq %d), %s",
				i, info.Kind, info.Queue, args.Seq, info.State, w.kind, w.queue, i, w.state)
		}
	}
	// The first of the key's m jobs took its other slot.
	if many[0].State != bq.StateReady || many[1].State != bq.StateBlocked {
		t.Errorf("EnqueueManyTx after the batch: %+v", many)
	}
	if got := h.count(`SELECT count(*) FROM bq_jobs`); got != len(items)-1+2 {
		t.Errorf("%d jobs stored, want %d", got, len(items)-1+2)
	}
	h.checkSemaphores()
}

// testBatchPriorityTakesSlotsFirst: five items of one key (limit 2), of
// two kinds of one group and mixed priorities, in one call: the two
// highest take the slots whatever their place in the call, the rest wait
// in priority order (input order among equals) and are promoted in that
// order; an item due later, of a higher priority still, takes no slot.
func testBatchPriorityTakesSlotsFirst(t *testing.T, h *harness) {
	ctx := context.Background()
	prios := []int{1, 5, 0, 5, 3, 1}
	var items []bq.Item
	for i, p := range prios {
		job := []*bq.Job[Args]{pairAJob, pairBJob}[i%2]
		items = append(items, job.Item(Args{Test: h.test, Key: "p", Seq: i}, bq.Priority(p)))
	}
	items = append(items, pairAJob.Item(Args{Test: h.test, Key: "p", Seq: 6}, bq.Priority(99), bq.In(time.Hour)))
	res, err := h.client.EnqueueBatch(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	states := make([]bq.JobState, len(res))
	for i, r := range res {
		states[i] = r.State
	}
	wantStates := []bq.JobState{bq.StateBlocked, bq.StateReady, bq.StateBlocked, bq.StateReady,
		bq.StateBlocked, bq.StateBlocked, bq.StateScheduled}
	if !slices.Equal(states, wantStates) {
		t.Fatalf("states %v, want %v", states, wantStates)
	}
	const key = "c.pair/p"
	ks, err := h.client.KeyState(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var line []int64
	for _, b := range ks.Line {
		line = append(line, b.JobID)
	}
	// Priority 3, then the two 1s in input order, then 0.
	wantLine := []int64{res[4].ID, res[0].ID, res[5].ID, res[2].ID}
	if !slices.Equal(line, wantLine) || ks.Taken != 2 {
		t.Errorf("key %s: %d taken, line %v; want 2 taken, line %v", key, ks.Taken, line, wantLine)
	}
	h.checkSemaphores()

	// Each completion promotes the head of the line, and only it.
	process := registerProcess(t, h, time.Now())
	for range len(wantLine) {
		c := claimOne(t, h, process)
		if ok, err := complete(ctx, h, c); !ok || err != nil {
			t.Fatalf("complete job %d: %v, %v", c.ID, ok, err)
		}
		for i, id := range wantLine {
			want := bq.StateBlocked
			if i == 0 {
				want = bq.StateReady
			}
			if got := h.state(id); got != want {
				t.Fatalf("after completing job %d: job %d is %s, want %s (the line: %v)", c.ID, id, got, want, wantLine)
			}
		}
		wantLine = wantLine[1:]
		h.checkSemaphores()
	}
}

// testBatchLarge: 20,000 items in one call, keyed and unkeyed, are stored
// in one transaction, admitted per key and returned in the items' order.
// At 12 values a job that is more than any database binds in one
// statement (MySQL and PostgreSQL 65,535, SQLite 32,766): the executors
// insert in chunks (PostgreSQL binds arrays), and admission binds a fixed
// few values per key.
func testBatchLarge(t *testing.T, h *harness) {
	ctx := context.Background()
	const n, keys = 20_000, 100
	items := make([]bq.Item, n)
	for i := range n {
		if i%2 == 0 {
			items[i] = unkeyedJob.Item(Args{Test: h.test, Seq: i}, bq.Priority(i%7))
		} else {
			items[i] = limit2Job.Item(Args{Test: h.test, Key: fmt.Sprint("k", (i/2)%keys), Seq: i})
		}
	}
	start := time.Now()
	res, err := h.client.EnqueueBatch(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d items in %s", h.db, n, time.Since(start).Round(time.Millisecond))
	if len(res) != n {
		t.Fatalf("%d results for %d items", len(res), n)
	}
	count := map[bq.JobState]int{}
	seen := map[int64]bool{}
	for i, r := range res {
		count[r.State]++
		if r.ID == 0 || seen[r.ID] {
			t.Fatalf("result %d: id %d missing or repeated", i, r.ID)
		}
		seen[r.ID] = true
	}
	// Each of 100 keys: 100 jobs, 2 admitted.
	if count[bq.StateReady] != n/2+2*keys || count[bq.StateBlocked] != n/2-2*keys {
		t.Errorf("states %v; want %d ready, %d blocked", count, n/2+2*keys, n/2-2*keys)
	}
	if got := h.count(`SELECT count(*) FROM bq_jobs`); got != n {
		t.Errorf("%d jobs stored, want %d", got, n)
	}
	for i := 0; i < n; i += 997 {
		var args Args
		if err := json.Unmarshal(jobInfo(t, h, res[i].ID).Args, &args); err != nil || args.Seq != i {
			t.Errorf("result %d is the job of item %d (%v)", i, args.Seq, err)
		}
	}
	h.checkSemaphores()
}

// testBatchManyTxOverlappingKeys: two clients enqueue batches over the
// same keys, listed in opposite orders, each in transactions of the
// caller's, while workers run the jobs. Keys are locked in sorted order,
// so no transaction meets a deadlock (no ErrConflict), and no key ever
// runs more than its limit (watched from the runs' start and end).
func testBatchManyTxOverlappingKeys(t *testing.T, h *harness) {
	ctx := context.Background()
	const rounds = 8
	keys := []string{"o1", "o2", "o3", "o4", "o5", "o6"}
	clients := []*bq.Client{h.client, h.clientWith(testConfig())}
	var wg sync.WaitGroup
	var ids sync.Map
	for g, c := range clients {
		order := slices.Clone(keys)
		if g == 1 {
			slices.Reverse(order)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				var args []Args
				for _, k := range order {
					args = append(args, Args{Test: h.test, Key: k, Seq: g*1000 + r, SleepMS: 5},
						Args{Test: h.test, Key: k, Seq: g*1000 + r, SleepMS: 5})
				}
				tx, commit := h.beginTxOn(ctx, c)
				res, err := limit2Job.EnqueueManyTx(ctx, c, tx, args)
				if err == nil {
					// The caller's own write in the same transaction.
					_, err = unkeyedJob.EnqueueTx(ctx, c, tx, Args{Test: h.test, Seq: -1})
				}
				if err == nil {
					err = commit()
				}
				if err != nil {
					t.Errorf("client %d round %d: %v", g, r, err)
					return
				}
				for _, x := range res {
					ids.Store(x.ID, true)
				}
			}
		}()
	}
	worker(h, 8)
	wg.Wait()
	if t.Failed() {
		return
	}
	total := len(clients) * rounds * (2*len(keys) + 1)
	rec := h.recorder()
	h.eventually(60*time.Second, fmt.Sprintf("%d runs", total), func() bool { return len(rec.all()) >= total })
	for key, n := range maxOverlap(rec.all()) {
		if key != "" && n > 2 {
			t.Errorf("key %s ran %d jobs at once, over its limit 2", key, n)
		}
	}
	if got := len(rec.all()); got != total {
		t.Errorf("%d runs, want %d", got, total)
	}
	h.checkSemaphores()
}

// testBatchTxWakesEachQueueAtCommit: a batch in a caller's transaction
// with ready jobs in two queues wakes the worker process of each queue
// (both poll only every 10 s) once the transaction commits, not before.
// On PostgreSQL and MySQL that is the notification EnqueueBatchTx makes in
// the transaction; SQLite's listeners see every commit to the file.
func testBatchTxWakesEachQueue(t *testing.T, h *harness) {
	ctx := context.Background()
	workers := []*exec.Cmd{
		h.spawn("workers", 2, "BQ_POLL=10s", "BQ_QUEUE=wake"),
		h.spawn("workers", 2, "BQ_POLL=10s", "BQ_QUEUE=wake2"),
	}
	defer h.stop(workers...)
	h.eventually(20*time.Second, "the workers to register", func() bool {
		return h.count(`SELECT count(*) FROM bq_processes`) == 2
	})
	time.Sleep(500 * time.Millisecond) // their first claims have come and gone
	tx, commit := h.beginTx(ctx)
	res, err := h.client.EnqueueBatchTx(ctx, tx, []bq.Item{
		unkeyedJob.Item(Args{Test: h.test, Seq: 1}, bq.Queue("wake")),
		limit1Job.Item(Args{Test: h.test, Key: "w", Seq: 2}, bq.Queue("wake2")),
		limit1Job.Item(Args{Test: h.test, Key: "w", Seq: 3}, bq.Queue("wake2")),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[2].State != bq.StateBlocked {
		t.Fatalf("the second job of limit-1 key w: %s, want blocked", res[2].State)
	}
	time.Sleep(300 * time.Millisecond)
	if n := h.count(`SELECT count(*) FROM test_runs`); n != 0 {
		t.Fatalf("%d jobs started before the transaction committed", n)
	}
	sent := time.Now()
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	for _, r := range res[:2] {
		started, ok := h.startedAt(r.ID, 5*time.Second)
		if !ok {
			t.Errorf("job %d did not start within 5s of the commit: its queue's worker was not woken", r.ID)
			continue
		}
		t.Logf("job %d started %s after the commit", r.ID, started.Sub(sent).Round(time.Millisecond))
	}
}

// testBatchItemsUniqueAndMetadata: batch items take WithMetadata, WithTags
// and uniqueness as Enqueue does: metadata and tags are stored, and of two
// unique twins in one batch the second is a duplicate of the first.
func testBatchItemsUniqueAndMetadata(t *testing.T, h *harness) {
	ctx := context.Background()
	twin := Args{Test: h.test, Key: "u", Seq: 1}
	res, err := h.client.EnqueueBatch(ctx, []bq.Item{
		unkeyedJob.Item(Args{Test: h.test}, bq.WithMetadata(map[string]string{"tenant": "acme"}), bq.WithTags("nightly")),
		uniqueArgsJob.Item(twin),
		uniqueArgsJob.Item(twin, bq.Priority(3)),
	})
	if err != nil {
		t.Fatal(err)
	}
	info := jobInfo(t, h, res[0].ID)
	if info.Metadata["tenant"] != "acme" || !slices.Equal(info.Tags, []string{"nightly"}) {
		t.Errorf("metadata %v, tags %v; want tenant=acme, [nightly]", info.Metadata, info.Tags)
	}
	if res[1].Duplicate || res[1].ID == 0 || !res[2].Duplicate || res[2].DuplicateOf != res[1].ID {
		t.Errorf("unique twins in one batch: %+v, %+v; want the second a duplicate of the first", res[1], res[2])
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs`); n != 2 {
		t.Errorf("%d jobs stored, want 2", n)
	}
}

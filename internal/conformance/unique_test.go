package conformance

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq"
	bqmysql "github.com/bqueue/bq/drivers/mysql"
	"github.com/bqueue/bq/drivers/postgres"
	"github.com/bqueue/bq/internal/driver"
)

var (
	// uniqueArgsJob is unique by its args on its definition.
	uniqueArgsJob = bq.Define("c.uniqueargs", behave, bq.JobOptions[Args]{Unique: &bq.Unique{ByArgs: true}})
	// uniqueKeyedJob is unique by its args and limited to one per key.
	uniqueKeyedJob = bq.Define("c.uniquekeyed", behave, bq.JobOptions[Args]{
		Unique:      &bq.Unique{ByArgs: true},
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 1}})
)

var _ = register(
	scenario{"UniqueConcurrentProcesses", testUniqueConcurrentProcesses},
	scenario{"UniqueByArgsQueuePeriodStates", testUniqueByParts},
	scenario{"UniqueWithinOneEnqueueMany", testUniqueWithinOneCall},
	scenario{"UniqueInTx", testUniqueInTx},
	scenario{"UniqueInTxSeesLaterCommits", testUniqueInTxSeesLaterCommits},
	scenario{"UniqueDuplicateTakesNoSlot", testUniqueDuplicateTakesNoSlot},
	scenario{"UniqueRefusesBadSpecs", testUniqueRefusesBadSpecs},
	scenario{"DiscardNamesHolder", testDiscardNamesHolder},
)

// attempt is one enqueue of a concurrent run: its args and options, and
// the group of attempts that share its unique key.
type attempt struct {
	args  Args
	opts  []bq.EnqueueOption
	group string
}

// enqueueAll runs every attempt at once, spread over the clients, and
// returns the results of each group.
func enqueueAll(t *testing.T, h *harness, clients []*bq.Client, job *bq.Job[Args], attempts []attempt) map[string][]bq.EnqueueResult {
	t.Helper()
	var mu sync.Mutex
	out := map[string][]bq.EnqueueResult{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, a := range attempts {
		c := clients[i%len(clients)]
		a.args.Test = h.test
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := job.Enqueue(context.Background(), c, a.args, a.opts...)
			if err != nil {
				t.Errorf("enqueue %+v: %v", a.args, err)
				return
			}
			mu.Lock()
			out[a.group] = append(out[a.group], res)
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// same is n attempts of one unique key.
func same(n int, group string, a Args, opts ...bq.EnqueueOption) []attempt {
	out := make([]attempt, n)
	for i := range out {
		out[i] = attempt{args: a, opts: opts, group: group}
	}
	return out
}

// oneInserted checks that exactly one of results was stored and every
// other is a duplicate of it, and returns its id.
func oneInserted(t *testing.T, group string, results []bq.EnqueueResult) int64 {
	t.Helper()
	var ids []int64
	for _, r := range results {
		if r.ID != 0 {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("%s: %d of %d concurrent unique enqueues inserted a job (%v), want exactly one", group, len(ids), len(results), ids)
	}
	for _, r := range results {
		if r.ID == 0 && (!r.Duplicate || r.DuplicateOf != ids[0] || !strings.Contains(r.Reason, fmt.Sprint(ids[0]))) {
			t.Errorf("%s: result %+v, want a duplicate of job %d, named in its reason", group, r, ids[0])
		}
	}
	return ids[0]
}

// testUniqueConcurrentProcesses: two clients with pools of their own, as
// two processes have, enqueue unique jobs from many goroutines at once:
// of each unique key exactly one is stored, and every other result names
// it; other args, another queue (ByQueue) or another period (ByPeriod)
// are other keys.
func testUniqueConcurrentProcesses(t *testing.T, h *harness) {
	clients := []*bq.Client{h.client, h.clientWith(testConfig())}
	id := oneInserted(t, "same args", enqueueAll(t, h, clients, uniqueArgsJob, same(16, "same", Args{Key: "same"}))["same"])
	if n := h.count("SELECT count(*) FROM bq_jobs"); n != 1 {
		t.Errorf("%d job rows after the concurrent enqueues, want 1 (job %d)", n, id)
	}

	var mixed []attempt
	for i := range 8 { // other args: every one stored
		mixed = append(mixed, attempt{args: Args{Key: "distinct", Seq: i}, group: fmt.Sprint("args ", i)})
	}
	byQueue := bq.WithUnique(bq.Unique{ByArgs: true, ByQueue: true})
	mixed = append(mixed, same(6, "queue qa", Args{Key: "q"}, byQueue, bq.Queue("qa"))...)
	mixed = append(mixed, same(6, "queue qb", Args{Key: "q"}, byQueue, bq.Queue("qb"))...)
	hour := time.Now().UTC().Truncate(time.Hour).Add(3 * time.Hour)
	byPeriod := bq.WithUnique(bq.Unique{ByArgs: true, ByPeriod: time.Hour})
	mixed = append(mixed, same(6, "hour 1", Args{Key: "p"}, byPeriod, bq.At(hour.Add(time.Minute)))...)
	mixed = append(mixed, same(6, "hour 2", Args{Key: "p"}, byPeriod, bq.At(hour.Add(61*time.Minute)))...)
	groups := enqueueAll(t, h, clients, uniqueArgsJob, mixed)
	for group, results := range groups {
		oneInserted(t, group, results)
	}
	if len(groups) != 12 {
		t.Errorf("%d groups of results, want 12", len(groups))
	}

	// Keyed and unique, from both clients: one stored, holding the key.
	keyed := oneInserted(t, "keyed", enqueueAll(t, h, clients, uniqueKeyedJob, same(16, "keyed", Args{Key: "k"}))["keyed"])
	if s := h.state(keyed); s != bq.StateReady {
		t.Errorf("the keyed unique job is %s, want ready", s)
	}
	h.checkSemaphores()
}

// testUniqueByParts: each field of Unique narrows the key: other args,
// another queue (with ByQueue), another period are other keys; ByStates
// decides whether a completed job still counts.
func testUniqueByParts(t *testing.T, h *harness) {
	byArgs := bq.WithUnique(bq.Unique{ByArgs: true})
	first := enqueue(t, h, unkeyedJob, Args{Seq: 1}, byArgs)
	if first.ID == 0 || first.Duplicate {
		t.Fatalf("first unique enqueue: %+v, want stored", first)
	}
	other := enqueue(t, h, unkeyedJob, Args{Seq: 2}, byArgs)
	if other.ID == 0 {
		t.Errorf("other args, ByArgs: %+v, want stored", other)
	}
	plain := enqueue(t, h, unkeyedJob, Args{Seq: 1})
	if plain.ID == 0 {
		t.Errorf("the same args, not unique: %+v, want stored", plain)
	}
	keys := map[int64]string{}
	for _, id := range []int64{first.ID, other.ID, plain.ID} {
		e, err := h.client.Explain(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		keys[id] = e.UniqueKey
	}
	if len(keys[first.ID]) != 64 || len(keys[other.ID]) != 64 || keys[first.ID] == keys[other.ID] || keys[plain.ID] != "" {
		t.Errorf("Explain's unique keys %v: want two distinct SHA-256s for jobs %d and %d, none for plain job %d", keys, first.ID, other.ID, plain.ID)
	}
	// Without ByQueue the queue is not part of the key.
	if dup := enqueue(t, h, unkeyedJob, Args{Seq: 1}, byArgs, bq.Queue("elsewhere")); !dup.Duplicate || dup.DuplicateOf != first.ID {
		t.Errorf("same args on another queue, no ByQueue: %+v, want a duplicate of %d", dup, first.ID)
	}
	byQueue := bq.WithUnique(bq.Unique{ByArgs: true, ByQueue: true})
	qa := enqueue(t, h, unkeyedJob, Args{Seq: 3}, byQueue, bq.Queue("qa"))
	qb := enqueue(t, h, unkeyedJob, Args{Seq: 3}, byQueue, bq.Queue("qb"))
	if qa.ID == 0 || qb.ID == 0 {
		t.Errorf("ByQueue on two queues: %+v %+v, want both stored", qa, qb)
	}
	if dup := enqueue(t, h, unkeyedJob, Args{Seq: 3}, byQueue, bq.Queue("qa")); dup.DuplicateOf != qa.ID || dup.State != bq.StateReady {
		t.Errorf("ByQueue, same queue again: %+v, want a duplicate of ready job %d", dup, qa.ID)
	}

	// ByPeriod: the period of the scheduled time, floored in UTC.
	hour := time.Now().UTC().Truncate(time.Hour).Add(3 * time.Hour)
	byPeriod := bq.WithUnique(bq.Unique{ByPeriod: time.Hour})
	p1 := enqueue(t, h, onceJob, Args{Seq: 4}, byPeriod, bq.At(hour.Add(10*time.Minute)))
	p1dup := enqueue(t, h, onceJob, Args{Seq: 5}, byPeriod, bq.At(hour.Add(50*time.Minute)))
	p2 := enqueue(t, h, onceJob, Args{Seq: 6}, byPeriod, bq.At(hour.Add(70*time.Minute)))
	if p1.ID == 0 || p1.State != bq.StateScheduled || p2.ID == 0 {
		t.Errorf("ByPeriod, two hours: %+v %+v, want both stored scheduled", p1, p2)
	}
	if !p1dup.Duplicate || p1dup.DuplicateOf != p1.ID || p1dup.State != bq.StateScheduled {
		t.Errorf("ByPeriod, same hour: %+v, want a duplicate of scheduled job %d", p1dup, p1.ID)
	}

	// ByStates: a completed job counts by default, not when left out.
	done := enqueue(t, h, uniqueArgsJob, Args{Seq: 7})
	worker(h, 2)
	h.waitState(done.ID, bq.StateCompleted)
	if dup := enqueue(t, h, uniqueArgsJob, Args{Seq: 7}); !dup.Duplicate || dup.DuplicateOf != done.ID || dup.State != bq.StateCompleted {
		t.Errorf("after completion, default ByStates: %+v, want a duplicate of completed job %d", dup, done.ID)
	}
	live := bq.WithUnique(bq.Unique{ByArgs: true, ByStates: []bq.JobState{bq.StateScheduled, bq.StateReady, bq.StateBlocked, bq.StateRunning}})
	if again := enqueue(t, h, uniqueArgsJob, Args{Seq: 7}, live); again.ID == 0 || again.Duplicate {
		t.Errorf("after completion, ByStates without completed: %+v, want stored", again)
	}
	// A failed job does not count by default; it does when ByStates names it.
	failing := enqueue(t, h, onceJob, Args{Seq: 8, Mode: "fail"}, byArgs)
	h.waitState(failing.ID, bq.StateFailed)
	withFailed := bq.WithUnique(bq.Unique{ByArgs: true, ByStates: []bq.JobState{bq.StateFailed}})
	if dup := enqueue(t, h, onceJob, Args{Seq: 8, Mode: "fail"}, withFailed); dup.DuplicateOf != failing.ID || dup.State != bq.StateFailed {
		t.Errorf("beside failed job %d, ByStates failed: %+v, want a duplicate of it", failing.ID, dup)
	}
	beside := enqueue(t, h, onceJob, Args{Seq: 8, Mode: "fail"}, byArgs)
	if beside.ID == 0 || beside.Duplicate {
		t.Errorf("beside failed job %d, default ByStates: %+v, want stored", failing.ID, beside)
	}
	// RetryFailed checks no uniqueness: the failed job runs again beside
	// the newer one (docs/concurrency.md, Unique jobs).
	if state, err := h.client.RetryFailed(context.Background(), failing.ID); err != nil || state != bq.StateReady {
		t.Errorf("RetryFailed beside job %d of its unique key: %s, %v; want ready", beside.ID, state, err)
	}
}

// testUniqueWithinOneCall: of two items with one unique key in one
// EnqueueMany, the second is a duplicate of the first.
func testUniqueWithinOneCall(t *testing.T, h *harness) {
	args := []Args{{Test: h.test, Seq: 1}, {Test: h.test, Seq: 2}, {Test: h.test, Seq: 1}}
	res, err := uniqueArgsJob.EnqueueMany(context.Background(), h.client, args)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].ID == 0 || res[1].ID == 0 {
		t.Fatalf("distinct items: %+v, want both stored", res[:2])
	}
	if !res[2].Duplicate || res[2].DuplicateOf != res[0].ID || res[2].State != bq.StateReady {
		t.Errorf("third item: %+v, want a duplicate of the first, job %d, ready", res[2], res[0].ID)
	}
	if n := h.count("SELECT count(*) FROM bq_jobs"); n != 2 {
		t.Errorf("%d job rows, want 2", n)
	}
}

// testUniqueInTx: a unique job enqueued in a transaction that rolls back
// leaves nothing to duplicate; one that commits does.
func testUniqueInTx(t *testing.T, h *harness) {
	ctx := context.Background()
	a := Args{Test: h.test, Key: "tx"}
	tx, _ := h.beginTx(ctx)
	res, err := uniqueArgsJob.EnqueueTx(ctx, h.client, tx, a)
	if err != nil || res.ID == 0 {
		t.Fatalf("EnqueueTx: %+v, %v; want stored", res, err)
	}
	rollback(t, tx)
	after := enqueue(t, h, uniqueArgsJob, a)
	if after.ID == 0 || after.Duplicate {
		t.Fatalf("enqueue after the rollback: %+v, want stored", after)
	}

	b := Args{Test: h.test, Key: "tx2"}
	tx, commit := h.beginTx(ctx)
	res, err = uniqueArgsJob.EnqueueTx(ctx, h.client, tx, b)
	if err != nil || res.ID == 0 {
		t.Fatalf("EnqueueTx: %+v, %v; want stored", res, err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	if dup := enqueue(t, h, uniqueArgsJob, b); !dup.Duplicate || dup.DuplicateOf != res.ID {
		t.Errorf("enqueue after the commit: %+v, want a duplicate of %d", dup, res.ID)
	}
}

// rollback ends a transaction of beginTx without committing it.
func rollback(t *testing.T, tx bq.Tx) {
	t.Helper()
	_, raw, _ := driver.UserTxOf(tx)
	var err error
	switch raw := raw.(type) {
	case pgx.Tx:
		err = raw.Rollback(context.Background())
	case *sql.Tx:
		err = raw.Rollback()
	default:
		t.Fatalf("no rollback for %T", raw)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// testUniqueInTxSeesLaterCommits: a caller's transaction whose snapshot
// predates another process's commit of the same unique job never inserts
// a second one. PostgreSQL refuses the enqueue at REPEATABLE READ (and
// the transaction stays usable); MySQL's locking read sees the commit
// even at REPEATABLE READ.
func testUniqueInTxSeesLaterCommits(t *testing.T, h *harness) {
	ctx := context.Background()
	a := Args{Test: h.test, Key: "snap"}
	switch d := h.client.Driver().(type) {
	case *postgres.Driver:
		tx, err := d.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM bq_jobs").Scan(&n); err != nil {
			t.Fatal(err)
		}
		other := enqueue(t, h, uniqueArgsJob, a)
		res, err := uniqueArgsJob.EnqueueTx(ctx, h.client, postgres.Tx(tx), a)
		if err == nil || !strings.Contains(err.Error(), "READ COMMITTED") {
			t.Fatalf("EnqueueTx at REPEATABLE READ: %+v, %v; want refused, naming READ COMMITTED", res, err)
		}
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM bq_jobs").Scan(&n); err != nil {
			t.Errorf("the caller's transaction after the refusal: %v, want usable", err)
		}
		if got := h.count("SELECT count(*) FROM bq_jobs"); got != 1 {
			t.Errorf("%d job rows, want only job %d", got, other.ID)
		}
	case *bqmysql.Driver:
		tx, err := d.DB().BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM bq_jobs").Scan(&n); err != nil {
			t.Fatal(err)
		}
		other := enqueue(t, h, uniqueArgsJob, a)
		res, err := uniqueArgsJob.EnqueueTx(ctx, h.client, bqmysql.Tx(tx), a)
		if err != nil || !res.Duplicate || res.DuplicateOf != other.ID {
			t.Fatalf("EnqueueTx at REPEATABLE READ after another's commit: %+v, %v; want a duplicate of %d", res, err, other.ID)
		}
	default:
		t.Skip("SQLite: a transaction on the driver's DB begins IMMEDIATE, so nothing commits under it")
	}
}

// testUniqueDuplicateTakesNoSlot: a duplicate of a keyed job changes
// neither its key's semaphore nor its blocked line.
func testUniqueDuplicateTakesNoSlot(t *testing.T, h *harness) {
	holder := enqueue(t, h, uniqueKeyedJob, Args{Key: "n", Seq: 1})
	waiting := enqueue(t, h, uniqueKeyedJob, Args{Key: "n", Seq: 2})
	if holder.State != bq.StateReady || waiting.State != bq.StateBlocked {
		t.Fatalf("holder %+v, second %+v: want ready, then blocked", holder, waiting)
	}
	for _, want := range []bq.EnqueueResult{holder, waiting} {
		seq := 1
		if want.ID == waiting.ID {
			seq = 2
		}
		dup := enqueue(t, h, uniqueKeyedJob, Args{Key: "n", Seq: seq})
		if !dup.Duplicate || dup.DuplicateOf != want.ID || dup.State != want.State {
			t.Errorf("duplicate of job %d: %+v, want a duplicate of it in %s", want.ID, dup, want.State)
		}
	}
	if n := h.count("SELECT count(*) FROM bq_blocked_executions"); n != 1 {
		t.Errorf("%d blocked rows, want 1: a duplicate took a place in the line", n)
	}
	if n := h.count("SELECT blocked FROM bq_semaphores"); n != 1 {
		t.Errorf("the semaphore counts %d blocked, want 1", n)
	}
	if n := h.count("SELECT value FROM bq_semaphores"); n != 0 {
		t.Errorf("the semaphore has %d free, want 0 (one holder, limit 1)", n)
	}
	h.checkSemaphores()
}

// testUniqueRefusesBadSpecs: a Unique naming nothing, a bad period, an
// unknown or repeated state: each refused before the database, naming the
// field, with nothing stored.
func testUniqueRefusesBadSpecs(t *testing.T, h *harness) {
	for _, c := range []struct {
		u    bq.Unique
		want string
	}{
		{bq.Unique{}, "ByArgs, ByPeriod, ByQueue or ByStates"},
		{bq.Unique{ByPeriod: -time.Second}, "ByPeriod"},
		{bq.Unique{ByPeriod: 500 * time.Millisecond}, "1s or more"},
		{bq.Unique{ByArgs: true, ByStates: []bq.JobState{"done"}}, `"done", no job state`},
		{bq.Unique{ByArgs: true, ByStates: []bq.JobState{bq.StateReady, bq.StateReady}}, "repeats"},
	} {
		_, err := unkeyedJob.Enqueue(context.Background(), h.client, Args{Test: h.test}, bq.WithUnique(c.u))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("WithUnique(%+v): %v, want an error naming %q", c.u, err, c.want)
		}
	}
	bad := bq.Define("c.uniquebad", behave, bq.JobOptions[Args]{Unique: &bq.Unique{}})
	if err := bad.Err(); err == nil || !strings.Contains(err.Error(), "Unique sets no field") {
		t.Errorf("Define with an empty Unique: %v, want refused", err)
	}
	if n := h.count("SELECT count(*) FROM bq_jobs"); n != 0 {
		t.Errorf("%d jobs stored by refused enqueues, want 0", n)
	}
}

// testDiscardNamesHolder: a discarded job's result names a job holding
// its key, ready or running, and so does a discard for a full backlog.
func testDiscardNamesHolder(t *testing.T, h *harness) {
	holder := enqueue(t, h, discard1Job, Args{Key: "d", SleepMS: 3000})
	res := enqueue(t, h, discard1Job, Args{Key: "d"})
	if res.State != bq.StateDiscarded || res.HeldBy != holder.ID || !strings.Contains(res.Reason, fmt.Sprintf("job %d", holder.ID)) {
		t.Errorf("discard beside ready job %d: %+v, want HeldBy it, named in Reason", holder.ID, res)
	}
	worker(h, 2)
	h.waitState(holder.ID, bq.StateRunning)
	if res := enqueue(t, h, discard1Job, Args{Key: "d"}); res.HeldBy != holder.ID {
		t.Errorf("discard beside running job %d: %+v, want HeldBy it", holder.ID, res)
	}

	first := enqueue(t, h, backlogJob, Args{Key: "b", SleepMS: 3000}, bq.Queue("idle"))
	enqueue(t, h, backlogJob, Args{Key: "b"}, bq.Queue("idle"))
	enqueue(t, h, backlogJob, Args{Key: "b"}, bq.Queue("idle"))
	if over := enqueue(t, h, backlogJob, Args{Key: "b"}, bq.Queue("idle")); over.State != bq.StateDiscarded || over.HeldBy != first.ID {
		t.Errorf("discard for a full backlog: %+v, want HeldBy the holder, job %d", over, first.ID)
	}
}

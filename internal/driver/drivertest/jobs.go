package drivertest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/migrations"
)

// Jobs: inserting them into their state's table, ending their attempts,
// deleting them, and reading them back.
var _ = add("jobs",
	test{"InsertJobsRoundTrip", func(t *testing.T, f *fixture) {
		now := T0.Add(-time.Minute)
		in := []*driver.NewJob{
			{Kind: "k.ready", Queue: "q1", Args: []byte(`{"a":1}`), Priority: 3, MaxAttempts: 5, ScheduledAt: now,
				State: driver.StateReady, Limit: driver.Limit{Key: "g/ready", To: 2, Duration: 90 * time.Second, OnConflict: driver.Discard, MaxBlocked: 7}},
			{Kind: "k.sched", Queue: "q2", Args: []byte(`{"b":"x"}`), Priority: -1, MaxAttempts: 1,
				ScheduledAt: T0.Add(time.Hour), State: driver.StateScheduled},
			{Kind: "k.blocked", Queue: "q1", Args: []byte(`[1,2]`), MaxAttempts: 2, ScheduledAt: now, State: driver.StateBlocked,
				Limit: driver.Limit{Key: "g/blocked", Duration: time.Minute}},
		}
		ids := f.insert(now, in...)
		if !slices.IsSorted(ids) || ids[0] == ids[1] || ids[1] == ids[2] || ids[0] <= 0 {
			t.Fatalf("ids %v: want distinct, positive, rising in input order", ids)
		}
		for i, want := range []driver.JobState{driver.StateReady, driver.StateScheduled, driver.StateBlocked} {
			got := f.get(ids[i])
			j := in[i]
			if got.State != want || got.Kind != j.Kind || got.Queue != j.Queue || !sameJSON(got.Args, j.Args) ||
				got.Priority != j.Priority || got.MaxAttempts != j.MaxAttempts || got.Attempt != 0 || got.Limit != j.Limit {
				t.Errorf("job %d read back as %+v in %q; want %+v in %q", i, got.Job, got.State, *j, want)
			}
			f.sameTime("ScheduledAt", got.ScheduledAt, j.ScheduledAt)
			f.sameTime("CreatedAt", got.CreatedAt, now)
			if got.FinishedAt != nil || got.LastError != "" {
				t.Errorf("new job %d: finished %v, error %q", i, got.FinishedAt, got.LastError)
			}
		}
		f.must(f.ex().JobInsertMany(f.ctx, now, nil))
	}},
	test{"InsertJobsKeyedBesidePlain", func(t *testing.T, f *fixture) {
		// The batch a keyed EnqueueMany writes before admission: keyed
		// jobs due now pending (no execution row yet), due later
		// scheduled, plain ones beside them ready or scheduled, every
		// limit field kept. (PostgreSQL writes it with its own lean
		// statement.)
		now := T0.Add(-time.Minute)
		later := T0.Add(time.Hour)
		lim := func(key string) driver.Limit {
			return driver.Limit{Key: key, To: 3, Duration: 90 * time.Second, OnConflict: driver.Discard, MaxBlocked: 7}
		}
		in := []*driver.NewJob{
			{Kind: "k.pending", Queue: "q1", Args: []byte(`{"a":1}`), Priority: 2, MaxAttempts: 4, ScheduledAt: now,
				State: driver.StatePending, Limit: lim("g/a")},
			{Kind: "k.plain", Queue: "q2", Args: []byte(`{}`), MaxAttempts: 1, ScheduledAt: now, State: driver.StateReady},
			{Kind: "k.later", Queue: "q1", Args: []byte(`[1]`), Priority: -1, MaxAttempts: 2, ScheduledAt: later,
				State: driver.StateScheduled, Limit: lim("g/b")},
			{Kind: "k.plainlater", Queue: "q2", Args: []byte(`{}`), MaxAttempts: 1, ScheduledAt: later, State: driver.StateScheduled},
			{Kind: "k.pending2", Queue: "q1", Args: []byte(`{}`), MaxAttempts: 1, ScheduledAt: now,
				State: driver.StatePending, Limit: driver.Limit{Key: "g/a", To: 1, Duration: time.Minute}},
		}
		ids := f.insert(now, in...)
		if !slices.IsSorted(ids) || ids[0] <= 0 || len(slices.Compact(slices.Clone(ids))) != len(ids) {
			t.Fatalf("ids %v: want distinct, positive, rising in input order", ids)
		}
		for i, j := range in {
			got := f.get(ids[i])
			if got.Kind != j.Kind || got.Queue != j.Queue || !sameJSON(got.Args, j.Args) || got.Priority != j.Priority ||
				got.MaxAttempts != j.MaxAttempts || got.Limit != j.Limit {
				t.Errorf("job %d read back as %+v; want %+v", i, got.Job, *j)
			}
			f.sameTime("ScheduledAt", got.ScheduledAt, j.ScheduledAt)
		}
		f.wantState(driver.StateReady, ids[1])
		f.wantState(driver.StateScheduled, ids[2], ids[3])
		for _, i := range []int{0, 4} {
			// No execution row and not finished: GetJob names no state.
			if st := f.state(ids[i]); st != "" {
				t.Errorf("pending keyed job %d is %q: admission writes its execution row, not the insert", i, st)
			}
		}
		if hc, err := f.ex().HolderCount(f.ctx, "g/a"); err != nil || hc.Holders != 0 || hc.Blocked != 0 {
			t.Errorf("CountHolders(g/a) = %+v, %v; want nothing held or blocked before admission", hc, err)
		}
	}},
	test{"InsertExecutionsPutsJobsInTheirTable", func(t *testing.T, f *fixture) {
		// Jobs out of every table (as ScheduledTakeDue leaves them), then
		// put back by ExecutionInsertMany.
		ids := f.insert(T0, job("q", dueAt(T0)), job("q", dueAt(T0)), job("q", keyed("g/k", 1), dueAt(T0)))
		jobs, err := f.ex().ScheduledTakeDue(f.ctx, T0, 10)
		f.must(err)
		if len(jobs) != 3 {
			t.Fatalf("took %d due jobs, want 3", len(jobs))
		}
		at := T0.Add(time.Second)
		f.tx(func(ex driver.Executor) error {
			if err := ex.ExecutionInsertMany(f.ctx, driver.StateReady, []driver.Execution{{JobID: ids[0], Queue: "q", At: at}}); err != nil {
				return err
			}
			if err := ex.ExecutionInsertMany(f.ctx, driver.StateScheduled, []driver.Execution{{JobID: ids[1], Queue: "q", At: at.Add(time.Hour)}}); err != nil {
				return err
			}
			return ex.ExecutionInsertMany(f.ctx, driver.StateBlocked, []driver.Execution{{JobID: ids[2], Queue: "q", Key: "g/k", At: at}})
		})
		f.wantState(driver.StateReady, ids[0])
		f.wantState(driver.StateScheduled, ids[1])
		f.wantState(driver.StateBlocked, ids[2])
		x0, x1, x2 := f.execution(ids[0]), f.execution(ids[1]), f.execution(ids[2])
		f.sameTime("ready since", x0.ReadySince, at)
		f.sameTime("due at", x1.DueAt, at.Add(time.Hour))
		f.sameTime("blocked since", x2.BlockedSince, at)
		if hc, err := f.ex().HolderCount(f.ctx, "g/k"); err != nil || hc.Blocked != 1 {
			t.Errorf("CountHolders(g/k) blocked = %d, %v; want the blocked row under its key", hc.Blocked, err)
		}
	}},
	test{"FinishJobCompletesOrDiscards", func(t *testing.T, f *fixture) {
		// As the engine finishes them: a run whose claim it deleted, and a
		// scheduled job whose key was full when it came due.
		ids := f.insert(T0, job("q"), job("q", dueAt(T0)))
		c := f.claim(f.ex(), "q", 1, 0, T0)[0]
		if _, err := f.ex().ScheduledTakeDue(f.ctx, T0, 1); err != nil {
			t.Fatal(err)
		}
		end := T0.Add(time.Minute)
		f.tx(func(ex driver.Executor) error {
			if _, err := ex.ClaimDelete(f.ctx, c.ID, c.Fence); err != nil {
				return err
			}
			if err := ex.JobFinish(f.ctx, ids[0], end, false); err != nil {
				return err
			}
			return ex.JobFinish(f.ctx, ids[1], end, true)
		})
		done, dropped := f.get(ids[0]), f.get(ids[1])
		if done.State != driver.StateCompleted || done.Attempt != 1 || done.FinishedAt == nil || !done.FinishedAt.Equal(end) {
			t.Errorf("completed job: %q, attempt %d, finished %v; want completed, attempt 1, finished %v", done.State, done.Attempt, done.FinishedAt, end)
		}
		if dropped.State != driver.StateDiscarded || dropped.Attempt != 0 || dropped.FinishedAt == nil || !dropped.FinishedAt.Equal(end) {
			t.Errorf("discarded job: %q, attempt %d, finished %v; want discarded, no attempt, finished %v", dropped.State, dropped.Attempt, dropped.FinishedAt, end)
		}
	}},
	test{"RecordErrorAndInsertFailed", func(t *testing.T, f *fixture) {
		id := f.insert(T0, job("q", keyed("g/k", 1)))[0]
		c := f.claim(f.ex(), "q", 1, 0, T0)[0]
		at := T0.Add(time.Minute)
		f.tx(func(ex driver.Executor) error {
			if _, err := ex.ClaimDelete(f.ctx, c.ID, c.Fence); err != nil {
				return err
			}
			if err := ex.JobFailAttempt(f.ctx, id, "boom"); err != nil {
				return err
			}
			return ex.FailedInsert(f.ctx, id, "boom: for good", at)
		})
		info := f.get(id)
		if info.State != driver.StateFailed || info.Attempt != 1 || info.LastError != "boom" {
			t.Errorf("failed job: %q, attempt %d, last error %q; want failed, attempt 1, \"boom\"", info.State, info.Attempt, info.LastError)
		}
		failed, err := f.ex().FailedList(f.ctx, 0, 10)
		f.must(err)
		if len(failed) != 1 || failed[0].JobID != id || failed[0].Error != "boom: for good" || failed[0].Key != "g/k" ||
			failed[0].Queue != "q" || failed[0].Attempt != 1 || !failed[0].FailedAt.Equal(at) {
			t.Errorf("ListFailed = %+v; want job %d of g/k failed at %v with its message", failed, id, at)
		}
		ok, err := f.ex().FailedDelete(f.ctx, id)
		f.must(err)
		again, err := f.ex().FailedDelete(f.ctx, id)
		f.must(err)
		if !ok || again {
			t.Errorf("DeleteFailed: %v then %v; want true, then false once the job is not failed", ok, again)
		}
		if s := f.state(id); s == driver.StateFailed {
			t.Errorf("job still %q after DeleteFailed", s)
		}
	}},
	test{"DeleteJobs", func(t *testing.T, f *fixture) {
		ids := f.insert(T0, job("q"), job("q", keyed("g/k", 1), blocked), job("q"))
		f.tx(func(ex driver.Executor) error { return ex.JobDeleteMany(f.ctx, ids[:2]) })
		for i, id := range ids {
			_, ok, err := f.ex().JobGet(f.ctx, id)
			f.must(err)
			if ok != (i == 2) {
				t.Errorf("job %d exists: %v after deleting the first two", i, ok)
			}
		}
		// Their ready and blocked rows go with them (on PostgreSQL they
		// have no foreign key: the delete takes them).
		counts, err := f.ex().JobCountByQueue(f.ctx)
		f.must(err)
		if len(counts) != 1 || counts[0].Ready != 1 || counts[0].Blocked != 0 {
			t.Errorf("CountByQueue after deleting a ready and a blocked job of three = %+v, want 1 ready, none blocked", counts)
		}
	}},
	test{"GetJobMissing", func(t *testing.T, f *fixture) {
		if info, ok, err := f.ex().JobGet(f.ctx, 12345); ok || err != nil || info != nil {
			t.Errorf("GetJob of a missing job = %v, %v, %v; want nil, false, nil", info, ok, err)
		}
	}},
	test{"CountByQueue", func(t *testing.T, f *fixture) {
		f.insert(T0, job("a"), job("a"), job("a"), job("a", dueAt(T0.Add(time.Hour))),
			job("b", keyed("g/k", 1), blocked), job("b", keyed("g/k", 1), blocked), job("c"))
		f.claim(f.ex(), "a", 1, 0, T0)
		c := f.claim(f.ex(), "c", 1, 0, T0)[0]
		f.tx(func(ex driver.Executor) error {
			if _, err := ex.ClaimDelete(f.ctx, c.ID, c.Fence); err != nil {
				return err
			}
			return ex.FailedInsert(f.ctx, c.ID, "x", T0)
		})
		got, err := f.ex().JobCountByQueue(f.ctx)
		f.must(err)
		want := []driver.QueueCounts{
			{Queue: "a", Ready: 2, Running: 1, Scheduled: 1},
			{Queue: "b", Blocked: 2},
			{Queue: "c", Failed: 1},
		}
		if !slices.Equal(got, want) {
			t.Errorf("CountByQueue = %+v, want %+v", got, want)
		}
	}},
	test{"SchemaVersionIsTheLatest", func(t *testing.T, f *fixture) {
		v, err := f.ex().SchemaVersion(f.ctx)
		f.must(err)
		if want := migrations.Latest(string(f.d.Dialect())); v != want {
			t.Errorf("SchemaVersion = %d on a migrated database, want %d", v, want)
		}
	}},
)

// execution reads job id's execution row, which must exist.
func (f *fixture) execution(id int64) driver.ExecutionDetail {
	f.t.Helper()
	return find(f.ex().ExecutionGet(f.ctx, id)).of(f, fmt.Sprintf("the execution of job %d", id))
}

var _ = add("jobs",
	// A job with no execution table would be stored in none and never
	// run: JobInsertMany refuses it and stores nothing.
	test{"InsertJobsRefusesAStateWithoutATable", func(t *testing.T, f *fixture) {
		for _, state := range []driver.JobState{"", driver.StateRunning, driver.StateCompleted} {
			j := job("q")
			j.State = state
			if err := f.ex().JobInsertMany(f.ctx, T0, []*driver.NewJob{job("q"), j}); err == nil {
				t.Errorf("InsertJobs of a job in state %q: nil error", state)
			}
		}
		counts, err := f.ex().JobCountByQueue(f.ctx)
		f.must(err)
		if len(counts) != 0 {
			t.Errorf("after refused inserts the queues hold %+v, want nothing", counts)
		}
	}},
)

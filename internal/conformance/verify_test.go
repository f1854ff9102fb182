package conformance

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"VerifyFindsAndRepairsDrift", testVerify},
	scenario{"VerifyFindsStrandedJobs", testVerifyStranded},
)

// testVerifyStranded: an unfinished job whose ready row is gone (nothing
// will ever run it) and one in two states at once are reported, by job;
// Repair leaves both to a person, and says so.
func testVerifyStranded(t *testing.T, h *harness) {
	ctx := context.Background()
	lost := enqueue(t, h, unkeyedJob, Args{})
	twice := enqueue(t, h, unkeyedJob, Args{})
	fine := enqueue(t, h, unkeyedJob, Args{})
	for _, q := range []string{
		`DELETE FROM bq_ready_executions WHERE job_id = ?`,
		`INSERT INTO bq_scheduled_executions (job_id, queue, priority, scheduled_at) SELECT job_id, queue, priority, created_at FROM bq_ready_executions WHERE job_id = ?`,
	} {
		id := lost.ID
		if strings.HasPrefix(q, "INSERT") {
			id = twice.ID
		}
		if _, err := h.raw.ExecContext(ctx, rebind(h.db, q), id); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, repair := range []bool{false, true} {
		r, err := h.client.Verify(ctx, bq.VerifyOptions{Repair: repair})
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, d := range r.Drift {
			if d.Kind != bq.DriftStranded || d.Repaired || d.Detail == "" {
				t.Errorf("repair %v: drift %+v, want stranded, not repaired, saying why", repair, d)
			}
			got = append(got, d.JobID)
		}
		if !slices.Equal(got, []int64{lost.ID, twice.ID}) {
			t.Errorf("repair %v: stranded jobs %v, want %d (in no state) and %d (in two), not %d", repair, got, lost.ID, twice.ID, fine.ID)
		}
		if n := r.Unrepaired(); n != 2 {
			t.Errorf("repair %v: %d unrepaired, want 2", repair, n)
		}
	}
}

// testVerify: Client.Verify finds nothing in rows the engine wrote;
// finds each drift made behind its back (a semaphore whose free and
// blocked counts disagree with its rows; a release that was lost, so a
// slot is free while jobs wait; a claim of a dead process the
// dispatcher has not reaped), changing nothing without Repair; with
// Repair mends each under the engine's own locks (the lost slot passes
// to the line, the dead claim is reaped); then finds nothing.
func testVerify(t *testing.T, h *harness) {
	ctx := context.Background()
	verify := func(repair bool) *bq.VerifyReport {
		t.Helper()
		r, err := h.client.Verify(ctx, bq.VerifyOptions{Repair: repair})
		if err != nil {
			t.Fatalf("Verify(repair %v): %v", repair, err)
		}
		return r
	}
	var v, w []int64
	for range 5 {
		v = append(v, enqueue(t, h, limit2Job, Args{Key: "v"}).ID)
		w = append(w, enqueue(t, h, limit2Job, Args{Key: "w"}).ID)
	}
	if r := verify(false); len(r.Drift) != 0 || r.Semaphores < 2 {
		t.Fatalf("rows the engine wrote: %d semaphores checked, drift %+v; want 2 or more, none", r.Semaphores, r.Drift)
	}

	// v: counts written behind the engine's back.
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := h.raw.ExecContext(ctx, rebind(h.db, h.sql(q)), args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`UPDATE bq_semaphores SET value = 1, blocked = 7 WHERE key = 'c.limit2/v'`)
	// w: a holder gone without its release (its rows deleted): a slot is
	// free while three jobs wait.
	exec(`DELETE FROM bq_ready_executions WHERE job_id = ?`, w[0])
	exec(`DELETE FROM bq_jobs WHERE id = ?`, w[0])
	// A claim of a process that died, which no dispatcher reaped.
	dead := registerProcess(t, h, time.Now().Add(-time.Hour))
	witness(t, h)
	lone := enqueue(t, h, unkeyedJob, Args{}, bq.Priority(10)) // claimed before the keyed ready jobs
	if c := claimOne(t, h, dead); c.ID != lone.ID {
		t.Fatalf("claimed job %d, want the unkeyed job %d", c.ID, lone.ID)
	}

	type found struct {
		kind  bq.DriftKind
		key   string
		jobID int64
	}
	kinds := func(r *bq.VerifyReport, repaired bool) []found {
		t.Helper()
		var out []found
		for _, d := range r.Drift {
			if d.Repaired != repaired {
				t.Errorf("drift %+v: repaired %v, want %v", d, d.Repaired, repaired)
			}
			if d.Detail == "" {
				t.Errorf("drift %+v says nothing of what it found", d)
			}
			out = append(out, found{d.Kind, d.Key, d.JobID})
		}
		return out
	}
	want := []found{
		{bq.DriftFree, "c.limit2/v", 0}, {bq.DriftBlocked, "c.limit2/v", 0},
		{bq.DriftFree, "c.limit2/w", 0}, {bq.DriftStuck, "c.limit2/w", 0},
		{bq.DriftUnreaped, "", lone.ID},
	}
	if got := kinds(verify(false), false); !slices.Equal(got, want) {
		t.Fatalf("drift found %+v, want %+v", got, want)
	}
	// Without Repair nothing changed.
	if got := kinds(verify(false), false); !slices.Equal(got, want) {
		t.Fatalf("a second look found %+v, want the same %+v", got, want)
	}
	if got := kinds(verify(true), true); !slices.Equal(got, want) {
		t.Fatalf("repair reported %+v, want %+v", got, want)
	}
	if r := verify(false); len(r.Drift) != 0 {
		t.Fatalf("after the repair: drift %+v, want none", r.Drift)
	}
	h.checkSemaphores()
	// The lost slot went to w's line: two holders again, two waiting.
	if n := h.count(`SELECT count(*) FROM bq_ready_executions r JOIN bq_jobs j ON j.id = r.job_id WHERE j.concurrency_key = 'c.limit2/w'`); n != 2 {
		t.Errorf("w has %d ready jobs after the repair, want 2 (the freed slot promoted its line's head)", n)
	}
	if s := h.state(lone.ID); s != bq.StateReady {
		t.Errorf("the dead process's job is %s after the repair, want ready (reaped)", s)
	}
	if s := h.state(v[0]); s != bq.StateReady {
		t.Errorf("v's first job is %s, want ready: a repair changes no job of a key whose rows were right", s)
	}
}

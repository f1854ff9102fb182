package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/testdb"
	"github.com/bqueue/bq/migrations"
)

// e is the engine d seals.
func (d *Driver) e() *engine { return driver.EngineAs[*engine](d) }

// testDriver returns a driver opened by Open on a fresh, migrated schema,
// or skips when BQ_TEST_DRIVERS leaves PostgreSQL out.
func testDriver(t *testing.T) *engine {
	t.Helper()
	d, err := Open(context.Background(), testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d.e()
}

// testDSN creates a fresh schema, migrates it and returns a DSN whose
// search_path names it; the schema is dropped when the test ends. It skips
// when BQ_TEST_DRIVERS leaves PostgreSQL out.
func testDSN(t *testing.T) string {
	t.Helper()
	testdb.Require(t, testdb.Postgres)
	dsn := testdb.FreshPostgres(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	d := New(pool)
	defer d.Close()
	p, err := migrations.NewProvider(d.e().SQLDB(), "postgres", migrations.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	return dsn
}

func insertJob(t *testing.T, ex driver.Executor, state driver.JobState) int64 {
	t.Helper()
	j := &driver.NewJob{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1, ScheduledAt: time.Now(), State: state}
	if err := ex.JobInsertMany(context.Background(), time.Now(), []*driver.NewJob{j}); err != nil {
		t.Fatal(err)
	}
	return j.ID
}

// beginWithJob begins a transaction of d and inserts a scheduled job in
// it, returning both.
func beginWithJob(t *testing.T, d *engine) (driver.Tx, int64) {
	t.Helper()
	tx, err := d.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tx, insertJob(t, tx, driver.StateScheduled)
}

// A queued write that fails surfaces at the next statement, the
// transaction rolls back whole, and the connection goes back usable.
func TestPipelineQueuedWriteFailsAtNextCall(t *testing.T) {
	d := testDriver(t)
	ctx := context.Background()
	tx, id := beginWithJob(t, d)
	// No job 0: the foreign key of a scheduled row fails, but only when
	// the write is sent.
	if err := tx.ExecutionInsertMany(ctx, driver.StateScheduled, []driver.Execution{{JobID: 0, Queue: "q", At: time.Now()}}); err != nil {
		t.Fatalf("a queued write failed at once: %v", err)
	}
	if _, _, err := tx.SemaphoreLock(ctx, "x", ""); err == nil || !strings.Contains(err.Error(), "foreign key") {
		t.Fatalf("next statement: err = %v, want the queued write's foreign key violation", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	if info, ok, err := d.Exec().JobGet(ctx, id); err != nil || ok {
		t.Fatalf("job %d after rollback: %+v, %v, %v; want none", id, info, ok, err)
	}
	for range 5 { // every pooled connection still works
		if _, err := d.Exec().JobCountByQueue(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A queued write that fails with the COMMIT makes Commit fail and
// nothing of the transaction is kept.
func TestPipelineQueuedWriteFailsAtCommit(t *testing.T) {
	d := testDriver(t)
	ctx := context.Background()
	tx, id := beginWithJob(t, d)
	if err := tx.ExecutionInsertMany(ctx, driver.StateScheduled, []driver.Execution{{JobID: 0, Queue: "q", At: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("commit succeeded with a failing queued write")
	}
	if _, ok, err := d.Exec().JobGet(ctx, id); err != nil || ok {
		t.Fatalf("job %d after a failed commit: ok %v, %v; want none", id, ok, err)
	}
}

// Queued writes are committed in order with the COMMIT, and are visible
// to the transaction's own later statements.
func TestPipelineQueuedWritesCommit(t *testing.T) {
	d := testDriver(t)
	ctx := context.Background()
	err := driver.InTx(ctx, d, func(ex driver.Executor) error {
		l := driver.Limit{Key: "g/k", To: 3, Duration: time.Minute}
		if err := ex.SemaphoreEnsure(ctx, l, time.Now()); err != nil { // queued
			return err
		}
		s, ok, err := ex.SemaphoreLock(ctx, l.Key, "") // sent with it
		if err != nil || !ok || s.Value != 3 {
			t.Errorf("lock after a queued ensure: %+v, %v, %v", s, ok, err)
		}
		s.Value = 1
		return ex.SemaphoreSave(ctx, s) // queued, sent with COMMIT
	})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := d.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	s, ok, err := tx.SemaphoreLock(ctx, "g/k", "")
	if err != nil || !ok || s.Value != 1 || s.Limit != 3 {
		t.Fatalf("semaphore after commit: %+v, %v, %v; want value 1 of 3", s, ok, err)
	}
}

// A transaction that sent nothing commits and rolls back without a
// round trip.
func TestPipelineEmptyTransaction(t *testing.T) {
	d := testDriver(t)
	ctx := context.Background()
	for _, end := range []func(driver.Tx) error{
		func(tx driver.Tx) error { return tx.Commit(ctx) },
		func(tx driver.Tx) error { return tx.Rollback(ctx) },
	} {
		tx, err := d.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := end(tx); err != nil {
			t.Fatal(err)
		}
	}
}

// A keyed completion batch presumes every claim still matches and sends
// the end of the claims with the release of their keys: with every claim
// live it ends and promotes what CompleteMany without presuming does; with
// one stale claim it fails with lifecycle.ErrMismatch and, rolled back,
// changes nothing, and the batch written again without presuming ends
// the live claims only.
func TestCompleteManyPresumed(t *testing.T) {
	ctx := context.Background()
	e := testDriver(t)
	const n = 5
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	// Each key, limit 1: one job admitted ready, two blocked.
	var jobs []*driver.NewJob
	for i := range 3 * n {
		jobs = append(jobs, &driver.NewJob{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1, ScheduledAt: now,
			Limit: driver.Limit{Key: "g/" + strconv.Itoa(i%n), To: 1, Duration: time.Minute}})
	}
	if err := driver.InTx(ctx, e, func(ex driver.Executor) error {
		_, _, err := lifecycle.Admit(ctx, ex, jobs, now)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	claim := func() []*driver.Claim {
		var claims []*driver.Claim
		err := driver.InTx(ctx, e, func(ex driver.Executor) (err error) {
			claims, err = ex.ReadyClaim(ctx, driver.ClaimParams{Queue: "q", Max: n, ProcessID: 1, Now: now})
			return err
		})
		if err != nil || len(claims) != n {
			t.Fatalf("claimed %d of %d jobs: %v", len(claims), n, err)
		}
		return claims
	}
	complete := func(claims []*driver.Claim, presume bool) ([]lifecycle.Result, error) {
		var results []lifecycle.Result
		err := driver.InTx(ctx, e, func(ex driver.Executor) (err error) {
			if _, ok := ex.(driver.CompleteReleaser); !ok {
				t.Fatalf("a transaction's executor (%T) is no driver.CompleteReleaser", ex)
			}
			results, err = lifecycle.CompleteMany(ctx, ex, claims, true, presume, now)
			return err
		})
		return results, err
	}
	promoted := func(rs []lifecycle.Result) (matched, jobs int) {
		for _, r := range rs {
			if r.Matched {
				matched++
			}
			jobs += r.Promoted.Jobs
		}
		return matched, jobs
	}

	rs, err := complete(claim(), true)
	if m, p := promoted(rs); err != nil || m != n || p != n {
		t.Fatalf("presumed batch of %d live claims: %d matched, %d promoted, %v; want %d and %d", n, m, p, err, n, n)
	}
	claims := claim()
	stale := *claims[2]
	stale.Fence += 1000
	batch := append(append([]*driver.Claim{}, claims[:2]...), &stale)
	batch = append(batch, claims[3:]...)
	if _, err := complete(batch, true); !errors.Is(err, lifecycle.ErrMismatch) {
		t.Fatalf("presumed batch with a stale claim: err = %v, want lifecycle.ErrMismatch", err)
	}
	for i := range n {
		s, ok, err := e.Exec().SemaphoreGet(ctx, "g/"+strconv.Itoa(i))
		if err != nil || !ok || s.Value != 0 || s.Blocked != 1 {
			t.Fatalf("after the rolled-back batch, semaphore g/%d = %+v (%v, %v); want value 0, 1 blocked", i, s, ok, err)
		}
	}
	if own, err := e.Exec().ClaimListOfProcess(ctx, 1); err != nil || len(own) != n {
		t.Fatalf("after the rolled-back batch, %d claims (%v); want %d", len(own), err, n)
	}
	rs, err = complete(batch, false)
	if m, p := promoted(rs); err != nil || m != n-1 || p != n-1 {
		t.Fatalf("the batch again, not presumed: %d matched, %d promoted, %v; want %d and %d", m, p, err, n-1, n-1)
	}
}

// A hand-off's claim queued in the transaction goes out with its COMMIT:
// nothing is claimed before, the claims hold after a COMMIT, and a
// transaction rolled back claims nothing.
func TestHandOffLaterGoesWithTheCommit(t *testing.T) {
	ctx := context.Background()
	e := testDriver(t)
	ids := []int64{insertJob(t, e.Exec(), driver.StateReady), insertJob(t, e.Exec(), driver.StateReady)}
	p := driver.HandOffParams{Queue: "q", IDs: ids, Max: 5, ProcessID: 7, Now: time.Now()}
	var got []*driver.Claim
	rollback := errors.New("roll back")
	err := driver.InTx(ctx, e, func(ex driver.Executor) error {
		if err := ex.(driver.ClaimQueuer).ReadyClaimHandOffLater(ctx, p, &got); err != nil {
			return err
		}
		if got != nil {
			t.Errorf("the hand-off's claims were read before the transaction's end: %v", got)
		}
		return rollback
	})
	if !errors.Is(err, rollback) || got != nil {
		t.Fatalf("rolled back: err %v, claims %v; want the rollback and no claim", err, got)
	}
	if own, err := e.Exec().ClaimListOfProcess(ctx, 7); err != nil || len(own) != 0 {
		t.Fatalf("after the rollback process 7 holds %d claims (%v)", len(own), err)
	}
	err = driver.InTx(ctx, e, func(ex driver.Executor) error {
		return ex.(driver.ClaimQueuer).ReadyClaimHandOffLater(ctx, p, &got)
	})
	if err != nil || len(got) != 2 || got[0].ID != ids[0] || got[1].ID != ids[1] {
		t.Fatalf("committed: err %v, claims %v; want jobs %v", err, got, ids)
	}
	if own, err := e.Exec().ClaimListOfProcess(ctx, 7); err != nil || len(own) != 2 {
		t.Fatalf("after the COMMIT process 7 holds %d claims (%v), want 2", len(own), err)
	}
}

// A queue fair at its last claim has its gate read with its ready jobs;
// should the gate say otherwise by then, the claim follows the gate: none
// while paused, within the cap once capped.
func TestFairClaimFollowsAChangedGate(t *testing.T) {
	ctx := context.Background()
	e := testDriver(t)
	now := time.Now()
	var jobs []*driver.NewJob
	for i := range 6 {
		jobs = append(jobs, &driver.NewJob{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1, ScheduledAt: now,
			Limit: driver.Limit{Key: "f/" + strconv.Itoa(i), To: 5, Duration: time.Minute}})
	}
	if err := driver.InTx(ctx, e, func(ex driver.Executor) error {
		_, _, err := lifecycle.Admit(ctx, ex, jobs, now)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	pol := driver.Policy{Queue: "q", Namespace: "ns", FairShare: true, UpdatedAt: now}
	if _, err := e.Exec().PolicyInsert(ctx, pol); err != nil {
		t.Fatal(err)
	}
	claim := func(max int) int {
		t.Helper()
		cs, err := e.Claim(ctx, driver.ClaimParams{Queue: "q", Max: max, ProcessID: 1, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return len(cs)
	}
	if n := claim(1); n != 1 {
		t.Fatalf("the fair queue's first claim took %d jobs, want 1", n)
	}
	if _, err := e.Exec().QueuePause(ctx, "q", now); err != nil {
		t.Fatal(err)
	}
	if n := claim(5); n != 0 {
		t.Fatalf("paused since its last claim, the fair queue gave %d jobs, want none", n)
	}
	if _, err := e.Exec().QueueResume(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	pol.MaxActive = 2
	if err := e.Exec().PolicyUpdate(ctx, pol); err != nil {
		t.Fatal(err)
	}
	if n := claim(5); n != 1 {
		t.Fatalf("capped at 2 since its last claim (1 running), the fair queue gave %d jobs, want 1", n)
	}
	if n := claim(5); n != 0 {
		t.Fatalf("at its cap, the fair queue gave %d jobs, want none", n)
	}
}

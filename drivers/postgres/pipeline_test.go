package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/testdb"
	"github.com/bqueue/bq/migrations"
)

// testDriver returns a driver opened by Open on a fresh, migrated schema,
// or skips when BQ_TEST_DRIVERS leaves PostgreSQL out.
func testDriver(t *testing.T) *engine {
	t.Helper()
	d, err := Open(context.Background(), testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d.e
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
	p, err := migrations.NewProvider(d.e.SQLDB(), "postgres", migrations.DefaultPrefix)
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

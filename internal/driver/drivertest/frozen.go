package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// TestBound stands in for driver.TxIdleTimeout in the drivers' bound
// tests, so they wait seconds, not tens of seconds; Frozen is how long a
// client stays silent in them: the bound with room for a loaded machine.
const (
	TestBound = time.Second
	Frozen    = 3 * TestBound
)

// LockInTx begins a transaction of d that holds key's semaphore row
// locked (creating the semaphore first); the test's cleanup rolls it back
// (a second Rollback changes nothing).
func LockInTx(t *testing.T, d driver.Driver, key string) driver.Tx {
	t.Helper()
	ctx := context.Background()
	l := driver.Limit{Key: key, To: 1, Duration: time.Minute}
	if err := driver.InTx(ctx, d, func(ex driver.Executor) error { return ex.SemaphoreEnsure(ctx, l, time.Now()) }); err != nil {
		t.Fatal(err)
	}
	tx, err := d.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, ok, err := tx.SemaphoreLock(ctx, key, ""); err != nil || !ok {
		t.Fatalf("lock semaphore %q: ok %v, %v", key, ok, err)
	}
	return tx
}

// CheckFrozenTxEnds freezes tx, a bq transaction holding key's semaphore
// row (LockInTx), for frozen, longer than d's idle-transaction bound, and
// checks that the server ended it: its next statement fails, the row is
// free (locked asks another session) and d's pool goes on with fresh
// connections, no error reaching bq's callers.
func CheckFrozenTxEnds(t *testing.T, d driver.Driver, tx driver.Tx, key string, frozen time.Duration, locked func(key string) bool) {
	t.Helper()
	ctx := context.Background()
	if !locked(key) {
		t.Fatal("the bq transaction does not hold the semaphore row: the test proves nothing")
	}
	time.Sleep(frozen) // the client freezes
	if _, _, err := tx.SemaphoreLock(ctx, key, ""); err == nil {
		t.Fatalf("a bq transaction silent for %s past its bound still runs statements", frozen)
	} else {
		t.Logf("after the freeze: %v", err)
	}
	_ = tx.Rollback(ctx)
	if locked(key) {
		t.Fatal("the frozen transaction's row lock is still held")
	}
	for range 5 {
		if _, err := d.Exec().JobCountByQueue(ctx); err != nil {
			t.Fatalf("the pool after a server-ended session: %v", err)
		}
	}
}

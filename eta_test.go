package bq_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/testdb"
)

var waitBound = bq.Define("eta.bound", func(context.Context, orderArgs) error { return nil }, bq.JobOptions[orderArgs]{
	Concurrency: &bq.Concurrency[orderArgs]{Key: func(orderArgs) string { return "k" }, To: 1, MaxWait: time.Second}})

// TestMaxWaitInTx: EnqueueTx refused by MaxWait returns the
// *WaitTooLongError and leaves the caller's transaction usable with
// nothing of the job in it: what else it writes commits.
func TestMaxWaitInTx(t *testing.T) {
	for _, kind := range testdb.Selected(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			c := migratedClient(t, kind)
			for i := range 3 { // one ready, two blocked
				if _, err := waitBound.Enqueue(ctx, c, orderArgs{Order: i}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := driver.ClientEngine(c).SQLDB().ExecContext(ctx, `UPDATE bq_semaphores SET release_interval_us = 400000`); err != nil {
				t.Fatal(err)
			}
			err := c.InTx(ctx, func(ctx context.Context, tx bq.Tx) error {
				_, err := waitBound.EnqueueTx(ctx, c, tx, orderArgs{Order: 3})
				var tl *bq.WaitTooLongError
				if !errors.As(err, &tl) || !errors.Is(err, bq.ErrWaitTooLong) || tl.ExpectedWait != 1200*time.Millisecond || tl.RetryAfter != 400*time.Millisecond {
					t.Errorf("EnqueueTx 3rd in line × 400ms: %v, want a *WaitTooLongError of 1.2s, RetryAfter 400ms (one interval)", err)
				}
				_, err = shipOrder.EnqueueTx(ctx, c, tx, orderArgs{Order: 99})
				return err
			})
			if err != nil {
				t.Fatalf("the transaction after a refusal: %v", err)
			}
			for _, k := range []struct {
				job  string
				want int
			}{{waitBound.Name(), 3}, {shipOrder.Name(), 1}} {
				page, err := c.ListJobs(ctx, bq.JobFilter{Kinds: []string{k.job}})
				if err != nil || len(page.Jobs) != k.want {
					t.Errorf("%s: %d jobs stored (%v), want %d", k.job, len(page.Jobs), err, k.want)
				}
			}
		})
	}
}

// migratedClient opens a client on a fresh, migrated database of kind,
// closed at the test's end.
func migratedClient(t *testing.T, kind string) *bq.Client {
	t.Helper()
	ctx := context.Background()
	c, err := bq.Open(ctx, testdb.Fresh(t, kind), bq.Config{NoGauges: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

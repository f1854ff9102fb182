package bq

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/testdb"
)

// gatedDriver holds every completion statement until gate is closed, in
// a transaction of its own (without OneStatementWriter, Atomic takes
// one), so claims go on beside it on a database with row locks.
type gatedDriver struct {
	driver.Driver
	gate <-chan struct{}
}

func (d gatedDriver) Begin(ctx context.Context) (driver.Tx, error) {
	tx, err := d.Driver.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return gatedTx{historyTx: tx.(historyTx), gate: d.gate}, nil
}

// historyTx is what the workers ask of a transaction besides Tx.
type historyTx interface {
	driver.Tx
	driver.HistoryStore
}

type gatedTx struct {
	historyTx
	gate <-chan struct{}
}

func (t gatedTx) ClaimCompleteMany(ctx context.Context, claims []*driver.Claim, keep bool, now time.Time) ([]driver.Ended, error) {
	select {
	case <-t.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return t.historyTx.ClaimCompleteMany(ctx, claims, keep, now)
}

var gateStarts atomic.Int64

var gateJob = Define("bq.test.completion-gate", func(ctx context.Context, _ struct{}) error {
	gateStarts.Add(1)
	return nil
}, JobOptions[struct{}]{Queue: "completion-gate"})

// A run's slot frees when its code returns, while its completion waits
// for the completer: with completions held, a worker of 3 slots runs 6
// jobs (3 running, then 3 more beside 3 waiting completions) and no more,
// and once they land every job completes.
func TestCompletionFreesTheSlotUpToTwiceTheSlots(t *testing.T) {
	for _, kind := range testdb.Selected(t) {
		if kind == testdb.SQLite {
			// One writer: a completion held open holds every claim too.
			continue
		}
		t.Run(kind, func(t *testing.T) {
			gateStarts.Store(0)
			ctx := context.Background()
			c, err := Open(ctx, testdb.Fresh(t, kind), Config{
				Queues: map[string]int{"completion-gate": 3}, PollInterval: 20 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			gate := make(chan struct{})
			c.drv = gatedDriver{Driver: c.drv, gate: gate}
			c.newRuntime(c.drv)
			if _, err := gateJob.EnqueueMany(ctx, c, make([]struct{}, 20)); err != nil {
				t.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- c.RunWorkers(runCtx) }() // no dispatcher: it needs the driver's capabilities, which the wrapper hides

			deadline := time.Now().Add(20 * time.Second)
			for gateStarts.Load() < 6 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond) // time to go past the bound, if it would
			if n := gateStarts.Load(); n != 6 {
				t.Errorf("%d jobs started while completions were held, want 6 (3 slots, and 3 more beside 3 waiting completions)", n)
			}
			close(gate)
			for c.countUnfinished(t) > 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if n := c.countUnfinished(t); n > 0 {
				t.Errorf("%d jobs unfinished once completions landed", n)
			}
			stop()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
			if n := gateStarts.Load(); n != 20 {
				t.Errorf("%d runs for 20 jobs", n)
			}
		})
	}
}

// countUnfinished is the number of jobs not yet completed.
func (c *Client) countUnfinished(t *testing.T) int {
	h, err := c.Health(context.Background(), HealthOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, q := range h.Queues {
		n += q.Ready + q.Running + q.Scheduled + q.Blocked
	}
	return n
}

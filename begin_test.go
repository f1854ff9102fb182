package bq

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/worker"
)

// gatedRun is a run's context behind its begin gate, on a clock the test
// moves: the process's last beat landed at the clock's start, and the
// lease lapses after bound of silence.
func gatedRun(t *testing.T, bound time.Duration, startBy time.Duration) (ctx context.Context, c *Client, advance func(time.Duration)) {
	t.Helper()
	var mu sync.Mutex
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c, _ = chainClient(Config{Now: clock})
	var by time.Time
	if startBy > 0 {
		by = now.Add(startBy)
	}
	ctx, cancel := worker.GatedRun(context.Background(), clock, bound, by, ErrLeaseLost)
	t.Cleanup(func() { cancel(nil) })
	return ctx, c, func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
}

// TestBeginGateLeaseLapsedBeforeRunner: a claim whose process was silent
// past its lease before a runner took it runs neither its middleware nor
// its job, says why, and its run's context is cancelled.
func TestBeginGateLeaseLapsedBeforeRunner(t *testing.T) {
	ctx, c, advance := gatedRun(t, 2*time.Second, 0)
	var trace []string
	def := &Job[int]{name: "unit.gate", fn: func(context.Context, int) error { trace = append(trace, "job"); return nil },
		opts: JobOptions[int]{Middleware: []WorkerMiddleware{logging(&trace, "mw")}}}
	advance(2*time.Second + time.Millisecond)
	err := c.runChain(ctx, JobMeta{Kind: def.name}, def, []byte("1"))
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("runChain after the lease lapsed = %v, want ErrLeaseLost", err)
	}
	if len(trace) > 0 {
		t.Errorf("ran %v after the lease lapsed, want nothing", trace)
	}
	if ctx.Err() == nil {
		t.Error("the gate saw the lapse but the run's context is not cancelled")
	}
}

// TestBeginGateAfterMiddleware: a process frozen while a middleware ran
// (past the lease, or past a rated claim's start slack) does not call the
// job when the middleware calls next.
func TestBeginGateAfterMiddleware(t *testing.T) {
	for _, tc := range []struct {
		name    string
		startBy time.Duration
		freeze  time.Duration
		want    error
	}{
		{"lease", 0, 3 * time.Second, ErrLeaseLost},
		{"start slack", 6 * time.Millisecond, 7 * time.Millisecond, worker.ErrStartedLate},
		{"neither", 6 * time.Millisecond, 5 * time.Millisecond, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, c, advance := gatedRun(t, 2*time.Second, tc.startBy)
			ran := false
			def := &Job[int]{name: "unit.gate", fn: func(context.Context, int) error { ran = true; return nil },
				opts: JobOptions[int]{Middleware: []WorkerMiddleware{func(ctx context.Context, _ JobMeta, next func(context.Context) error) error {
					advance(tc.freeze)
					return next(ctx)
				}}}}
			err := c.runChain(ctx, JobMeta{Kind: def.name}, def, []byte("1"))
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("runChain = %v, want %v", err, tc.want)
			}
			if ran != (tc.want == nil) {
				t.Errorf("job ran = %v, want %v", ran, tc.want == nil)
			}
		})
	}
}

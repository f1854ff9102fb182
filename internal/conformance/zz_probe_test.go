package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(scenario{"ZZRateProbe", func(t *testing.T, h *harness) {
	ctx := context.Background()
	stop := h.spawnWorkers(3, 4)
	defer stop()
	for i := range 60 {
		if _, err := rateJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "rc", Seq: i, SleepMS: 50},
			bq.WithRateKey("rc", 5, 300*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		var waiting, line int
		_ = h.raw.QueryRowContext(ctx, `SELECT coalesce((SELECT sum(waiting) FROM bq_rate_limits), 0),
	(SELECT count(*) FROM bq_blocked_executions WHERE concurrency_key LIKE '/rate/%')`).Scan(&waiting, &line)
		if waiting != line {
			t.Logf("after enqueue %d: waiting %d line %d; runs %d", i, waiting, line, h.count(`SELECT count(*) FROM test_runs`))
		}
	}
	h.waitFinished(60, 60*time.Second)
}})

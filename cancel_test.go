package bq_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/bqueue/bq"
)

var mSelfCancel = bq.Define("metrics.selfcancel", func(context.Context, metricArgs) error {
	return bq.Cancel(errors.New("nothing to do"))
}, bq.JobOptions[metricArgs]{Queue: "metrics-cancel", MaxAttempts: 3})

// TestCancelMetrics: a cancel by hand and a run's own bq.Cancel are each
// counted in bq.jobs.cancelled with who asked, and the run's duration is
// recorded with outcome cancelled.
func TestCancelMetrics(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	client, err := bq.Open(ctx, "sqlite://"+t.TempDir()+"/cancel.db", bq.Config{
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
		Queues:        map[string]int{"metrics-cancel": 1},
		PollInterval:  20 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond, ProcessDeadAfter: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	later, err := mSelfCancel.Enqueue(ctx, client, metricArgs{}, bq.In(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := client.Cancel(ctx, later.ID); err != nil || st != bq.StateCancelled {
		t.Fatalf("cancel a scheduled job: %s, %v", st, err)
	}
	self, err := mSelfCancel.Enqueue(ctx, client, metricArgs{})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- client.Run(runCtx) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, err := client.Job(ctx, self.ID)
		if err != nil {
			t.Fatal(err)
		}
		if info.State == bq.StateCancelled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("self-cancelling job is %s, want cancelled", info.State)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := readMetrics(t, rm)
	for _, c := range []struct{ name, attrs string }{
		{"bq.jobs.cancelled", "from=client"},
		{"bq.jobs.cancelled", "from=job"},
		{"bq.job.run_duration", "outcome=cancelled"},
	} {
		if n, ok := got.sum(c.name, c.attrs); !ok || n != 1 {
			t.Errorf("%s{%s} = %d (reported: %v), want 1", c.name, c.attrs, n, ok)
		}
	}
	if n, _ := got.sum("bq.jobs.retried", "kind=metrics.selfcancel"); n != 0 {
		t.Errorf("bq.jobs.retried of the cancelled job = %d, want 0", n)
	}
}

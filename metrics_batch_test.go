package bq_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/bqueue/bq"
)

// A batch counts each item as a single enqueue would: by the state
// admission gave it, under its own kind and queue.
func TestEnqueueBatchCountsEachItem(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	client, err := bq.Open(ctx, "sqlite://"+t.TempDir()+"/batch-metrics.db", bq.Config{
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.EnqueueBatch(ctx, []bq.Item{
		mBlock.Item(metricArgs{Key: "k"}),
		mBlock.Item(metricArgs{Key: "k"}),
		mDiscard.Item(metricArgs{Key: "k"}),
		mDiscard.Item(metricArgs{Key: "k"}),
		mReap.Item(metricArgs{}, bq.In(time.Hour)),
	}); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := readMetrics(t, rm)
	for _, c := range []struct {
		attrs string
		want  int64
	}{
		{"state=ready", 2}, {"state=blocked", 1}, {"state=discarded", 1}, {"state=scheduled", 1},
		{"kind=metrics.block", 2}, {"kind=metrics.discard", 2}, {"queue=metrics-reap", 1},
	} {
		if n, _ := got.sum("bq.jobs.enqueued", c.attrs); n != c.want {
			t.Errorf("bq.jobs.enqueued{%s} = %d, want %d", c.attrs, n, c.want)
		}
	}
}

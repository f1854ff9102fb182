package bq_test

import (
	"context"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

// A batch counts each item as a single enqueue would: by the state
// admission gave it, under its own kind and queue.
func TestEnqueueBatchCountsEachItem(t *testing.T) {
	ctx := context.Background()
	client, collect := meteredClient(t, bq.Config{})
	if _, err := client.EnqueueBatch(ctx, []bq.Item{
		mBlock.Item(metricArgs{Key: "k"}),
		mBlock.Item(metricArgs{Key: "k"}),
		mDiscard.Item(metricArgs{Key: "k"}),
		mDiscard.Item(metricArgs{Key: "k"}),
		mReap.Item(metricArgs{}, bq.In(time.Hour)),
	}); err != nil {
		t.Fatal(err)
	}
	got := collect()
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

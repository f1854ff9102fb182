package benchmarks

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

// BenchmarkEnqueueBatch100 stores a mixed batch of 100 items in one
// transaction: half unkeyed, half keyed over 10 keys (a tenant's batch:
// a few keys, each taking its slots and blocking the rest), one in ten
// with a priority and one in ten scheduled. Keys rotate every batch.
func BenchmarkEnqueueBatch100(b *testing.B) {
	forEachDB(b, func(b *testing.B, c *bq.Client) {
		ctx := context.Background()
		items := make([]bq.Item, 100)
		round := 0
		for b.Loop() {
			for i := range items {
				var opts []bq.EnqueueOption
				switch i % 10 {
				case 3:
					opts = append(opts, bq.Priority(5))
				case 7:
					opts = append(opts, bq.In(time.Hour))
				}
				if i%2 == 0 {
					items[i] = plain.Item(benchArgs{}, opts...)
				} else {
					items[i] = keyed.Item(benchArgs{Key: strconv.Itoa(round*10 + i%10)}, opts...)
				}
			}
			if _, err := c.EnqueueBatch(ctx, items); err != nil {
				b.Fatal(err)
			}
			round++
		}
		b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "jobs/s")
	})
}

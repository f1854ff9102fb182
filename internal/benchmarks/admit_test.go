package benchmarks

import (
	"context"
	"fmt"
	"testing"

	"github.com/bqueue/bq"
)

// enqueueMany stores batches of n jobs, one transaction a batch; keys
// names each batch's keys (nil: unkeyed).
func enqueueMany(b *testing.B, n int, keys func(round, i int) string) {
	forEachDB(b, func(b *testing.B, c *bq.Client) {
		ctx := context.Background()
		args := make([]benchArgs, n)
		round := 0
		for b.Loop() {
			if keys != nil {
				for i := range args {
					args[i].Key = keys(round, i)
				}
			}
			def := plain
			if keys != nil {
				def = keyed
			}
			if _, err := def.EnqueueMany(ctx, c, args); err != nil {
				b.Fatal(err)
			}
			round++
		}
		b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "jobs/s")
	})
}

// BenchmarkEnqueueMany1000 stores 1000 unkeyed jobs a transaction: the
// base the keyed batches below compare with.
func BenchmarkEnqueueMany1000(b *testing.B) { enqueueMany(b, 1000, nil) }

// BenchmarkEnqueueManyKeyed1000 admits 1000 jobs over the same 1000 keys
// (To=2) a transaction: the first two batches take the slots, the rest
// block.
func BenchmarkEnqueueManyKeyed1000(b *testing.B) {
	enqueueMany(b, 1000, func(_, i int) string { return fmt.Sprint(i) })
}

// BenchmarkEnqueueMany20000 stores 20,000 unkeyed jobs a transaction.
func BenchmarkEnqueueMany20000(b *testing.B) { enqueueMany(b, 20000, nil) }

// BenchmarkEnqueueManyDistinct20000 admits 20,000 jobs over 20,000 keys
// never seen before a transaction: every key's semaphore is created,
// locked and takes a slot.
func BenchmarkEnqueueManyDistinct20000(b *testing.B) {
	enqueueMany(b, 20000, func(round, i int) string { return fmt.Sprintf("r%d-%d", round, i) })
}

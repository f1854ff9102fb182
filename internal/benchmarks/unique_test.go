package benchmarks

import (
	"context"
	"strconv"
	"testing"

	"github.com/bqueue/bq"
)

// BenchmarkEnqueueUnique enqueues one job unique by its args per
// transaction: lock the key, look it up, insert (the first 1000) or
// report the duplicate (the rest). Args rotate over 1000.
func BenchmarkEnqueueUnique(b *testing.B) {
	forEachDB(b, func(b *testing.B, c *bq.Client) {
		ctx := context.Background()
		byArgs := bq.WithUnique(bq.Unique{ByArgs: true})
		i := 0
		for b.Loop() {
			if _, err := plain.Enqueue(ctx, c, benchArgs{Key: strconv.Itoa(i % 1000)}, byArgs); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

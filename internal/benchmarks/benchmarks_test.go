// Package benchmarks holds the hot-path benchmarks of every driver:
// admission (Enqueue, EnqueueMany), claiming (ReadyClaim) and completion
// (lifecycle.Complete), and the costs of the history and the key search
// (history_test.go), each on a fresh SQLite file, PostgreSQL schema and
// MySQL database. BQ_TEST_DRIVERS selects the databases, as for the tests.
//
//	go test -run '^$' -bench . ./internal/benchmarks
//
// It has no tests: without -bench, `go test` runs nothing here.
package benchmarks

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/bqueue/bq"
	_ "github.com/bqueue/bq/drivers/mysql"
	_ "github.com/bqueue/bq/drivers/postgres"
	_ "github.com/bqueue/bq/drivers/sqlite"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/testdb"
)

type benchArgs struct {
	Key string `json:"k,omitempty"`
}

var (
	plain = bq.Define("benchmarks.plain", func(context.Context, benchArgs) error { return nil },
		bq.JobOptions[benchArgs]{Queue: "plain"})
	keyed = bq.Define("benchmarks.keyed", func(context.Context, benchArgs) error { return nil },
		bq.JobOptions[benchArgs]{Queue: "keyed", Concurrency: &bq.Concurrency[benchArgs]{
			Key: func(a benchArgs) string { return a.Key }, To: 2}})
)

// forEachDB runs fn as a sub-benchmark on each selected database, with a
// migrated client on a fresh file or schema.
func forEachDB(b *testing.B, fn func(b *testing.B, c *bq.Client)) {
	for _, name := range testdb.Selected(b) {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			c, err := bq.Open(ctx, testdb.Fresh(b, name), bq.Config{
				Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
			})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close() })
			if err := c.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			fn(b, c)
		})
	}
}

// BenchmarkEnqueueKeyed admits one keyed job per transaction: lock the
// key's semaphore, take a slot or block, insert. Keys rotate over 1000.
func BenchmarkEnqueueKeyed(b *testing.B) {
	forEachDB(b, func(b *testing.B, c *bq.Client) {
		ctx := context.Background()
		i := 0
		for b.Loop() {
			if _, err := keyed.Enqueue(ctx, c, benchArgs{Key: strconv.Itoa(i % 1000)}); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// BenchmarkEnqueueMany100 stores 100 unkeyed jobs in one transaction.
func BenchmarkEnqueueMany100(b *testing.B) {
	forEachDB(b, func(b *testing.B, c *bq.Client) {
		ctx := context.Background()
		args := make([]benchArgs, 100)
		for b.Loop() {
			if _, err := plain.EnqueueMany(ctx, c, args); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "jobs/s")
	})
}

// fill enqueues n unkeyed jobs of queue plain.
func fill(b *testing.B, c *bq.Client, n int) {
	b.Helper()
	args := make([]benchArgs, 1000)
	for i := 0; i < n; i += len(args) {
		if _, err := plain.EnqueueMany(context.Background(), c, args[:min(len(args), n-i)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimReady10 claims 10 ready jobs in one statement (one
// transaction on SQLite), from a queue refilled outside the timer.
func BenchmarkClaimReady10(b *testing.B) {
	forEachDB(b, func(b *testing.B, c *bq.Client) {
		ctx := context.Background()
		const refill = 10000
		left := 0
		for b.Loop() {
			if left < 10 {
				b.StopTimer()
				fill(b, c, refill)
				left += refill
				b.StartTimer()
			}
			claims, err := lifecycle.Claim(ctx, driver.ClientEngine(c), driver.ClaimParams{Queue: "plain", Max: 10, ProcessID: 1, Now: time.Now()})
			if err != nil || len(claims) != 10 {
				b.Fatalf("claimed %d: %v", len(claims), err)
			}
			left -= 10
		}
	})
}

// BenchmarkComplete records one successful run in its own transaction:
// delete the claim, finish the job and, for a keyed job, release its slot
// and promote the next blocked job of the key.
func BenchmarkComplete(b *testing.B) {
	for _, kind := range []string{"unkeyed", "keyed"} {
		b.Run(kind, func(b *testing.B) {
			forEachDB(b, func(b *testing.B, c *bq.Client) {
				benchComplete(b, c, kind == "keyed", 1)
			})
		})
	}
}

// BenchmarkCompleteBatch50 records 50 runs in one transaction, as the
// completer does under load (lifecycle.CompleteMany); keyed runs are of
// about 50 different keys, so it measures the set-wise release. Divide
// ns/op by 50 for the cost per job.
func BenchmarkCompleteBatch50(b *testing.B) {
	for _, kind := range []string{"unkeyed", "keyed"} {
		b.Run(kind, func(b *testing.B) {
			forEachDB(b, func(b *testing.B, c *bq.Client) {
				benchComplete(b, c, kind == "keyed", 50)
			})
		})
	}
}

func benchComplete(b *testing.B, c *bq.Client, isKeyed bool, batch int) {
	ctx := context.Background()
	drv := driver.ClientEngine(c)
	queue := "plain"
	var claims []*driver.Claim
	// claimAll stores n jobs and claims them all, outside the timer. Keyed
	// jobs use 100 keys of limit 2: about 200 are ready, the rest blocked
	// and promoted as completions release their slots.
	claimReady := func() {
		for {
			got, err := lifecycle.Claim(ctx, drv, driver.ClaimParams{Queue: queue, Max: 500, ProcessID: 1, Now: time.Now()})
			if err != nil {
				b.Fatal(err)
			}
			if len(got) == 0 {
				return
			}
			claims = append(claims, got...)
		}
	}
	// claimAll claims what is ready; when nothing is (the keys' lines are
	// empty), it stores n jobs first.
	claimAll := func(n int) {
		if isKeyed {
			queue = "keyed"
			if claimReady(); len(claims) >= batch {
				return
			}
			args := make([]benchArgs, n)
			for i := range args {
				args[i].Key = fmt.Sprint(i % 100)
			}
			if _, err := keyed.EnqueueMany(ctx, c, args); err != nil {
				b.Fatal(err)
			}
		} else {
			fill(b, c, n)
		}
		claimReady()
	}
	for b.Loop() {
		if len(claims) < batch {
			b.StopTimer()
			claimAll(2000)
			b.StartTimer()
		}
		some := claims[:batch]
		claims = claims[batch:]
		err := driver.InTx(ctx, drv, func(ex driver.Executor) error {
			res, err := lifecycle.CompleteMany(ctx, ex, some, true, false, time.Now())
			for i, r := range res {
				if !r.Matched {
					return fmt.Errorf("job %d: claim not found", some[i].ID)
				}
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

package benchmarks

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
)

// The history's costs: what a worker process writes once a minute, what
// a dispatcher writes once a minute, and what a chart reads.

const historyQueues = 20

// historyStore runs each write as the engine does (driver.HistoryOf).
func historyStore(b *testing.B, c *bq.Client) driver.HistoryStore {
	hs, ok := driver.HistoryOf(driver.ClientEngine(c))
	if !ok {
		b.Fatal("the driver keeps no history")
	}
	return hs
}

// snapshotOf is a minute's snapshot of 20 queues and the 10 most blocked
// keys.
func snapshotOf(m time.Time) driver.HistorySnapshot {
	s := driver.HistorySnapshot{Minute: m, TakenAt: m}
	for q := range historyQueues {
		s.Queues = append(s.Queues, driver.QueueCounts{Queue: fmt.Sprintf("queue-%02d", q), Ready: q, Running: 2, Blocked: q * 3})
	}
	for k := range driver.MaxHistoryKeys {
		s.Keys = append(s.Keys, driver.Semaphore{Key: fmt.Sprintf("group/tenant-%d", k), Blocked: 100 - k})
	}
	return s
}

// BenchmarkHistoryFlush is one worker process's flush: a minute's runs
// of 20 queues, added to rows other processes add to as well.
func BenchmarkHistoryFlush(b *testing.B) {
	forEachDB(b, func(b *testing.B, c *bq.Client) {
		hs, ctx := historyStore(b, c), context.Background()
		m := time.Now().Truncate(time.Minute)
		counts := make([]driver.Throughput, historyQueues)
		for q := range counts {
			counts[q] = driver.Throughput{Minute: m, Queue: fmt.Sprintf("queue-%02d", q), Completed: 100, Failed: 1}
		}
		for b.Loop() {
			if err := hs.HistoryAddThroughput(ctx, counts); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkHistorySnapshot is a dispatcher's snapshot of a new minute:
// 20 queues and 10 keys.
func BenchmarkHistorySnapshot(b *testing.B) {
	forEachDB(b, func(b *testing.B, c *bq.Client) {
		hs, ctx := historyStore(b, c), context.Background()
		m := time.Now().Truncate(time.Minute).Add(-24 * time.Hour)
		for b.Loop() {
			m = m.Add(time.Minute)
			if wrote, err := hs.HistoryInsertSnapshot(ctx, snapshotOf(m)); err != nil || !wrote {
				b.Fatal(wrote, err)
			}
		}
	})
}

// BenchmarkHistoryRead reads a full day of 20 queues and 10 keys a
// minute, as the overview (the last hour) and the history page's longest
// span (24 h) do.
func BenchmarkHistoryRead(b *testing.B) {
	forEachDB(b, func(b *testing.B, c *bq.Client) {
		hs, ctx := historyStore(b, c), context.Background()
		now := time.Now().Truncate(time.Minute)
		for i := range 24 * 60 {
			if _, err := hs.HistoryInsertSnapshot(ctx, snapshotOf(now.Add(-time.Duration(i)*time.Minute))); err != nil {
				b.Fatal(err)
			}
		}
		for _, since := range []time.Duration{time.Hour, 24 * time.Hour} {
			b.Run(since.String(), func(b *testing.B) {
				for b.Loop() {
					h, err := c.History(ctx, bq.HistoryOptions{Since: since})
					if err != nil || len(h.Keys) == 0 {
						b.Fatal(h, err)
					}
				}
			})
		}
	})
}

// BenchmarkSearchKeys looks for a tenant by the end of its key among
// 10,000 keys in use.
func BenchmarkSearchKeys(b *testing.B) {
	forEachDB(b, func(b *testing.B, c *bq.Client) {
		ctx := context.Background()
		args := make([]benchArgs, 10000)
		for i := range args {
			args[i] = benchArgs{Key: fmt.Sprintf("tenant-%05d", i)}
		}
		for i := 0; i < len(args); i += 1000 {
			if _, err := keyed.EnqueueMany(ctx, c, args[i:i+1000]); err != nil {
				b.Fatal(err)
			}
		}
		for b.Loop() {
			found, _, err := c.SearchKeys(ctx, bq.KeySearch{Suffix: "/tenant-04242"})
			if err != nil || len(found) != 1 {
				b.Fatal(found, err)
			}
		}
	})
}

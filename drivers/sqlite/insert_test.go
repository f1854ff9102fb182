package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/migrations"
)

func testDriver(t *testing.T) *engine {
	t.Helper()
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "bq.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	e := driver.EngineAs[*engine](d)
	p, err := migrations.NewProvider(e.SQLDB(), "sqlite", migrations.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	return e
}

// JobInsertMany' multi-row inserts give each job its own id, in input
// order, and put each in its state's table, for counts that cut into
// several chunk sizes.
func TestInsertJobsMultiRow(t *testing.T) {
	d := testDriver(t)
	ctx := context.Background()
	now := time.Now()
	for _, n := range []int{1, 2, 127, 128, 129, 300} {
		jobs := make([]*driver.NewJob, n)
		for i := range jobs {
			j := &driver.NewJob{Kind: "k", Queue: fmt.Sprintf("q%d", n), Args: fmt.Appendf(nil, `{"i":%d}`, i),
				Priority: i % 3, MaxAttempts: 1, ScheduledAt: now, State: []driver.JobState{driver.StateReady, driver.StateScheduled, driver.StateBlocked}[i%3]}
			switch j.State {
			case driver.StateScheduled:
				j.ScheduledAt = now.Add(time.Hour)
			case driver.StateBlocked:
				j.Limit = driver.Limit{Key: "g/k", To: 1, Duration: time.Minute}
			}
			jobs[i] = j
		}
		if err := driver.InTx(ctx, d, func(ex driver.Executor) error { return ex.JobInsertMany(ctx, now, jobs) }); err != nil {
			t.Fatalf("%d jobs: %v", n, err)
		}
		want := map[driver.JobState]driver.JobState{driver.StateReady: driver.StateReady,
			driver.StateScheduled: driver.StateScheduled, driver.StateBlocked: driver.StateBlocked}
		seen := map[int64]bool{}
		for i, j := range jobs {
			info, ok, err := d.Exec().JobGet(ctx, j.ID)
			if err != nil || !ok {
				t.Fatalf("%d jobs: job %d (input %d): %v, %v", n, j.ID, i, ok, err)
			}
			if string(info.Args) != string(j.Args) || info.State != want[j.State] || seen[j.ID] {
				t.Fatalf("%d jobs: input %d got id %d holding %s in %s; want %s in %s",
					n, i, j.ID, info.Args, info.State, j.Args, want[j.State])
			}
			seen[j.ID] = true
		}
	}
}

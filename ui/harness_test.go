package ui_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
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

// The dashboard's tests run on a real database of each kind, like the
// conformance suite: a SQLite file, a PostgreSQL schema and a MySQL
// database of their own.

type database struct {
	name  string
	fresh func(t *testing.T) string
}

var databases = []database{
	{testdb.SQLite, func(t *testing.T) string { return testdb.Fresh(t, testdb.SQLite) }},
	{testdb.Postgres, func(t *testing.T) string { return testdb.Fresh(t, testdb.Postgres) }},
	{testdb.MySQL, func(t *testing.T) string { return testdb.Fresh(t, testdb.MySQL) }},
}

// selectedDatabases are those of databases BQ_TEST_DRIVERS selects
// (comma list; default all).
func selectedDatabases(t *testing.T) []database {
	var out []database
	for _, db := range databases {
		if slices.Contains(testdb.Selected(t), db.name) {
			out = append(out, db)
		}
	}
	return out
}

type exportArgs struct {
	Tenant string
	Report string
}

type mailArgs struct{ To string }

var (
	exportJob = bq.Define("ui.export", func(context.Context, exportArgs) error { return nil },
		bq.JobOptions[exportArgs]{Queue: "exports", MaxAttempts: 3,
			Concurrency: &bq.Concurrency[exportArgs]{Key: func(a exportArgs) string { return a.Tenant }, To: 2}})
	mailJob = bq.Define("ui.mail", func(context.Context, mailArgs) error { return nil },
		bq.JobOptions[mailArgs]{Queue: "mail", MaxAttempts: 1})
)

// fixture is a database holding jobs in every state the dashboard shows.
type fixture struct {
	client  *bq.Client
	process int64
	// keyedFailed is a failed job of the saturated key acme.
	keyedFailed, mailFailed int64
	// mailReady is the ready job of queue mail.
	mailReady int64
}

// newFixture fills a fresh database: queue exports has key
// ui.export/acme (limit 2) saturated by 2 running jobs with 3 blocked
// behind them and 1 failed job of that key; queue mail has a ready, a
// scheduled and a failed job.
func newFixture(t *testing.T, db database) *fixture {
	t.Helper()
	ctx := context.Background()
	client, err := bq.Open(ctx, db.fresh(t), bq.Config{NoGauges: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	if err := client.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	ex := driver.ClientEngine(client).Exec()
	f := &fixture{client: client}
	f.process, err = ex.ProcessRegister(ctx, driver.Process{Kind: "worker", Name: "worker-1", Hostname: "host-a",
		PID: 4242, Queues: "exports,mail", HeartbeatInterval: time.Hour, StartedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	f.keyedFailed = f.failed(t, "exports", func() (bq.EnqueueResult, error) {
		return exportJob.Enqueue(ctx, client, exportArgs{Tenant: "acme", Report: "q1"})
	})
	for i := range 5 {
		if _, err := exportJob.Enqueue(ctx, client, exportArgs{Tenant: "acme", Report: "r" + string(rune('1'+i))}); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			f.claim(t, "exports")
		}
	}
	f.mailFailed = f.failed(t, "mail", func() (bq.EnqueueResult, error) {
		return mailJob.Enqueue(ctx, client, mailArgs{To: "bounce@example.com"})
	})
	ready, err := mailJob.Enqueue(ctx, client, mailArgs{To: "a@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	f.mailReady = ready.ID
	if _, err := mailJob.Enqueue(ctx, client, mailArgs{To: "later@example.com"}, bq.In(time.Hour)); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) claim(t *testing.T, queue string) *driver.Claim {
	t.Helper()
	claims, err := lifecycle.Claim(context.Background(), driver.ClientEngine(f.client), driver.ClaimParams{
		Queue: queue, Max: 1, ProcessID: f.process, Now: time.Now()})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim from %s: %v %v", queue, claims, err)
	}
	return claims[0]
}

// failed enqueues a job, claims it and fails it for good.
func (f *fixture) failed(t *testing.T, queue string, enqueue func() (bq.EnqueueResult, error)) int64 {
	t.Helper()
	res, err := enqueue()
	if err != nil {
		t.Fatal(err)
	}
	c := f.claim(t, queue)
	ctx := context.Background()
	err = driver.InTx(ctx, driver.ClientEngine(f.client), func(ex driver.Executor) error {
		_, err := lifecycle.Fail(ctx, ex, c, "export service answered 503\nretry later", time.Now())
		return err
	})
	if err != nil || c.ID != res.ID {
		t.Fatalf("fail job %d (claimed %d): %v", res.ID, c.ID, err)
	}
	return res.ID
}

func (f *fixture) state(t *testing.T, id int64) bq.JobState {
	t.Helper()
	info, err := f.client.Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return info.State
}

// seededMinutes is how many minutes of history seedHistory writes, up to
// the current one.
const seededMinutes = 30

// seedHistory writes the last 30 minutes of history as worker processes
// and dispatchers would: 10 to 16 completed runs a minute, 2 failed every
// fifth minute; a snapshot each minute but for a gap three to five
// minutes ago (no dispatcher ran), with acme's line growing and
// globex's steady.
func (f *fixture) seedHistory(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	hs, _ := driver.HistoryOf(driver.ClientEngine(f.client))
	now := time.Now().Truncate(time.Minute)
	var counts []driver.Throughput
	for i := range seededMinutes {
		m := now.Add(-time.Duration(seededMinutes-1-i) * time.Minute)
		c := driver.Throughput{Minute: m, Queue: "exports", Completed: seededCompleted(i)}
		if i%5 == 0 {
			c.Failed = 2
		}
		counts = append(counts, c)
		if ago := seededMinutes - 1 - i; ago >= 3 && ago <= 5 {
			continue
		}
		snap := driver.HistorySnapshot{Minute: m, TakenAt: m,
			Queues: []driver.QueueCounts{{Queue: "exports", Ready: i % 4, Running: 2, Blocked: i / 3}},
			Keys:   []driver.Semaphore{{Key: "ui.export/acme", Blocked: i / 3}, {Key: "ui.export/globex", Blocked: 1}}}
		_, err := hs.HistoryInsertSnapshot(ctx, snap)
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := hs.HistoryAddThroughput(ctx, counts); err != nil {
		t.Fatal(err)
	}
}

// seededCompleted is how many runs completed in the i-th seeded minute.
func seededCompleted(i int) int { return 10 + i%7 }

package conformance

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/bqueue/bq"
	bqmysql "github.com/bqueue/bq/drivers/mysql"
	"github.com/bqueue/bq/drivers/postgres"
	"github.com/bqueue/bq/drivers/sqlite"
	"github.com/bqueue/bq/internal/dbclock"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/testdb"
)

// database is one driver the suite runs against.
type database struct {
	name string
	// fresh returns the DSN of a new, empty database (a file, a schema).
	fresh func(t *testing.T) string
}

// selected returns the databases BQ_TEST_DRIVERS names (default: all); a
// selected one that is unreachable fails its tests (testdb).
func selected(t *testing.T) []database {
	var out []database
	for _, name := range testdb.Selected(t) {
		out = append(out, database{name: name, fresh: func(t *testing.T) string { return testdb.Fresh(t, name) }})
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// harness is one test's database, migrated, with a client on it.
type harness struct {
	t      *testing.T
	db     string // driver name
	dsn    string
	client *bq.Client
	raw    *sql.DB // for white-box checks
	test   string  // id that routes job callbacks to this test
}

// testConfig speeds up polling and maintenance for tests. A helper
// process given BQ_SKEW (a duration) plays a host whose clock is that far
// ahead (negative: behind) of the real one (skew_test.go).
func testConfig() bq.Config {
	cfg := bq.Config{
		PollInterval:      50 * time.Millisecond,
		DispatchInterval:  100 * time.Millisecond,
		HeartbeatInterval: 500 * time.Millisecond,
		ProcessDeadAfter:  10 * time.Second,
		ShutdownTimeout:   5 * time.Second,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if skew, err := time.ParseDuration(os.Getenv("BQ_SKEW")); err == nil {
		dbclock.HostNow = func() time.Time { return time.Now().Add(skew) }
	}
	return cfg
}

func newHarness(t *testing.T, db database) *harness {
	t.Helper()
	dsn := db.fresh(t)
	ctx := context.Background()
	client, err := bq.Open(ctx, dsn, testConfig())
	if err != nil {
		t.Fatalf("open %s: %v", db.name, err)
	}
	t.Cleanup(func() { client.Close() })
	if err := client.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	h := &harness{t: t, db: db.name, dsn: dsn, client: client, raw: driver.ClientEngine(client).SQLDB(), test: randomHex(8)}
	testdb.CheckReadyKeys(t, db.name, h.raw, driver.ClientEngine(client).Prefix())
	for _, ddl := range []string{
		`CREATE TABLE test_runs (
		job_id BIGINT NOT NULL, test TEXT NOT NULL, kind TEXT NOT NULL, jkey TEXT NOT NULL, pid BIGINT NOT NULL,
		started_ns BIGINT NOT NULL, ended_ns BIGINT NOT NULL DEFAULT 0,
		outcome VARCHAR(200) NOT NULL DEFAULT '')`,
		// Recorders update their run by job id: an index keeps InnoDB
		// from locking every row on the way.
		`CREATE INDEX test_runs_job ON test_runs (job_id)`,
		// A system the jobs write to, fenced by their runs' tokens
		// (JobMeta.Token): the largest token accepted per resource.
		`CREATE TABLE test_downstream (rkey VARCHAR(200) NOT NULL, token BIGINT NOT NULL, writer BIGINT NOT NULL)`,
		// Worker processes leave the conflicts they retried here.
		`CREATE TABLE test_conflicts (pid BIGINT NOT NULL, retried BIGINT NOT NULL)`,
	} {
		if _, err := h.raw.ExecContext(ctx, ddl); err != nil {
			t.Fatalf("create test tables: %v", err)
		}
	}
	return h
}

// clientWith opens a second client on the same database.
func (h *harness) clientWith(cfg bq.Config) *bq.Client {
	h.t.Helper()
	c, err := bq.Open(context.Background(), h.dsn, cfg)
	if err != nil {
		h.t.Fatalf("open: %v", err)
	}
	h.t.Cleanup(func() { c.Close() })
	return c
}

// clientAt opens a client on another database.
func (h *harness) clientAt(dsn string) *bq.Client {
	h.t.Helper()
	c, err := bq.Open(context.Background(), dsn, testConfig())
	if err != nil {
		h.t.Fatalf("open: %v", err)
	}
	h.t.Cleanup(func() { c.Close() })
	return c
}

// run starts client.Run (workers and dispatcher) until the test ends.
func (h *harness) run(c *bq.Client) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	h.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("Run: %v", err)
		}
	})
}

// bareKey is the column name key standing alone, not after a dot.
var bareKey = regexp.MustCompile("(^|[^.\\w`])key\\b")

// sql spells a white-box statement for the harness's database: on MySQL,
// where KEY is a reserved word, a bare column name key is quoted (a
// qualified s.key needs no quotes there).
func (h *harness) sql(query string) string {
	if h.db != "mysql" {
		return query
	}
	return bareKey.ReplaceAllString(query, "${1}`key`")
}

// count runs a COUNT(*) query.
func (h *harness) count(query string) int {
	h.t.Helper()
	var n int
	if err := h.raw.QueryRowContext(context.Background(), h.sql(query)).Scan(&n); err != nil {
		h.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// eventually polls cond until it holds, failing the test after timeout.
func (h *harness) eventually(timeout time.Duration, what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// progressing waits until count reaches want, failing only when count has
// not risen for stall: a loaded machine may run a large batch slowly, and
// what a scenario judges is the order of its runs, not their pace; a stall
// (no job finishing for stall) is a failure and says how far the work got.
func (h *harness) progressing(stall time.Duration, what string, count func() int, want int) {
	h.t.Helper()
	last, since := -1, time.Now()
	for {
		n := count()
		if n >= want {
			return
		}
		if n != last {
			last, since = n, time.Now()
		} else if time.Since(since) > stall {
			// Where the rest waits, for the reader of a failed run.
			stats, err := h.client.QueueStats(context.Background())
			h.t.Logf("queues at the stall: %+v (err %v)", stats, err)
			report, err := h.client.Verify(context.Background(), bq.VerifyOptions{})
			h.t.Logf("verify at the stall: %+v (err %v)", report, err)
			h.t.Fatalf("stalled waiting for %s: %d of %d for %s", what, n, want, stall)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *harness) state(id int64) bq.JobState {
	h.t.Helper()
	info, err := h.client.Job(context.Background(), id)
	if err != nil {
		h.t.Fatalf("job %d: %v", id, err)
	}
	return info.State
}

// argsOf decodes the args job id has stored (those its run gets).
func (h *harness) argsOf(id int64) Args {
	h.t.Helper()
	info, err := h.client.Job(context.Background(), id)
	if err != nil {
		h.t.Fatalf("job %d: %v", id, err)
	}
	var a Args
	if err := json.Unmarshal(info.Args, &a); err != nil {
		h.t.Fatalf("job %d's args %s: %v", id, info.Args, err)
	}
	return a
}

func (h *harness) waitState(id int64, want bq.JobState) {
	h.t.Helper()
	h.eventually(20*time.Second, fmt.Sprintf("job %d to be %s", id, want), func() bool { return h.state(id) == want })
}

// checkSemaphores asserts invariant 3: every semaphore's free value is its
// limit minus the ready and claimed jobs of its key (and a sequence's
// jobs keeping their slot while scheduled or failed), and its blocked count
// matches the blocked table. Holders are unfinished jobs: the condition
// lets SQLite use its partial index on live keys. A multi-key job holds
// each of its keys (job_keys) besides its first (concurrency_key); a job
// holds its slots (jobs.slots) of each.
func (h *harness) checkSemaphores() {
	h.t.Helper()
	rows, err := h.raw.QueryContext(context.Background(), `
SELECT s.key, s.value, s.lim, s.blocked,
	coalesce((SELECT sum(j.slots) FROM bq_jobs j JOIN bq_ready_executions r ON r.job_id = j.id WHERE j.finished_at IS NULL
		AND (j.concurrency_key = s.key OR j.id IN (SELECT k.job_id FROM bq_job_keys k WHERE k.key = s.key))), 0)
	+ coalesce((SELECT sum(j.slots) FROM bq_jobs j JOIN bq_claimed_executions c ON c.job_id = j.id WHERE j.finished_at IS NULL
		AND (j.concurrency_key = s.key OR j.id IN (SELECT k.job_id FROM bq_job_keys k WHERE k.key = s.key))), 0)
	+ coalesce((SELECT sum(j.slots) FROM bq_jobs j WHERE j.finished_at IS NULL AND j.concurrency_key = s.key AND (j.sequence & 2) <> 0
		AND (j.id IN (SELECT job_id FROM bq_scheduled_executions) OR j.id IN (SELECT job_id FROM bq_failed_executions))), 0),
	(SELECT count(*) FROM bq_blocked_executions b WHERE b.concurrency_key = s.key)
FROM bq_semaphores s`)
	if err != nil {
		h.t.Fatalf("read semaphores: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var value, lim, blocked, holders, blockedRows int
		if err := rows.Scan(&key, &value, &lim, &blocked, &holders, &blockedRows); err != nil {
			h.t.Fatal(err)
		}
		if value != lim-holders || blocked != blockedRows {
			h.t.Errorf("semaphore %q: value %d, limit %d, holders %d, blocked %d (rows %d): want value = limit - holders",
				key, value, lim, holders, blocked, blockedRows)
		}
	}
	// Client.Verify must agree: no semaphore drift (unreaped claims may
	// still wait for the dispatcher in a scenario that killed a process).
	r, err := h.client.Verify(context.Background(), bq.VerifyOptions{})
	if err != nil {
		h.t.Fatalf("Verify: %v", err)
	}
	for _, d := range r.Drift {
		if d.Kind != bq.DriftUnreaped {
			h.t.Errorf("Verify found %s drift of %q: %s", d.Kind, d.Key, d.Detail)
		}
	}
}

// driver returns the client's internal driver for white-box steps.
func (h *harness) driver() driver.Driver { return driver.ClientEngine(h.client) }

// beginTx starts a transaction of the caller's kind on the client's
// database (pgx.Tx on PostgreSQL, *sql.Tx on SQLite and MySQL), wrapped by
// its driver for EnqueueTx. One left open by a failing test is rolled back
// before its database is dropped.
func (h *harness) beginTx(ctx context.Context) (tx bq.Tx, commit func() error) {
	h.t.Helper()
	return h.beginTxOn(ctx, h.client)
}

// beginTxOn is beginTx on the database of client c.
func (h *harness) beginTxOn(ctx context.Context, c *bq.Client) (tx bq.Tx, commit func() error) {
	h.t.Helper()
	switch d := c.Driver().(type) {
	case *postgres.Driver:
		tx, err := d.Pool().Begin(ctx)
		if err != nil {
			h.t.Fatal(err)
		}
		h.t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		return postgres.Tx(tx), func() error { return tx.Commit(ctx) }
	case *sqlite.Driver:
		tx := h.beginSQLTx(ctx, d.DB())
		return sqlite.Tx(tx), tx.Commit
	case *bqmysql.Driver:
		tx := h.beginSQLTx(ctx, d.DB())
		return bqmysql.Tx(tx), tx.Commit
	}
	h.t.Fatalf("no transaction helper for %T", c.Driver())
	return nil, nil
}

// beginSQLTx begins a transaction on db, rolled back when the test ends
// unless committed.
func (h *harness) beginSQLTx(ctx context.Context, db *sql.DB) *sql.Tx {
	h.t.Helper()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}

// dumpState logs what is where, for a test that is stuck.
func (h *harness) dumpState() {
	h.t.Helper()
	for _, table := range []string{"bq_ready_executions", "bq_blocked_executions", "bq_claimed_executions",
		"bq_scheduled_executions", "bq_failed_executions", "bq_processes"} {
		h.t.Logf("%s: %d rows", table, h.count("SELECT count(*) FROM "+table))
	}
	rows, err := h.raw.QueryContext(context.Background(), `SELECT key, value, lim, blocked FROM bq_semaphores ORDER BY key`)
	if err != nil {
		h.t.Logf("semaphores: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var value, lim, blocked int
		_ = rows.Scan(&key, &value, &lim, &blocked)
		h.t.Logf("semaphore %s: value %d limit %d blocked %d", key, value, lim, blocked)
	}
	h.dumpRates()
	h.checkSemaphores()
}

// dumpRates logs every rate row, its ring's reservations and its line.
func (h *harness) dumpRates() {
	h.t.Helper()
	rows, err := h.raw.QueryContext(context.Background(), `SELECT rate_key, lim, waiting, next_at FROM bq_rate_limits ORDER BY rate_key`)
	if err != nil {
		h.t.Logf("rates: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var lim, waiting int
		var next any
		_ = rows.Scan(&key, &lim, &waiting, &next)
		h.t.Logf("rate %s: limit %d waiting %d next_at %v; reserved %s; in rate lines %d", key, lim, waiting, next,
			fmt.Sprint(h.count(`SELECT count(*) FROM bq_rate_starts WHERE job_id IS NOT NULL`)),
			h.count(`SELECT count(*) FROM bq_blocked_executions WHERE concurrency_key LIKE '/rate/%'`))
	}
	h.t.Logf("rate rows: %d; jobs in rate lines: %d", h.count(`SELECT count(*) FROM bq_rate_limits`),
		h.count(`SELECT count(*) FROM bq_blocked_executions WHERE concurrency_key LIKE '/rate/%'`))
}

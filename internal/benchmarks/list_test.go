package benchmarks

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/drivers/postgres"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlexec"
)

// listKeys is how many keys the seeded jobs spread over.
const listKeys = 1000

// seedSize is BQ_BENCH_LIST_JOBS (default 100,000): how many finished
// jobs BenchmarkListJobsByKey seeds. The docs' figures use 1,000,000.
func seedSize(b *testing.B) int {
	n := 100_000
	if s := os.Getenv("BQ_BENCH_LIST_JOBS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < listKeys {
			b.Fatalf("BQ_BENCH_LIST_JOBS=%q: give a whole number of at least %d", s, listKeys)
		}
	}
	return n
}

// seedFinished inserts n finished keyed jobs in one statement, spread
// round-robin over listKeys keys of group benchmarks.keyed, with metadata
// on one in ten: a test-only shortcut past admission, for volume.
func seedFinished(b *testing.B, c *bq.Client, n int) {
	ctx := context.Background()
	d := driver.ClientEngine(c)
	db, p := d.SQLDB(), d.Prefix()
	cols := `INSERT INTO ` + p + `jobs (kind, queue, args, attempt, max_attempts, concurrency_key,
	concurrency_limit, scheduled_at, created_at, finished_at, metadata)`
	var query string
	var args []any
	switch d.Dialect() {
	case driver.Postgres:
		query = cols + `
SELECT 'benchmarks.keyed', 'keyed', '{}', 1, 25, 'benchmarks.keyed/' || (g % $2), 2, $3, $3, $3,
	CASE WHEN g % 10 = 0 THEN jsonb_build_object('tenant', 't' || (g % 97)) END
FROM generate_series(1, $1) g`
		args = []any{n, listKeys, time.Now()}
	case driver.SQLite:
		query = `WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < ?) ` + cols + `
SELECT 'benchmarks.keyed', 'keyed', '{}', 1, 25, 'benchmarks.keyed/' || (g % ?), 2, ?, ?, ?,
	CASE WHEN g % 10 = 0 THEN json_object('tenant', 't' || (g % 97)) END FROM s`
		now := sqlexec.Micros(time.Now())
		args = []any{n, listKeys, now, now, now}
	case driver.MySQL:
		// Six digits crossed count to a million without a recursion limit.
		digit := `(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
	UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)`
		var from, sum []string
		for i := range 6 {
			from = append(from, fmt.Sprintf("%s d%d", digit, i))
			sum = append(sum, fmt.Sprintf("d%d.d * %d", i, pow10(i)))
		}
		query = cols + `
SELECT 'benchmarks.keyed', 'keyed', '{}', 1, 25, CONCAT('benchmarks.keyed/', g % ?), 2, ?, ?, ?,
	CASE WHEN g % 10 = 0 THEN JSON_OBJECT('tenant', CONCAT('t', g % 97)) END
FROM (SELECT 1 + ` + strings.Join(sum, " + ") + ` AS g FROM ` + strings.Join(from, " CROSS JOIN ") + `) s WHERE g <= ?`
		now := sqlexec.Micros(time.Now())
		args = []any{listKeys, now, now, now, n}
	}
	start := time.Now()
	if _, err := db.ExecContext(ctx, query, args...); err != nil {
		b.Fatalf("seed %d finished jobs: %v", n, err)
	}
	analyze := map[driver.Dialect]string{driver.Postgres: "ANALYZE " + p + "jobs", driver.SQLite: "ANALYZE",
		driver.MySQL: "ANALYZE TABLE " + p + "jobs"}[d.Dialect()]
	if _, err := db.ExecContext(ctx, analyze); err != nil {
		b.Fatal(err)
	}
	b.Logf("%s: seeded %d finished jobs over %d keys in %s", d.Dialect(), n, listKeys, time.Since(start).Round(time.Millisecond))
}

func pow10(i int) int {
	n := 1
	for range i {
		n *= 10
	}
	return n
}

// BenchmarkListJobsByKey lists the first page (50, newest first) of one
// key's jobs among BQ_BENCH_LIST_JOBS finished jobs through
// client.ListJobs, as the dashboard's key filter does. With
// BQ_BENCH_EXPLAIN=FILE on PostgreSQL it writes EXPLAIN (ANALYZE,
// BUFFERS) of the dashboard's filters to FILE.
func BenchmarkListJobsByKey(b *testing.B) {
	forEachDB(b, func(b *testing.B, c *bq.Client) {
		ctx := context.Background()
		n := seedSize(b)
		seedFinished(b, c, n)
		f := bq.JobFilter{Key: "benchmarks.keyed/7"}
		if file := os.Getenv("BQ_BENCH_EXPLAIN"); file != "" && driver.ClientEngine(c).Dialect() == driver.Postgres {
			explainList(b, c, file)
		}
		for b.Loop() {
			page, err := c.ListJobs(ctx, f)
			if err != nil {
				b.Fatal(err)
			}
			if len(page.Jobs) != bq.DefaultListLimit || page.Next == "" {
				b.Fatalf("first page holds %d jobs, next %q: want %d and a next page", len(page.Jobs), page.Next, bq.DefaultListLimit)
			}
		}
	})
}

// explainList writes the PostgreSQL plans of the dashboard's filters to
// file: each filter is listed once through a pool of its own whose tracer
// keeps the statement and arguments the driver sent, which are then
// explained.
func explainList(b *testing.B, c *bq.Client, file string) {
	ctx := context.Background()
	d := driver.ClientEngine(c)
	cfg := d.(interface{ Pool() *pgxpool.Pool }).Pool().Config()
	sent := &lastQuery{}
	cfg.ConnConfig.Tracer = sent
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	ex := driver.EngineOf(postgres.New(pool)).WithPrefix(d.Prefix()).Exec()
	var out strings.Builder
	for _, f := range []driver.JobFilter{
		{Key: "benchmarks.keyed/7"},
		{KeyPrefix: "benchmarks.keyed/12"},
		{States: []driver.JobState{driver.StateCompleted}},
		{States: []driver.JobState{driver.StateFailed}},
		{Metadata: map[string]string{"tenant": "t5"}},
		{Tag: "vip"},
		{Key: "benchmarks.keyed/7", BeforeID: 500_000},
	} {
		f.Max = bq.DefaultListLimit + 1
		if _, err := ex.JobList(ctx, f); err != nil {
			b.Fatal(err)
		}
		rows, err := d.SQLDB().QueryContext(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+sent.sql, sent.args...)
		if err != nil {
			b.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				b.Fatal(err)
			}
			plan = append(plan, line)
		}
		rows.Close()
		fmt.Fprintf(&out, "-- %s\n%s\n\n", describe(f), strings.Join(plan, "\n"))
	}
	if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
		b.Fatal(err)
	}
}

// lastQuery is a pgx tracer keeping the last statement sent and its
// arguments.
type lastQuery struct {
	sql  string
	args []any
}

func (q *lastQuery) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	q.sql, q.args = data.SQL, data.Args
	return ctx
}

func (q *lastQuery) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// describe names a filter's set fields.
func describe(f driver.JobFilter) string {
	var parts []string
	if f.Key != "" {
		parts = append(parts, "Key "+f.Key)
	}
	if f.KeyPrefix != "" {
		parts = append(parts, "KeyPrefix "+f.KeyPrefix)
	}
	for _, s := range f.States {
		parts = append(parts, "State "+string(s))
	}
	for k, v := range f.Metadata {
		parts = append(parts, "Metadata "+k+"="+v)
	}
	if f.Tag != "" {
		parts = append(parts, "Tag "+f.Tag)
	}
	if f.BeforeID > 0 {
		parts = append(parts, fmt.Sprintf("after cursor %d", f.BeforeID))
	}
	return strings.Join(parts, ", ")
}

// BenchmarkEnqueuePlain stores one unkeyed job without metadata: the
// path metadata must not slow down (one INSERT statement).
func BenchmarkEnqueuePlain(b *testing.B) {
	forEachDB(b, func(b *testing.B, c *bq.Client) {
		ctx := context.Background()
		for b.Loop() {
			if _, err := plain.Enqueue(ctx, c, benchArgs{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Command river-bench runs bq bench's drain and steady workloads on River
// (github.com/riverqueue/river), so the two can be compared side by side on
// one machine. It is a module of its own: bq never depends on River.
//
//	river-bench --dsn postgres://... --mode drain --jobs 20000 --slots 100 --json
//	river-bench --dsn sqlite --mode steady --jobs 5000 --rate 500 --json
//
// River is tuned as its own benchmarks tune it: FetchCooldown 1ms,
// FetchPollInterval 50ms. It prints the JSON line `bq bench --json` prints.
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/schollz/progressbar/v3"
	_ "modernc.org/sqlite"

	"github.com/bqueue/bq/internal/pgstats"
)

const benchQueue = "bench"

type options struct {
	dsn        string
	mode       string
	jobs       int
	slots      int
	rate       float64
	batch      int
	producers  int
	jsonOut    bool
	progress   bool
	cpuprofile string
	sqlStats   bool
	tableStats bool   // PostgreSQL drain: measure the tables (dead rows, size)
	autovacuum string // with tableStats: "on" (the server's) or "off" on the run's tables
}

// result is the JSON line, the same shape as bq bench's.
type result struct {
	System      string  `json:"system"`
	Mode        string  `json:"mode"`
	Driver      string  `json:"driver"`
	Config      string  `json:"config"`
	Jobs        int     `json:"jobs"`
	Slots       int     `json:"slots"`
	Keys        int     `json:"keys"`
	To          int     `json:"to"`
	Rate        float64 `json:"rate,omitempty"`
	EnqueuePerS float64 `json:"enqueue_per_s"`
	WorkPerS    float64 `json:"work_per_s"`
	P50MS       float64 `json:"p50_ms"`
	P95MS       float64 `json:"p95_ms"`
	P99MS       float64 `json:"p99_ms"`
	PeakRSSMB   float64 `json:"peak_rss_mb"`
	EnqueueS    float64 `json:"enqueue_s"`
	WorkS       float64 `json:"work_s"`
	// --table-stats: what the run left in each table of its schema.
	Tables    *pgstats.Report `json:"tables,omitempty"`
	GoVersion string          `json:"go"`
	CPUs      int             `json:"cpus"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "river-bench: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("river-bench", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.dsn, "dsn", "", "postgres://... (a fresh schema is made) or sqlite (a fresh temporary file)")
	fs.StringVar(&o.mode, "mode", "drain", "drain or steady")
	fs.IntVar(&o.jobs, "jobs", 20000, "number of jobs")
	fs.IntVar(&o.slots, "slots", 100, "MaxWorkers of the bench queue")
	fs.Float64Var(&o.rate, "rate", 500, "steady: jobs per second in total")
	fs.IntVar(&o.batch, "batch", 1000, "jobs per InsertMany")
	fs.IntVar(&o.producers, "producers", 2, "goroutines inserting the batches at once (as bq bench --producers)")
	fs.BoolVar(&o.jsonOut, "json", false, "print one JSON line on stdout")
	fs.BoolVar(&o.progress, "progress", true, "draw progress bars on stderr")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the measured phase to `file`")
	fs.BoolVar(&o.sqlStats, "sql-stats", false, "PostgreSQL: print round trips per statement to stderr")
	fs.BoolVar(&o.tableStats, "table-stats", false, "PostgreSQL drain: report each table's inserts, updates, deletes, dead tuples and size (as bq bench --table-stats)")
	fs.StringVar(&o.autovacuum, "autovacuum", "on", "with --table-stats: on (as the server has it) or off on the run's tables")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case o.dsn == "":
		return errors.New("--dsn is required (postgres://... or sqlite)")
	case o.mode != "drain" && o.mode != "steady":
		return fmt.Errorf("--mode %q: use drain or steady", o.mode)
	case o.jobs < 1 || o.slots < 1 || o.rate <= 0 || o.batch < 1 || o.producers < 1:
		return errors.New("--jobs, --slots, --rate, --batch and --producers must be positive")
	case o.autovacuum != "on" && o.autovacuum != "off":
		return fmt.Errorf("--autovacuum %q: use on or off", o.autovacuum)
	case o.tableStats && (o.mode != "drain" || strings.HasPrefix(o.dsn, "sqlite")):
		return errors.New("--table-stats measures a drain on PostgreSQL")
	}
	var prof *os.File
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		prof = f
	}
	res := &result{System: "river", Mode: o.mode, Config: "tuned", Jobs: o.jobs, Slots: o.slots,
		GoVersion: runtime.Version(), CPUs: runtime.NumCPU()}
	var err error
	if strings.HasPrefix(o.dsn, "sqlite") {
		res.Driver = "sqlite"
		err = onSQLite(ctx, o, prof, res)
	} else {
		res.Driver = "postgres"
		err = onPostgres(ctx, o, prof, res)
	}
	if err != nil {
		return err
	}
	res.PeakRSSMB = peakRSSMB()
	if o.jsonOut {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	fmt.Printf("river %s on %s: %d jobs, %d slots: enqueue %.0f jobs/s, work %.0f jobs/s, p50 %.2f ms, p95 %.2f ms, p99 %.2f ms, peak RSS %.1f MB\n",
		res.Mode, res.Driver, res.Jobs, res.Slots, res.EnqueuePerS, res.WorkPerS, res.P50MS, res.P95MS, res.P99MS, res.PeakRSSMB)
	if res.Tables != nil {
		res.Tables.Print(os.Stdout, res.Jobs)
	}
	return nil
}

// onPostgres runs in a new schema bench_river_<random>, dropped afterwards.
func onPostgres(ctx context.Context, o options, prof *os.File, res *result) error {
	admin, err := pgxpool.New(ctx, o.dsn)
	if err != nil {
		return err
	}
	defer admin.Close()
	schema := "bench_river_" + randomSuffix()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return err
	}
	defer admin.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+schema+" CASCADE") //nolint:errcheck
	sep := "?"
	if strings.Contains(o.dsn, "?") {
		sep = "&"
	}
	cfg, err := pgxpool.ParseConfig(o.dsn + sep + "search_path=" + schema)
	if err != nil {
		return err
	}
	// Named, so that --table-stats can wait for them to close.
	cfg.ConnConfig.RuntimeParams["application_name"] = pgstats.AppName(schema)
	stats := &roundTrips{n: map[string]int{}}
	if o.sqlStats {
		cfg.ConnConfig.Tracer = stats
		defer stats.print(os.Stderr)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	live := func(ctx context.Context) (int, error) {
		var n int
		err := pool.QueryRow(ctx, liveJobs).Scan(&n)
		return n, err
	}
	var m *pgstats.Measurement
	migrated := func(ctx context.Context) error {
		if !o.tableStats {
			return nil
		}
		m, err = pgstats.Begin(ctx, admin, schema, o.autovacuum == "on")
		return err
	}
	if err := bench(ctx, o, prof, res, riverpgxv5.New(pool), schema, live, migrated); err != nil {
		return err
	}
	if m != nil {
		// Closed, so that the connections report their last counts.
		pool.Close()
		res.Tables, err = m.End(ctx)
	}
	return err
}

// onSQLite runs on a new file in a temporary directory, with one
// connection as River's SQLite driver asks for.
func onSQLite(ctx context.Context, o options, prof *os.File, res *result) error {
	dir, err := os.MkdirTemp("", "river-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	dsn := "file:" + filepath.Join(dir, "bench.db") +
		"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	live := func(ctx context.Context) (int, error) {
		var n int
		err := db.QueryRowContext(ctx, liveJobs).Scan(&n)
		return n, err
	}
	return bench(ctx, o, prof, res, riversqlite.New(db), "", live, func(context.Context) error { return nil })
}

// liveJobs counts the bench queue's jobs not yet finished.
const liveJobs = `SELECT count(*) FROM river_job WHERE queue = 'bench'
AND state NOT IN ('completed', 'cancelled', 'discarded')`

type noopArgs struct {
	EnqueuedAt int64 `json:"t,omitempty"` // Unix nanoseconds
}

func (noopArgs) Kind() string { return "bench_noop" }

func (noopArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: benchQueue, MaxAttempts: 1}
}

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	t *tally
}

func (w *noopWorker) Work(_ context.Context, job *river.Job[noopArgs]) error {
	w.t.start(job.Args.EnqueuedAt)
	return nil
}

// tally counts started jobs and keeps their latency from enqueue to start.
type tally struct {
	want    int64
	started atomic.Int64
	lat     []time.Duration
	done    chan struct{}
}

func (t *tally) start(enqueuedAt int64) {
	now := time.Now()
	n := t.started.Add(1)
	if t.lat != nil && n <= int64(len(t.lat)) && enqueuedAt != 0 {
		t.lat[n-1] = now.Sub(time.Unix(0, enqueuedAt))
	}
	if n == t.want {
		close(t.done)
	}
}

// bench runs the workload on drv; migrated is called once River's tables
// exist, before the first job is inserted.
func bench[TTx any](ctx context.Context, o options, prof *os.File, res *result, drv riverdriver.Driver[TTx],
	schema string, live func(context.Context) (int, error), migrated func(context.Context) error) error {
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	migrator, err := rivermigrate.New(drv, &rivermigrate.Config{Logger: quiet, Schema: schema})
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := migrated(ctx); err != nil {
		return err
	}
	t := &tally{want: int64(o.jobs), done: make(chan struct{})}
	if o.mode == "steady" {
		t.lat = make([]time.Duration, o.jobs)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{t: t})
	client, err := river.NewClient(drv, &river.Config{
		FetchCooldown:     time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond,
		Logger:            quiet,
		Queues:            map[string]river.QueueConfig{benchQueue: {MaxWorkers: o.slots}},
		Schema:            schema,
		Workers:           workers,
	})
	if err != nil {
		return err
	}
	stopProfile := func() {}
	startProfile := func() {
		if prof != nil && pprof.StartCPUProfile(prof) == nil {
			stopProfile = pprof.StopCPUProfile
		}
	}

	var enq, work time.Duration
	if o.mode == "drain" {
		var done, next atomic.Int64
		stopBar := bar(o, "enqueue", done.Load)
		t0 := time.Now()
		// From --producers goroutines at once, as bq bench does.
		var wg sync.WaitGroup
		errs := make([]error, o.producers)
		for p := range o.producers {
			wg.Go(func() {
				params := make([]river.InsertManyParams, 0, o.batch)
				for {
					i := int(next.Add(int64(o.batch))) - o.batch
					if i >= o.jobs {
						return
					}
					params = params[:0]
					for range min(o.batch, o.jobs-i) {
						params = append(params, river.InsertManyParams{Args: noopArgs{}})
					}
					if _, err := client.InsertMany(ctx, params); err != nil {
						errs[p] = err
						next.Store(int64(o.jobs))
						return
					}
					done.Add(int64(len(params)))
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			stopBar()
			return fmt.Errorf("insert: %w", err)
		}
		enq = time.Since(t0)
		stopBar()

		stopBar = bar(o, "work", t.started.Load)
		startProfile()
		t0 = time.Now()
		if err := client.Start(ctx); err != nil {
			return err
		}
		err = wait(ctx, t, live)
		work = time.Since(t0)
		stopProfile()
		stopBar()
	} else {
		if err := client.Start(ctx); err != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
		stopBar := bar(o, "enqueue+work", t.started.Load)
		startProfile()
		enq, work, err = steady(ctx, o, client, t, live)
		stopProfile()
		stopBar()
		lat := slices.Clone(t.lat)
		slices.Sort(lat)
		res.Rate = o.rate
		res.P50MS, res.P95MS, res.P99MS = ms(percentile(lat, 50)), ms(percentile(lat, 95)), ms(percentile(lat, 99))
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := errors.Join(err, client.Stop(stopCtx)); err != nil {
		return err
	}
	res.EnqueueS, res.WorkS = enq.Seconds(), work.Seconds()
	res.EnqueuePerS = float64(o.jobs) / enq.Seconds()
	res.WorkPerS = float64(o.jobs) / work.Seconds()
	return nil
}

// steady has 4 producers insert one job at a time at o.rate in total.
func steady[TTx any](ctx context.Context, o options, client *river.Client[TTx], t *tally,
	live func(context.Context) (int, error)) (enq, work time.Duration, err error) {
	const producers = 4
	interval := time.Duration(float64(time.Second) / o.rate)
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		wg.Go(func() {
			for k := p; k < o.jobs; k += producers {
				if d := time.Until(t0.Add(time.Duration(k) * interval)); d > 0 {
					time.Sleep(d)
				}
				if _, err := client.Insert(ctx, noopArgs{EnqueuedAt: time.Now().UnixNano()}, nil); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	enq = time.Since(t0)
	close(errs)
	if err := <-errs; err != nil {
		return 0, 0, err
	}
	err = wait(ctx, t, live)
	return enq, time.Since(t0), err
}

// wait waits until every job has started and then until the database
// shows none unfinished (River completes jobs in batches, after Work).
func wait(ctx context.Context, t *tally, live func(context.Context) (int, error)) error {
	select {
	case <-t.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	for {
		n, err := live(ctx)
		if err != nil || n == 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func bar(o options, what string, cur func() int64) (stop func()) {
	if !o.progress {
		return func() {}
	}
	var w io.Writer = os.Stderr
	b := progressbar.NewOptions64(int64(o.jobs),
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(fmt.Sprintf("%-22s", "river "+o.mode+" "+what)),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("jobs"),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				_ = b.Set64(cur())
				_ = b.Finish()
				return
			case <-tick.C:
				_ = b.Set64(cur())
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
	}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func peakRSSMB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// roundTrips counts statements and pipelined batches (one round trip
// each) by their first words.
type roundTrips struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *roundTrips) add(sql string) {
	f := strings.Fields(sql)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[strings.Join(f[:min(len(f), 4)], " ")]++
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(d.SQL)
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	r.add("batch")
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (r *roundTrips) print(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(r.n))
	total := 0
	for k, n := range r.n {
		keys = append(keys, k)
		total += n
	}
	slices.SortFunc(keys, func(a, b string) int { return r.n[b] - r.n[a] })
	fmt.Fprintf(w, "round trips: %d (not counting prepares)\n", total)
	for _, k := range keys[:min(len(keys), 12)] {
		fmt.Fprintf(w, "  %8d  %s\n", r.n[k], k)
	}
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/pgstats"
)

// benchResult is the one JSON line `bq bench --json` prints; River's peer
// in bench/river prints the same shape.
type benchResult struct {
	System      string  `json:"system"`
	Mode        string  `json:"mode"`
	Driver      string  `json:"driver"`
	Config      string  `json:"config"`
	Jobs        int     `json:"jobs"`
	Slots       int     `json:"slots"`
	Keys        int     `json:"keys"`
	SecondKeys  int     `json:"second_keys,omitempty"`
	To          int     `json:"to"`
	NetDelayMS  float64 `json:"net_delay_ms,omitempty"` // --net-delay, each way
	MaxActive   int     `json:"max_active,omitempty"`   // --max-active
	Rate        float64 `json:"rate,omitempty"`
	EnqueuePerS float64 `json:"enqueue_per_s"`
	WorkPerS    float64 `json:"work_per_s"`
	P50MS       float64 `json:"p50_ms"`
	P95MS       float64 `json:"p95_ms"`
	P99MS       float64 `json:"p99_ms"`
	PeakRSSMB   float64 `json:"peak_rss_mb"`
	EnqueueS    float64 `json:"enqueue_s"`
	WorkS       float64 `json:"work_s"`
	// backlog: median time from the holder's release to the next job's
	// start, with a small and a large line of blocked jobs on the key.
	BacklogSmall   int     `json:"backlog_small,omitempty"`
	BacklogLarge   int     `json:"backlog_large,omitempty"`
	BacklogSmallMS float64 `json:"backlog_small_ms,omitempty"`
	BacklogLargeMS float64 `json:"backlog_large_ms,omitempty"`
	BacklogRatio   float64 `json:"backlog_ratio,omitempty"`
	// --table-stats: what the run left in each table of its schema.
	Tables *pgstats.Report `json:"tables,omitempty"`
	// --processes: the fleet's connections and wake-ups.
	Fleet *fleetStats `json:"fleet,omitempty"`
	// rate: the configured rate, the starts/s achieved (the first
	// period's burst left out), their ratio, the most starts of one key
	// seen within one period, and the time a ring slot took to be reused
	// (the period plus the shortfall), on average and at least.
	RateLimit        int     `json:"rate_limit,omitempty"`
	RatePeriodMS     float64 `json:"rate_period_ms,omitempty"`
	RateKeys         int     `json:"rate_keys,omitempty"`
	RateTargetPerS   float64 `json:"rate_target_per_s,omitempty"`
	RatePerS         float64 `json:"rate_per_s,omitempty"`
	RateRatio        float64 `json:"rate_ratio,omitempty"`
	RateMaxWindow    int     `json:"rate_max_window,omitempty"`
	RateSlotGapMS    float64 `json:"rate_slot_gap_ms,omitempty"`
	RateMinSlotGapMS float64 `json:"rate_min_slot_gap_ms,omitempty"`
	// RateSteadyPerS is the keys' limits over the mean slot reuse, the
	// rate without the first burst's spread; RateLate counts the runs
	// that missed their start slack (a slot each, not run).
	RateSteadyPerS float64 `json:"rate_steady_per_s,omitempty"`
	RateLate       int     `json:"rate_late,omitempty"`
	// steady --window: the latency of the jobs enqueued in each window
	// of that length from the first enqueue.
	Windows   []latencyWindow `json:"windows,omitempty"`
	GoVersion string          `json:"go"`
	CPUs      int             `json:"cpus"`
}

func runBench(ctx context.Context, e *env, args []string) error {
	if os.Getenv(fleetWorkerEnv) != "" {
		return runFleetWorker(ctx, e, args)
	}
	f := newFlagSet(e, "bench", "bench --dsn DSN --mode MODE [--jobs N] [--slots W] [--keys K --to T] [--rate R] [--rate-limit N --rate-period P --rate-keys K] [--net-delay D] [--json]",
		`Measures bq on a fresh database: a new schema (MySQL: database) bench_<random> on
PostgreSQL (dropped afterwards), a new file in a temporary directory on
SQLite (--dsn sqlite). Jobs are no-ops on queue "bench", worked by one
client with --slots slots. Modes:

  drain    EnqueueMany --jobs unkeyed jobs, then time working them all
  steady   4 goroutines enqueue one by one at --rate jobs/s in total for
           jobs/rate seconds while workers run; reports the latency from
           enqueue to start (p50, p95, p99); --window 10s also reports it
           for the jobs enqueued in each 10 s (how a fresh schema's
           first minutes go)
  keyed    drain with --keys keys (default 1000), limit --to (default 2)
           each, keys assigned round-robin; --second-keys N gives each job
           a second key too (the cost of several keys per job)
  hotkey   drain with one key, limit --to (default 50)
  backlog  time from completing a key's only running job to the start of
           the next one, with --backlog-small and --backlog-large jobs
           blocked on the key, each on a database of its own; handoffs
           alternate between the two (median of --handoffs each)
  rate     EnqueueMany --jobs jobs (default 5000) rated at --rate-limit
           starts per --rate-period per key, round-robin over --rate-keys
           keys, then work them off; reports the starts/s achieved from the
           first start to the last (the first period's allowance, free at
           once, left out), its ratio to the configured rate, and the most
           starts of one key within any one period, which must not exceed
           the limit: the run fails if it does

--config tuned sets PollInterval 50ms and DispatchInterval 100ms (both
documented Config fields); --config default uses bq's defaults. Progress
bars go to stderr when it is a terminal; --json prints one JSON line on
stdout.

--plans FILE (PostgreSQL) loads auto_explain into each connection of the
run (LOAD, which needs a superuser unless the library is in
$libdir/plugins) and writes the plan of every statement they run, with
ANALYZE and BUFFERS, to FILE, each under a line giving the seconds since
the run began and the backend's pid: which plan a connection used when
(bench/matrix/notes.md, "A fresh deployment's first minute"). Every
statement is instrumented, so the run is slower: read its plans, not its
timings.

--table-stats (PostgreSQL; drain, keyed, hotkey) reads pg_stat_user_tables
and the size of every table of the run's schema after migrating and again
after the drain, once the run's connections have closed: rows inserted,
updated (HOT) and deleted, dead tuples left, autovacuum runs, bytes.
--autovacuum off disables autovacuum on those tables for the run, so that
every dead tuple made is still counted at the end.

--processes N (drain, steady, keyed, hotkey) works the jobs in N child bq
processes of --slots slots each (25 unless given) while this one enqueues
and measures: jobs/s, enqueue->start latency (steady), the server
connections the run holds at peak and the wake-ups sent per job
(PostgreSQL NOTIFYs, MySQL signal-log rows), each read by every process
(docs/scaling.md). keyed and hotkey hold their keys' limits across the
processes, as a fleet does.

--net-delay D (PostgreSQL, MySQL) runs the measurement as if the server
were across a network: every connection of the run's clients, producers
and --processes workers goes through a proxy in this process that
delays each packet by D in each direction, so that a round trip costs 2D
more (loopback's ~50 us hides the 0.2-1 ms real deployments pay). The
schema's set-up and drop and the untimed statistics reads (--table-stats,
--processes' connection and wake-up counts) go straight to the server.`)
	var o benchOptions
	f.envString(&o.dsn, "dsn", "BQ_DSN", "`DSN` of the server: postgres://... (a fresh schema is made), mysql://... (a fresh database) or sqlite (a fresh temporary file)")
	f.StringVar(&o.mode, "mode", "drain", "workload: "+strings.Join(benchModes, ", "))
	f.IntVar(&o.jobs, "jobs", 20000, "number of jobs")
	f.IntVar(&o.slots, "slots", 100, "worker slots (jobs at once) of the one client")
	f.IntVar(&o.keys, "keys", 0, "keyed: number of keys (default 1000)")
	f.IntVar(&o.secondKeys, "second-keys", 0, "keyed: each job also holds a second key, out of `N` (limit 1000 each, never binding): the cost of a second key")
	f.IntVar(&o.to, "to", 0, "keyed, hotkey: limit per key (default 2 keyed, 50 hotkey)")
	f.Float64Var(&o.rate, "rate", 500, "steady: enqueue rate, jobs per second in total")
	f.IntVar(&o.batch, "batch", 1000, "jobs per EnqueueMany")
	f.BoolVar(&o.fair, "fair", false, "the bench queue's policy has FairShare: its claims go key by key (docs/limits.md, Fair share)")
	f.IntVar(&o.maxActive, "max-active", 0, "the bench queue's policy caps its running jobs at `N` across every process (Policy.MaxActive): its claims go through the cap; 0 for none")
	f.IntVar(&o.producers, "producers", 2, "goroutines enqueueing the batches at once (the enqueue ceiling uses 2 connections)")
	f.IntVar(&o.backlogSmall, "backlog-small", 1000, "backlog: jobs blocked on the key, small case")
	f.IntVar(&o.backlogLarge, "backlog-large", 1000000, "backlog: jobs blocked on the key, large case")
	f.IntVar(&o.handoffs, "handoffs", 50, "backlog: handoffs timed in each case")
	f.StringVar(&o.config, "config", "tuned", "bq.Config: tuned (PollInterval 50ms, DispatchInterval 100ms) or default")
	f.BoolVar(&o.separate, "separate-producer", false, "steady: enqueue through a second client, as another process would (no in-process wake-up)")
	f.BoolVar(&o.jsonOut, "json", false, "print one JSON line on stdout")
	f.BoolVar(&o.progress, "progress", true, "draw progress bars on stderr when it is a terminal")
	f.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the measured phases to `file`")
	f.BoolVar(&o.sqlStats, "sql-stats", false, "PostgreSQL: print the statements by total client-side time to stderr")
	f.BoolVar(&o.waitEvents, "wait-events", false, "PostgreSQL and MySQL drains (with --processes too): sample the run's server connections while it works and print what they do and wait for to stderr")
	f.BoolVar(&o.tableStats, "table-stats", false, "PostgreSQL drains: report each table's inserts, updates, deletes, dead tuples and size")
	f.StringVar(&o.autovacuum, "autovacuum", "on", "with --table-stats: on (as the server has it) or off on the run's tables")
	f.IntVar(&o.processes, "processes", 0, "drain, steady, keyed, hotkey: work the jobs in `N` child processes of --slots slots each (default --slots 25 then)")
	f.IntVar(&o.pool, "pool", 0, "with --processes: connections in each worker process's pool (default: the driver's, `N`)")
	f.IntVar(&o.rateLimit, "rate-limit", 500, "rate: starts per --rate-period per rate key")
	f.DurationVar(&o.ratePeriod, "rate-period", time.Second, "rate: the window --rate-limit counts starts in (whole milliseconds)")
	f.IntVar(&o.rateKeys, "rate-keys", 1, "rate: rate keys, each with the limit; jobs round-robin over them")
	f.StringVar(&o.plans, "plans", "", "PostgreSQL: write the plan of every statement the run's connections run, with ANALYZE and BUFFERS, to `file` (auto_explain, loaded per session: a superuser's DSN; slows the run)")
	f.DurationVar(&o.netDelay, "net-delay", 0, "PostgreSQL, MySQL: delay every packet between the run's clients (fleet processes included) and the server by `duration` each way, through a proxy in this process, as across a network (e.g. 250us; a round trip gains twice it); schema set-up and the untimed statistics reads go direct")
	f.DurationVar(&o.window, "window", 0, "steady: also report the latency of the jobs enqueued in each `window` of this length (e.g. 10s), from the first enqueue")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if err := f.noArgs(pos); err != nil {
		return err
	}
	if o.processes != 0 && !f.given("slots") {
		o.slots = 25
	}
	if o.mode == "rate" && !f.given("jobs") {
		o.jobs = 5000
	}
	if err := o.validate(f); err != nil {
		return err
	}

	b, err := newBencher(e, o)
	if err != nil {
		return err
	}
	if o.netDelay > 0 {
		if err := b.startNetDelay(); err != nil {
			return err
		}
		defer b.net.Close()
	}
	if o.plans != "" {
		if b.plans, err = openPlanLog(o.plans); err != nil {
			return err
		}
		defer b.plans.close()
	}
	if o.cpuprofile != "" {
		pf, err := os.Create(o.cpuprofile)
		if err != nil {
			return fmt.Errorf("bench: create CPU profile: %w", err)
		}
		defer pf.Close()
		b.profile = pf
	}
	run := b.run
	if o.processes > 0 {
		run = b.runFleet
	}
	res, err := run(ctx)
	if err != nil {
		return err
	}
	res.PeakRSSMB = peakRSSMB()
	if o.sqlStats {
		b.stats.print(e.stderr)
	}
	if o.jsonOut {
		if err := json.NewEncoder(e.stdout).Encode(res); err != nil {
			return err
		}
	} else {
		printBenchResult(e.stdout, res)
	}
	return checkRate(res)
}

// clientConfig is the bq.Config every client of the run uses.
func (o *benchOptions) clientConfig(log *slog.Logger) bq.Config {
	cfg := bq.Config{
		Queues: map[string]int{benchQueue: o.slots},
		Logger: log,
	}
	if o.config == "tuned" {
		cfg.PollInterval = 50 * time.Millisecond
		cfg.DispatchInterval = 100 * time.Millisecond
	}
	return cfg
}

func printBenchResult(w io.Writer, r *benchResult) {
	fmt.Fprintf(w, "bq bench %s on %s (config %s): %d jobs, %d slots", r.Mode, r.Driver, r.Config, r.Jobs, r.Slots)
	if r.Keys > 0 {
		fmt.Fprintf(w, ", %d keys of limit %d", r.Keys, r.To)
	}
	if r.MaxActive > 0 {
		fmt.Fprintf(w, ", the queue capped at %d running", r.MaxActive)
	}
	if r.SecondKeys > 0 {
		fmt.Fprintf(w, ", a second key each out of %d", r.SecondKeys)
	}
	if r.NetDelayMS > 0 {
		fmt.Fprintf(w, ", each packet delayed %s each way", time.Duration(math.Round(r.NetDelayMS*float64(time.Millisecond))))
	}
	fmt.Fprintln(w)
	switch r.Mode {
	case "backlog":
		fmt.Fprintf(w, "  next job starts %.2f ms after release with %d blocked, %.2f ms with %d blocked (ratio %.2f)\n",
			r.BacklogSmallMS, r.BacklogSmall, r.BacklogLargeMS, r.BacklogLarge, r.BacklogRatio)
	case "rate":
		printRate(w, r)
	case "steady":
		fmt.Fprintf(w, "  %.0f jobs/s enqueued (target %.0f); latency enqueue->start p50 %.2f ms, p95 %.2f ms, p99 %.2f ms\n",
			r.EnqueuePerS, r.Rate, r.P50MS, r.P95MS, r.P99MS)
		printWindows(w, r.Windows)
	default:
		fmt.Fprintf(w, "  enqueue %.0f jobs/s (%.2fs), work %.0f jobs/s (%.2fs)\n", r.EnqueuePerS, r.EnqueueS, r.WorkPerS, r.WorkS)
	}
	printFleet(w, r)
	fmt.Fprintf(w, "  peak RSS %.1f MB\n", r.PeakRSSMB)
	if r.Tables != nil {
		r.Tables.Print(w, r.Jobs)
	}
}

// peakRSSMB is the process's peak resident set size (getrusage's Maxrss,
// in KiB on Linux).
func peakRSSMB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024
}

// startProfile starts the CPU profile of the measured phase, if asked
// for, and returns its stop. A run takes one profile.
func (b *bencher) startProfile() func() {
	if b.profile == nil || b.profiled {
		return func() {}
	}
	b.profiled = true
	if err := pprof.StartCPUProfile(b.profile); err != nil {
		fmt.Fprintf(b.e.stderr, "bench: CPU profile: %v\n", err)
		return func() {}
	}
	return pprof.StopCPUProfile
}

func newResult(o benchOptions, driver string) *benchResult {
	return &benchResult{System: "bq", Mode: o.mode, Driver: driver, Config: o.config, Jobs: o.jobs,
		Slots: o.slots, Keys: o.keys, SecondKeys: o.secondKeys, To: o.to, NetDelayMS: ms(o.netDelay), MaxActive: o.maxActive, GoVersion: runtime.Version(), CPUs: runtime.NumCPU()}
}

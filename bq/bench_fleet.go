package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/bqueue/bq"
	bqmysql "github.com/bqueue/bq/drivers/mysql"
)

// fleetWorkerEnv, set in a child's environment, makes `bq bench` the
// worker process of a fleet run rather than a measurement: hidden, as
// only the parent starts one.
const fleetWorkerEnv = "BQ_BENCH_FLEET_WORKER"

// maxProcesses bounds --processes: past it the run measures the
// machine's scheduler, not bq.
const maxProcesses = 256

// fleetModes are the modes --processes runs.
var fleetModes = map[string]bool{"drain": true, "steady": true, "keyed": true, "hotkey": true}

// fleetStats is what a --processes run measures besides throughput and
// latency.
type fleetStats struct {
	Processes int `json:"processes"`
	// ConnsPeak is the most server connections the run's processes held
	// at once (the parent's included), sampled every 100 ms:
	// pg_stat_activity by application_name on PostgreSQL,
	// information_schema.processlist by database on MySQL.
	ConnsPeak int `json:"server_conns_peak"`
	// ConnsPerProcess is the connections each process may open: the
	// pool's MaxConns and the listener's own on PostgreSQL; on MySQL,
	// whose pool is unbounded, the idle cap and the listener's reads.
	ConnsPerProcess int `json:"conns_per_process"`
	// WakeupsPerJob is the wake-ups sent per job: NOTIFYs on the ready
	// channel (PostgreSQL, counted by a listener of the parent's) or rows
	// written to the signal log (MySQL). Every process receives or reads
	// each one, so the fleet's cost is WakeupReadsPerJob.
	WakeupsPerJob     float64 `json:"wakeups_per_job"`
	WakeupReadsPerJob float64 `json:"wakeup_reads_per_job"`
}

// fleetChildResult is the JSON line a worker process prints as it ends.
type fleetChildResult struct {
	Started int     `json:"started"`
	LatNS   []int64 `json:"lat_ns,omitempty"`
	EnqNS   []int64 `json:"enq_ns,omitempty"` // each latency's job's enqueue instant (Unix ns)
}

// fleet is a run of --processes worker processes on one fresh database.
type fleet struct {
	b        *bencher
	db       *benchDB
	children []*fleetChild
	// stderr is the parent's, shared with the children's copies.
	stderr *lockedWriter
}

type fleetChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

// runFleet measures --mode drain, steady, keyed or hotkey with the jobs
// worked by --processes child processes of --slots slots each; the parent
// only enqueues and measures.
func (b *bencher) runFleet(ctx context.Context) (*benchResult, error) {
	res := newResult(b.o, b.driverName())
	res.Fleet = &fleetStats{Processes: b.o.processes}
	db, err := b.freshDB(ctx)
	if err != nil {
		return nil, err
	}
	defer db.close()
	fl := &fleet{b: b, db: db, stderr: &lockedWriter{w: b.e.stderr}}
	defer fl.kill()
	if res.Fleet.ConnsPerProcess, err = fl.checkConnections(ctx); err != nil {
		return nil, err
	}
	c := db.clients[0]
	t := newTally(b.o.jobs, false)
	job := defineBench(b.o.to, t, b.o.secondKeys > 0)

	if b.o.mode != "steady" {
		// Held until every child is up, so that the clock times working,
		// not starting processes.
		if err := c.PauseQueue(ctx, benchQueue); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		enq, err := b.enqueueAll(ctx, c, job, b.o.jobs)
		if err != nil {
			return nil, err
		}
		res.EnqueueS, res.EnqueuePerS = enq.Seconds(), float64(b.o.jobs)/enq.Seconds()
	}
	if err := fl.start(ctx); err != nil {
		return nil, err
	}
	wake, err := fl.countWakeups(ctx)
	if err != nil {
		return nil, err
	}
	peak := fl.sampleConnections(ctx)
	waits := b.sampleWaits(ctx, db)
	t0 := time.Now()
	if b.o.mode != "steady" {
		err = c.ResumeQueue(ctx, benchQueue)
	} else {
		var enq time.Duration
		if enq, err = b.produce(ctx, job, c, t0); err == nil {
			res.EnqueueS, res.EnqueuePerS = enq.Seconds(), float64(b.o.jobs)/enq.Seconds()
		}
	}
	if err == nil {
		err = waitIdle(ctx, c)
	}
	work := time.Since(t0)
	waits.end(fl.stderr) // the children may be writing to stderr
	res.Fleet.ConnsPeak = peak()
	wakeups, werr := wake()
	if err := errors.Join(err, werr); err != nil {
		return nil, err
	}
	res.WorkS, res.WorkPerS = work.Seconds(), float64(b.o.jobs)/work.Seconds()
	res.Fleet.WakeupsPerJob = float64(wakeups) / float64(b.o.jobs)
	res.Fleet.WakeupReadsPerJob = res.Fleet.WakeupsPerJob * float64(b.o.processes)

	lat, enq, started, err := fl.stop()
	if err != nil {
		return nil, err
	}
	// Each job ran once, in one of the processes: a run that lost or
	// doubled one measured something else.
	if started != b.o.jobs {
		return nil, fmt.Errorf("bench: the %d processes started %d jobs, want %d", b.o.processes, started, b.o.jobs)
	}
	if b.o.mode == "steady" {
		res.Rate = b.o.rate
		res.Windows = latencyWindows(t0, b.o.window, enq, lat)
		slices.Sort(lat)
		res.P50MS, res.P95MS, res.P99MS = ms(percentile(lat, 50)), ms(percentile(lat, 95)), ms(percentile(lat, 99))
	}
	return res, nil
}

// workerDSN is the DSN of the worker processes: on PostgreSQL --pool is
// pgx's pool_max_conns.
func (fl *fleet) workerDSN() string {
	if fl.b.o.pool == 0 || fl.b.driverName() != "postgres" {
		return fl.db.dsn
	}
	return fl.db.dsn + "&pool_max_conns=" + strconv.Itoa(fl.b.o.pool)
}

// start starts the worker processes and waits until each one is running.
func (fl *fleet) start(ctx context.Context) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench: find the bq executable for the worker processes: %w", err)
	}
	args := []string{"bench", "--mode", fl.b.o.mode, "--slots", strconv.Itoa(fl.b.o.slots),
		"--jobs", strconv.Itoa(fl.b.o.jobs), "--config", fl.b.o.config, "--schema", fl.db.schema, "--pool", strconv.Itoa(fl.b.o.pool),
		"--to", strconv.Itoa(fl.b.o.to), "--second-keys", strconv.Itoa(fl.b.o.secondKeys)}
	for range fl.b.o.processes {
		cmd := exec.CommandContext(ctx, exe, args...)
		// The DSN goes in the environment, out of ps.
		cmd.Env = append(os.Environ(), fleetWorkerEnv+"=1", "BQ_DSN="+fl.workerDSN())
		cmd.Stderr = fl.stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("bench: start worker process: %w", err)
		}
		out := bufio.NewScanner(stdout)
		out.Buffer(nil, 64<<20)
		fl.children = append(fl.children, &fleetChild{cmd: cmd, stdin: stdin, out: out})
	}
	for i, ch := range fl.children {
		if !ch.out.Scan() || ch.out.Text() != "ready" {
			return fmt.Errorf("bench: worker process %d of %d did not start (its error is above): %v", i+1, len(fl.children), ch.out.Err())
		}
	}
	return nil
}

// stop ends the worker processes (each stops when its stdin closes) and
// returns their latencies, their jobs' enqueue instants, and the jobs they
// started.
func (fl *fleet) stop() ([]time.Duration, []int64, int, error) {
	var lat []time.Duration
	var enq []int64
	started := 0
	var errs []error
	for i, ch := range fl.children {
		ch.stdin.Close()
		var r fleetChildResult
		if !ch.out.Scan() {
			errs = append(errs, fmt.Errorf("worker process %d printed no result: %v", i+1, ch.out.Err()))
		} else if err := json.Unmarshal(ch.out.Bytes(), &r); err != nil {
			errs = append(errs, fmt.Errorf("worker process %d: %w", i+1, err))
		}
		if err := ch.cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("worker process %d: %w", i+1, err))
		}
		started += r.Started
		for i, ns := range r.LatNS {
			lat = append(lat, time.Duration(ns))
			if i < len(r.EnqNS) {
				enq = append(enq, r.EnqNS[i])
			} else {
				enq = append(enq, 0) // not known: in no window
			}
		}
	}
	fl.children = nil
	if err := errors.Join(errs...); err != nil {
		return nil, nil, 0, fmt.Errorf("bench: %w", err)
	}
	return lat, enq, started, nil
}

// kill ends the processes a failed run left.
func (fl *fleet) kill() {
	for _, ch := range fl.children {
		_ = ch.cmd.Process.Kill()
		_ = ch.cmd.Wait()
	}
}

// produce enqueues the steady mode's jobs: 4 producers one by one at
// --rate in total from t0, as steady does, and returns how long it took.
func (b *bencher) produce(ctx context.Context, job *bq.Job[benchArgs], c *bq.Client, t0 time.Time) (time.Duration, error) {
	const producers = 4
	interval := time.Duration(float64(time.Second) / b.o.rate)
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		wg.Go(func() {
			for k := p; k < b.o.jobs; k += producers {
				if d := time.Until(t0.Add(time.Duration(k) * interval)); d > 0 {
					time.Sleep(d)
				}
				if _, err := job.Enqueue(ctx, c, benchArgs{EnqueuedAt: time.Now().UnixNano()}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return time.Since(t0), <-errs
}

// runFleetWorker is a worker process of a fleet run: it works the bench
// queue with --slots slots, says "ready" once running, and when its
// stdin closes stops and prints the jobs it started and their latencies.
func runFleetWorker(ctx context.Context, e *env, args []string) error {
	f := newFlagSet(e, "bench", "bench (worker process of --processes)", "")
	var o benchOptions
	var schema string
	f.envString(&o.dsn, "dsn", "BQ_DSN", "DSN")
	f.StringVar(&o.mode, "mode", "drain", "")
	f.IntVar(&o.slots, "slots", 25, "")
	f.IntVar(&o.jobs, "jobs", 0, "")
	f.StringVar(&o.config, "config", "tuned", "")
	f.StringVar(&schema, "schema", "", "")
	f.IntVar(&o.pool, "pool", 0, "")
	f.IntVar(&o.to, "to", 0, "")
	f.IntVar(&o.secondKeys, "second-keys", 0, "")
	if _, err := f.parse(args); err != nil {
		return err
	}
	b, err := newBencher(e, o)
	if err != nil {
		return err
	}
	db := &benchDB{b: b, dsn: o.dsn, schema: schema}
	defer db.closeClients()
	c, err := fleetWorkerClient(ctx, db)
	if err != nil {
		return err
	}
	t := newTally(o.jobs, o.mode == "steady")
	defineBench(o.to, t, o.secondKeys > 0) // the parent's kind: its name says its limits
	run := runClient(ctx, c)
	time.Sleep(200 * time.Millisecond) // registered and polling
	fmt.Fprintln(e.stdout, "ready")
	stdin := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdin)
	}()
	select {
	case <-stdin:
	case <-ctx.Done():
	case <-run.done:
	}
	if err := run.stop(); err != nil {
		return err
	}
	r := fleetChildResult{Started: int(t.started.Load())}
	for i, d := range t.lat[:min(len(t.lat), r.Started)] {
		r.LatNS, r.EnqNS = append(r.LatNS, int64(d)), append(r.EnqNS, t.enq[i])
	}
	return json.NewEncoder(e.stdout).Encode(r)
}

// fleetWorkerClient opens the worker's client; a MySQL one with --pool
// gets a driver of its own, to bound its pool.
func fleetWorkerClient(ctx context.Context, db *benchDB) (*bq.Client, error) {
	o := db.b.o
	if o.pool == 0 || db.b.driverName() != "mysql" {
		return db.client(ctx)
	}
	drv, err := bqmysql.Open(ctx, o.dsn)
	if err != nil {
		return nil, err
	}
	drv.DB().SetMaxOpenConns(o.pool)
	c, err := bq.NewClient(drv, o.clientConfig(db.b.log))
	if err != nil {
		drv.Close()
		return nil, err
	}
	db.clients = append(db.clients, c)
	return c, nil
}

// printFleet writes the fleet's lines of the text output.
func printFleet(w io.Writer, r *benchResult) {
	if r.Fleet == nil {
		return
	}
	wake := map[string]string{"postgres": "NOTIFYs", "mysql": "signal-log rows"}[r.Driver]
	fmt.Fprintf(w, "  %d processes x %d slots: %.0f jobs/s worked", r.Fleet.Processes, r.Slots, r.WorkPerS)
	if r.Mode == "steady" {
		fmt.Fprintf(w, ", enqueue->start p50 %.2f ms, p99 %.2f ms", r.P50MS, r.P99MS)
	}
	fmt.Fprintln(w)
	if wake != "" { // a server, not SQLite's one file
		fmt.Fprintf(w, "  server connections: %d at peak (up to %d per process)\n", r.Fleet.ConnsPeak, r.Fleet.ConnsPerProcess)
		fmt.Fprintf(w, "  wake-ups: %.3f %s per job, %.3f read per job across the fleet\n", r.Fleet.WakeupsPerJob, wake, r.Fleet.WakeupReadsPerJob)
	}
}

// given reports whether flag name was on the command line.
func (f *flagSet) given(name string) bool {
	found := false
	f.Visit(func(fl *flag.Flag) { found = found || fl.Name == name })
	return found
}

// lockedWriter lets the worker processes share the parent's stderr: each
// one's is copied by a goroutine of its own.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/bqueue/bq"
)

const benchQueue = "bench"

// benchArgs are a bench job's arguments: its key ("" for none) and, in
// steady mode, the instant it was enqueued.
type benchArgs struct {
	Key        string `json:"k,omitempty"`
	Second     string `json:"s,omitempty"` // keyed --second-keys: the job's second key
	EnqueuedAt int64  `json:"t,omitempty"` // Unix nanoseconds
}

// tally counts the jobs that started and keeps each one's latency from
// enqueue to start.
type tally struct {
	want    int64
	started atomic.Int64
	lat     []time.Duration
	enq     []int64   // steady: each latency's job's enqueue instant (Unix ns)
	log     *startLog // rate: every start, when set
	done    chan struct{}
}

func newTally(want int, keepLatency bool) *tally {
	t := &tally{want: int64(want), done: make(chan struct{})}
	if keepLatency {
		t.lat, t.enq = make([]time.Duration, want), make([]int64, want)
	}
	return t
}

func (t *tally) start(a benchArgs) {
	now := time.Now()
	if t.log != nil {
		t.log.add(a.Key, now)
	}
	n := t.started.Add(1)
	if t.lat != nil && n <= int64(len(t.lat)) && a.EnqueuedAt != 0 {
		t.lat[n-1], t.enq[n-1] = now.Sub(time.Unix(0, a.EnqueuedAt)), a.EnqueuedAt
	}
	if n == t.want {
		close(t.done)
	}
}

// The bench's job kinds are defined once per process (bq refuses a kind
// defined twice), one per limit a run asks for, and count into the tally
// of the run under way: runs follow one another.
var (
	benchMu   sync.Mutex
	benchJobs = map[benchKind]*bq.Job[benchArgs]{}
	benchRun  atomic.Pointer[tally]
)

// benchKind is what a bench job kind is defined by: its key's limit (0:
// unkeyed) and whether its jobs carry a second key.
type benchKind struct {
	to     int
	second bool
}

// secondTo is the limit of a second key: high enough never to bind, so a
// run with a second key measures what the key costs, not its limit.
const secondTo = 1000

// defineBench returns the bench job kind for this run, a no-op limited by
// its args' key (none when empty) to `to` at once: "bench.job", or
// "bench.job.to<N>" with a limit, all in the limit group "bench.job";
// with second, "bench.job.to<N>.second", whose jobs also hold their
// second key (group "bench.second", limit secondTo).
func defineBench(to int, t *tally, second ...bool) *bq.Job[benchArgs] {
	benchRun.Store(t)
	benchMu.Lock()
	defer benchMu.Unlock()
	kind := benchKind{to: to, second: len(second) > 0 && second[0] && to > 0}
	if j, ok := benchJobs[kind]; ok {
		return j
	}
	name := "bench.job"
	opts := bq.JobOptions[benchArgs]{Queue: benchQueue, MaxAttempts: 1}
	if to > 0 {
		name = fmt.Sprintf("bench.job.to%d", to)
		opts.Concurrency = &bq.Concurrency[benchArgs]{Key: func(a benchArgs) string { return a.Key }, To: to, Group: "bench.job"}
	}
	if kind.second {
		name += ".second"
		opts.MoreConcurrency = []bq.Concurrency[benchArgs]{{Key: func(a benchArgs) string { return a.Second }, To: secondTo, Group: "bench.second"}}
	}
	j := bq.Define(name, func(_ context.Context, a benchArgs) error {
		benchRun.Load().start(a)
		return nil
	}, opts)
	benchJobs[kind] = j
	return j
}

func (b *bencher) run(ctx context.Context) (*benchResult, error) {
	res := newResult(b.o, b.driverName())
	var err error
	switch b.o.mode {
	case "drain", "keyed", "hotkey":
		err = b.drain(ctx, res)
	case "steady":
		err = b.steady(ctx, res)
	case "backlog":
		err = b.backlog(ctx, res)
	case "rate":
		err = b.rate(ctx, res)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// bar draws progress toward n on stderr, reading the count from cur, until
// the returned stop is called; only on a terminal (piped to a file or a
// CI log, the redraws are noise).
func (b *bencher) bar(n int, what string, cur func() int64) (stop func()) {
	if !b.o.progress || !isTerminal(b.e.stderr) {
		return func() {}
	}
	bar := progressbar.NewOptions64(int64(n),
		progressbar.OptionSetWriter(b.e.stderr),
		progressbar.OptionSetDescription(fmt.Sprintf("%-22s", fmt.Sprintf("%s %s", b.o.mode, what))),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("jobs"),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(b.e.stderr) }),
	)
	// The bar's clock starts now. Left to itself it starts at its first
	// redraw, after the first tick has counted jobs already, and divides
	// them by the nanoseconds since: "1066098081 jobs/s".
	bar.StartWithoutRender()
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				_ = bar.Set64(cur())
				_ = bar.Finish()
				return
			case <-t.C:
				_ = bar.Set64(cur())
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
	}
}

// keyOf assigns job i its key: round-robin over the mode's keys.
func (b *bencher) keyOf(i int) string {
	switch b.o.mode {
	case "keyed":
		return "k" + strconv.Itoa(i%b.o.keys)
	case "hotkey":
		return "hot"
	}
	return ""
}

// secondOf assigns job i its second key with --second-keys: round-robin
// over them, so each first key's jobs spread over several second keys.
func (b *bencher) secondOf(i int) string {
	if b.o.secondKeys == 0 {
		return ""
	}
	return "s" + strconv.Itoa(i%b.o.secondKeys)
}

// enqueueAll stores n jobs with EnqueueMany, batch by batch, keys as
// keyOf assigns them, and returns how long it took.
func (b *bencher) enqueueAll(ctx context.Context, c *bq.Client, job *bq.Job[benchArgs], n int) (time.Duration, error) {
	return b.enqueueBatches(ctx, c, job, n, func(i, j int) []benchArgs {
		args := make([]benchArgs, 0, j-i)
		for k := i; k < j; k++ {
			args = append(args, benchArgs{Key: b.keyOf(k), Second: b.secondOf(k)})
		}
		return args
	})
}

// enqueueBatches stores n jobs, batch(i, j) giving the args of jobs i to
// j-1, one EnqueueMany per batch from --producers goroutines at once
// (each takes the next batch in order), with a progress bar.
func (b *bencher) enqueueBatches(ctx context.Context, c *bq.Client, job *bq.Job[benchArgs], n int,
	batch func(i, j int) []benchArgs) (time.Duration, error) {
	var done, next atomic.Int64
	stop := b.bar(n, "enqueue", done.Load)
	defer stop()
	var mu sync.Mutex // batch is not safe for concurrent use
	var wg sync.WaitGroup
	errs := make([]error, b.o.producers)
	t0 := time.Now()
	for p := range b.o.producers {
		wg.Go(func() {
			for {
				i := int(next.Add(int64(b.o.batch))) - b.o.batch
				if i >= n {
					return
				}
				mu.Lock()
				args := batch(i, min(i+b.o.batch, n))
				mu.Unlock()
				if _, err := job.EnqueueMany(ctx, c, args); err != nil {
					errs[p] = err
					next.Store(int64(n)) // the others stop too
					return
				}
				done.Add(int64(len(args)))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// running is a client's Run in the background.
type running struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returns
	err    error
}

// runClient starts c.Run in the background.
func runClient(ctx context.Context, c *bq.Client) *running {
	ctx, cancel := context.WithCancel(ctx)
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		r.err = c.Run(ctx)
		close(r.done)
	}()
	return r
}

// stop cancels Run and waits for it to return.
func (r *running) stop() error {
	r.cancel()
	<-r.done
	return r.err
}

// waitIdle waits until the bench queue has no ready, running or blocked
// job left, that is until the last completion is committed. QueueStats
// counts the live rows, so a read while thousands are live is not cheap:
// read back to back all the run long (a --processes run), it held a
// server core of a two-core machine (MariaDB's slow log: 116 ms a read,
// 110 reads in a 7 s fleet drain) and was measured as the fleet's own
// cost. So the reads space out while much is left: the next comes after
// half the time the jobs left would take at the pace of the last two
// reads (at least 2 ms, at most 1 s), and the last ones, with few jobs
// left, 2 ms apart as before.
func waitIdle(ctx context.Context, c *bq.Client) error {
	lastLive, lastAt := -1, time.Time{}
	for {
		stats, err := c.QueueStats(ctx)
		if err != nil {
			return err
		}
		now := time.Now()
		live := 0
		for _, s := range stats {
			if s.Queue == benchQueue {
				live += s.Ready + s.Running + s.Blocked + s.Scheduled
			}
		}
		if live == 0 {
			return nil
		}
		wait := idleWait(live, lastLive, now.Sub(lastAt))
		lastLive, lastAt = live, now
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// idleWait is how long waitIdle waits before its next read: 2 ms once
// at most 100 jobs are live; otherwise half the time live jobs take at
// the pace from lastLive, read since ago (-1: no read yet), within
// [2 ms, 1 s], and 50 ms after a first read or one that saw no progress.
func idleWait(live, lastLive int, since time.Duration) time.Duration {
	const least, most = 2 * time.Millisecond, time.Second
	switch {
	case live <= 100:
		return least
	case lastLive < 0 || lastLive <= live || since <= 0:
		return 50 * time.Millisecond
	}
	perJob := since / time.Duration(lastLive-live)
	return min(max(perJob*time.Duration(live)/2, least), most)
}

// waitStarted waits until every job of t has started, or fails when
// the client stopped first.
func waitStarted(ctx context.Context, t *tally, r *running) error {
	select {
	case <-t.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("bench interrupted after %d of %d jobs started: %w", t.started.Load(), t.want, ctx.Err())
	case <-r.done:
		return fmt.Errorf("bench: the client stopped after %d of %d jobs started: %v", t.started.Load(), t.want, r.err)
	}
}

// drain: enqueue everything, then time working it off (drain, keyed, hotkey).
func (b *bencher) drain(ctx context.Context, res *benchResult) error {
	db, err := b.freshDB(ctx)
	if err != nil {
		return err
	}
	defer db.close()
	c := db.clients[0]
	t := newTally(b.o.jobs, false)
	job := defineBench(b.o.to, t, b.o.secondKeys > 0)
	enq, err := b.enqueueAll(ctx, c, job, b.o.jobs)
	if err != nil {
		return err
	}

	waits := b.sampleWaits(ctx, db)
	work, err := b.work(ctx, c, t)
	waits.end(b.e.stderr)
	if err != nil {
		return err
	}
	res.EnqueueS, res.WorkS = enq.Seconds(), work.Seconds()
	res.EnqueuePerS = float64(b.o.jobs) / enq.Seconds()
	res.WorkPerS = float64(b.o.jobs) / work.Seconds()
	if b.o.tableStats {
		res.Tables, err = db.tableStats(ctx)
	}
	return err
}

// work runs c's workers until every job t counts has started and the
// client is idle, with the progress bar and profile of a work phase, and
// returns how long it took.
func (b *bencher) work(ctx context.Context, c *bq.Client, t *tally) (time.Duration, error) {
	stopBar := b.bar(b.o.jobs, "work", t.started.Load)
	stopProfile := b.startProfile()
	t0 := time.Now()
	run := runClient(ctx, c)
	err := waitStarted(ctx, t, run)
	if err == nil {
		err = waitIdle(ctx, c)
	}
	work := time.Since(t0)
	stopProfile()
	stopBar()
	return work, errors.Join(err, run.stop())
}

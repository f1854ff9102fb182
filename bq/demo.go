package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bqueue/bq/internal/humanize"

	"github.com/bqueue/bq"
)

// The demo's cast: one large tenant with a backlog and two small ones
// exporting, two things being refreshed.
var (
	demoTenants = []string{"acme", "globex", "initech"}
	// demoExports is each tenant's number of exports: the large tenant's
	// backlog is enqueued first, yet delays no small tenant.
	demoExports = map[string]int{"acme": 40, "globex": 5, "initech": 5}
	demoTargets = []string{"dashboard", "report"}
)

// demoLarge is the tenant with the backlog.
const demoLarge = "acme"

const (
	demoExportLimit = 2 // exports of one tenant at once
	demoRefreshes   = 3 // back-to-back refreshes of each target
	demoWorkers     = 3
	demoSlots       = 3 // jobs at once per worker
	demoPrefix      = "bq_demo_"
	demoDeadline    = 45 * time.Second
)

type exportArgs struct {
	Tenant string `json:"tenant"`
	N      int    `json:"n"`
}

type refreshArgs struct {
	Target string `json:"target"`
}

// workerKey carries a worker's name into its jobs' contexts: Run's context
// values reach every job it runs.
type workerKey struct{}

// demo is one run of `bq demo`.
type demo struct {
	e       *env
	rec     *recorder
	export  *bq.Job[exportArgs]
	refresh *bq.Job[refreshArgs]
	clients []*bq.Client
	ids     []int64            // every stored job
	admits  map[string][]int64 // admitted refreshes by target
	dropped map[string]int     // discarded refreshes by target
}

func runDemo(ctx context.Context, e *env, args []string) error {
	f := newFlagSet(e, "demo", "demo [--dsn DSN | --keep]",
		`Shows the headline feature: per-key concurrency limits held across
several workers. It defines an "export" job limited to 2 per tenant (the
rest wait, bq.Block) and a "refresh" job limited to 1 per target (duplicates
are dropped, bq.Discard), enqueues a backlog of 40 exports for one large
tenant and then 5 for each of two small ones, and a few duplicate
refreshes, runs 3 workers (separate clients on one database, as separate
processes would be), and prints a timeline, how many exports of each
tenant ran at once and how long each tenant waited, measured from the
jobs' own start and end instants: the large tenant's backlog does not
delay the small ones. Then it shows fair share: a queue whose policy
shares its slots among tenants, where the large tenant uses every slot
while it is alone and the small ones, arriving 0.7 s later, start at once
and share the slots with it.

With no --dsn it uses a SQLite file in a new temporary directory, deleted
at the end unless --keep is given: no server needed. With --dsn it uses
tables prefixed bq_demo_, dropping and re-creating them first, and leaves
them for bq status and bq ui (it prints both commands); bq's own tables
(bq_*) are not touched.`)
	dsn := f.String("dsn", "", "database `DSN` to run on (default: a temporary SQLite file)")
	keep := f.Bool("keep", false, "keep the temporary SQLite file, to look at it with bq status and bq ui")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if err := f.noArgs(pos); err != nil {
		return err
	}
	if *keep && *dsn != "" {
		return f.fail("--keep is for the temporary SQLite file: with --dsn the demo's tables stay anyway")
	}

	cfg := bq.Config{
		Queues:           map[string]int{"default": demoSlots, demoShareQueue: demoSlots},
		PollInterval:     20 * time.Millisecond,
		DispatchInterval: 200 * time.Millisecond,
		ShutdownTimeout:  5 * time.Second,
		Logger:           slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	var where, temp string
	if *dsn == "" {
		dir, err := os.MkdirTemp("", "bq-demo-")
		if err != nil {
			return fmt.Errorf("demo: create a temporary directory: %w", err)
		}
		if !*keep {
			defer os.RemoveAll(dir)
		}
		temp = filepath.Join(dir, "demo.db")
		*dsn, where = "sqlite://"+temp, "a new SQLite file, "+temp
	} else {
		cfg.Prefix = demoPrefix
		where = humanize.RedactDSN(*dsn) + ", tables " + demoPrefix + "*"
	}

	d := &demo{e: e, rec: &recorder{}, admits: map[string][]int64{}, dropped: map[string]int{}}
	d.define()
	defer d.close()
	for i := range demoWorkers {
		c := cfg
		c.Name = fmt.Sprintf("worker-%d", i+1)
		client, err := bq.Open(ctx, *dsn, c)
		if err != nil {
			return err
		}
		d.clients = append(d.clients, client)
	}
	fmt.Fprintf(e.stdout, "bq demo: %d workers share one database (%s).\n\n", demoWorkers, where)
	if cfg.Prefix != "" {
		if err := resetTables(ctx, d.clients[0]); err != nil {
			return err
		}
	}
	if err := d.clients[0].Migrate(ctx); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "Jobs:\n")
	fmt.Fprintf(e.stdout, "  export   at most %d per tenant at once; the others wait their turn (bq.Block)\n", demoExportLimit)
	fmt.Fprintf(e.stdout, "  refresh  at most 1 per target at once; duplicates are dropped (bq.Discard)\n\n")
	if err := d.enqueue(ctx); err != nil {
		return err
	}
	if err := d.work(ctx); err != nil {
		return err
	}
	if err := d.fairShare(ctx); err != nil {
		return err
	}
	d.afterwards(*dsn, cfg.Prefix, temp, *keep)
	return nil
}

// afterwards says where the demo's jobs are left, with the commands that
// show them.
func (d *demo) afterwards(dsn, prefix, temp string, keep bool) {
	out := d.e.stdout
	if temp != "" && !keep {
		fmt.Fprintf(out, "\nThe temporary file %s is deleted now; run `%s demo --keep` to keep it and look at it with bq status and bq ui.\n", temp, d.e.command())
		return
	}
	shown := humanize.RedactDSN(dsn)
	var flags string
	if prefix != "" {
		flags = " --prefix " + prefix
	}
	where := "the file " + temp + " is kept"
	if temp == "" {
		where = "its tables, prefixed " + prefix + ", are kept"
	}
	fmt.Fprintf(out, "\nThe demo's jobs stay where they ran (%s); look at them with:\n", where)
	fmt.Fprintf(out, "  %s status --dsn %s%s\n", d.e.command(), shellQuote(shown), flags)
	fmt.Fprintf(out, "  %s ui --dsn %s%s\n", d.e.command(), shellQuote(shown), flags)
	if shown != dsn {
		fmt.Fprintf(out, "(with your password where the DSN shows ***)\n")
	}
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// plain characters (a DSN's ? and & would be taken by the shell).
func shellQuote(s string) string {
	if strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// define points the demo's two job kinds at this run.
func (d *demo) define() {
	demoRun.Store(d)
	k := demoKinds()
	d.export, d.refresh = k.export, k.refresh
}

// The demo's job kinds are defined once per process (bq refuses a kind
// defined twice), by the first demo run, not at start: every other
// command of this binary (a worker, bq bench) would otherwise define
// them too and warn that it works none of their queues. They record
// into the demo run under way: runs follow one another.
var (
	demoRun   atomic.Pointer[demo]
	demoKinds = sync.OnceValue(func() (k struct {
		export  *bq.Job[exportArgs]
		refresh *bq.Job[refreshArgs]
		share   *bq.Job[shareArgs]
	}) {
		k.export = bq.Define("demo.export", func(ctx context.Context, a exportArgs) error {
			return demoRun.Load().rec.run(ctx, "export", a.Tenant, fmt.Sprintf("export #%d", a.N))
		}, bq.JobOptions[exportArgs]{
			Concurrency: &bq.Concurrency[exportArgs]{
				Key:        func(a exportArgs) string { return a.Tenant },
				To:         demoExportLimit,
				OnConflict: bq.Block,
			},
		})
		k.refresh = bq.Define("demo.refresh", func(ctx context.Context, a refreshArgs) error {
			return demoRun.Load().rec.run(ctx, "refresh", a.Target, "refresh")
		}, bq.JobOptions[refreshArgs]{
			Concurrency: &bq.Concurrency[refreshArgs]{
				Key:        func(a refreshArgs) string { return a.Target },
				To:         1,
				OnConflict: bq.Discard,
			},
		})
		k.share = defineDemoShare()
		return k
	})
)

// enqueue stores the exports in one transaction and the refreshes one by
// one, before any worker runs, so what is admitted is deterministic.
func (d *demo) enqueue(ctx context.Context) error {
	c, out := d.clients[0], d.e.stdout
	// The large tenant's backlog first: in a queue worked oldest first
	// without per-tenant limits, the small tenants would wait behind it.
	var exports []exportArgs
	for _, t := range demoTenants {
		for n := 1; n <= demoExports[t]; n++ {
			exports = append(exports, exportArgs{Tenant: t, N: n})
		}
	}
	results, err := d.export.EnqueueMany(ctx, c, exports)
	if err != nil {
		return err
	}
	ready, blocked := map[string]int{}, map[string]int{}
	for i, r := range results {
		d.ids = append(d.ids, r.ID)
		if r.State == bq.StateBlocked {
			blocked[exports[i].Tenant]++
		} else {
			ready[exports[i].Tenant]++
		}
	}
	fmt.Fprintf(out, "Enqueue %d exports in one transaction (export.EnqueueMany), %s's backlog of %d first:\n",
		len(exports), demoLarge, demoExports[demoLarge])
	for _, t := range demoTenants {
		fmt.Fprintf(out, "  %-8s %d ready, %d blocked\n", t, ready[t], blocked[t])
	}

	fmt.Fprintf(out, "\nEnqueue %d refreshes of each target, back to back (refresh.Enqueue):\n", demoRefreshes)
	for _, target := range demoTargets {
		for range demoRefreshes {
			if err := d.enqueueRefresh(ctx, target); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *demo) enqueueRefresh(ctx context.Context, target string) error {
	r, err := d.refresh.Enqueue(ctx, d.clients[0], refreshArgs{Target: target})
	if err != nil {
		return err
	}
	if r.State == bq.StateDiscarded {
		d.dropped[target]++
		fmt.Fprintf(d.e.stdout, "  refresh %-9s -> discarded: %s\n", target, r.Reason)
		return nil
	}
	d.ids = append(d.ids, r.ID)
	d.admits[target] = append(d.admits[target], r.ID)
	fmt.Fprintf(d.e.stdout, "  refresh %-9s -> %s, job %d\n", target, r.State, r.ID)
	return nil
}

// work runs the workers until every job has finished, then reports.
func (d *demo) work(ctx context.Context) error {
	out := d.e.stdout
	fmt.Fprintf(out, "\nStart %d workers (separate clients, %d slots each, polling every 20ms);\n", demoWorkers, demoSlots)
	fmt.Fprintf(out, "each job sleeps 150-400ms and records when it started and ended.\n")

	d.rec.start()
	if err := d.runWorkers(ctx, d.wait); err != nil {
		return err
	}
	return d.report(ctx)
}

// runWorkers runs every client's workers until wait returns (it gets the
// channel a worker that stops early reports on), stops them, and returns
// wait's error joined with theirs.
func (d *demo) runWorkers(ctx context.Context, wait func(context.Context, <-chan error) error) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, len(d.clients))
	for i, c := range d.clients {
		name := fmt.Sprintf("worker-%d", i+1)
		wctx := context.WithValue(runCtx, workerKey{}, name)
		wg.Go(func() {
			if err := c.Run(wctx); err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
		})
	}
	err := wait(ctx, errs)
	stop()
	wg.Wait()
	close(errs)
	for e := range errs {
		err = errors.Join(err, e)
	}
	return err
}

func (d *demo) close() {
	for _, c := range d.clients {
		c.Close()
	}
}

// resetTables drops the demo's tables (prefix bq_demo_) so that a run
// interrupted earlier leaves nothing behind to confuse this one.
func resetTables(ctx context.Context, c *bq.Client) error {
	for range 100 {
		ms, err := c.MigrationStatus(ctx)
		if err != nil {
			return err
		}
		if appliedVersion(ms) == 0 {
			return nil
		}
		if err := c.MigrateDown(ctx); err != nil {
			return fmt.Errorf("reset the demo's tables: %w", err)
		}
	}
	return errors.New("reset the demo's tables: migrations keep being applied")
}

// recorder collects the runs the jobs report.
type recorder struct {
	mu   sync.Mutex
	t0   time.Time
	runs []execution
}

// execution is one run of a job, as the job itself saw it.
type execution struct {
	kind   string // export, refresh
	key    string // tenant or target
	label  string // "export #7"
	id     int64
	worker string
	start  time.Duration // since the workers started
	end    time.Duration
}

func (r *recorder) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.t0 = time.Now()
}

// run is the body of every demo job: sleep 150-400ms, recording the start
// and end instants.
func (r *recorder) run(ctx context.Context, kind, key, label string) error {
	meta, _ := bq.JobFromContext(ctx)
	worker, _ := ctx.Value(workerKey{}).(string)
	r.mu.Lock()
	t0 := r.t0
	r.mu.Unlock()
	start := time.Since(t0)
	select {
	case <-time.After(150*time.Millisecond + rand.N(250*time.Millisecond)):
	case <-ctx.Done():
		return ctx.Err() // not recorded: the job goes back to ready
	}
	end := time.Since(t0)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = append(r.runs, execution{kind: kind, key: key, label: label, id: meta.ID,
		worker: worker, start: start, end: end})
	return nil
}

func (r *recorder) snapshot() []execution {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]execution(nil), r.runs...)
}

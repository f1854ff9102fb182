// Package bq is a job queue that lives in your SQL database (PostgreSQL,
// MySQL 8.0+/MariaDB 10.6+, or SQLite) and holds "at most N jobs per key
// at once" across every worker of every process.
//
//	var Charge = bq.Define("billing.charge", charge, bq.JobOptions[ChargeArgs]{
//		Queue: "billing",
//		Concurrency: &bq.Concurrency[ChargeArgs]{
//			Key: func(a ChargeArgs) string { return strconv.FormatInt(a.OrderID, 10) },
//			To:  1,
//		},
//	})
//
//	client, _ := bq.Open(ctx, "sqlite:///var/lib/app/jobs.db", bq.Config{})
//	_ = client.Migrate(ctx)
//	res, _ := Charge.Enqueue(ctx, client, ChargeArgs{OrderID: 42})
//	_ = client.Run(ctx) // workers and dispatcher, until ctx ends
//
// A unique job (JobOptions.Unique, WithUnique) is not stored when a job
// of its unique key already exists; its EnqueueResult names that job.
// Jobs enqueued on a schedule, once a tick across the fleet, are
// bq.Periodic jobs listed in Config.Periodic (docs/periodic.md).
//
// Code of the application's own goes around every job: EnqueueHooks see
// each job before it is stored, WorkerMiddleware wraps each run, and an
// ErrorHandler hears of each failed attempt and panic (docs/middleware.md).
//
// Package bqtest tests the code that uses bq (docs/testing.md).
package bq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/bqueue/bq/internal/dbclock"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/humanize"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/metrics"
	"github.com/bqueue/bq/internal/tracing"
	"github.com/bqueue/bq/internal/worker"
	"github.com/bqueue/bq/migrations"
)

// Driver is a database driver: postgres.New(pool), mysql.New(db),
// sqlite.New(db), or what Open builds from a DSN. It shows only what is
// safe to call: the statements bq runs stay inside it, so no caller can
// free a concurrency slot outside bq's checks.
type Driver interface {
	// Dialect names the database: "postgres", "mysql" or "sqlite".
	Dialect() string
	// Close releases what the driver opened itself (Open, or the
	// driver's Open); a pool or *sql.DB you passed to New stays open.
	Close() error
}

// Client enqueues jobs and runs workers and the dispatcher on one database.
type Client struct {
	pub        Driver        // what Driver returns
	drv        driver.Driver // the engine inside pub, with cfg.Prefix
	cfg        Config
	log        *slog.Logger
	met        *metrics.Instruments
	tr         *tracing.Tracer
	stopGauges func() error
	// rt runs this client's workers, dispatcher and wake-ups.
	rt    *worker.Runtime
	sched *worker.Scheduler // Config.Periodic's; nil without
	// clock is cfg.Now's: the host's corrected to the database's (package
	// dbclock), or the one injected; firstSync its first comparison with
	// the database's, in the background.
	clock     *dbclock.Clock
	firstSync *dbclock.First
}

// Open connects to the database dsn names and returns a client:
//
//	sqlite:///path/to/file.db   a SQLite file (created if missing): three
//	                            slashes before an absolute path
//	sqlite:path/to/file.db      one relative to the working directory
//	sqlite::memory:             an in-memory SQLite database (tests)
//	postgres://user:pass@host:5432/db
//	mysql://user:pass@host:3306/db  MySQL 8.0+ or MariaDB 10.6+
//
// The DSN's driver must be imported, as database/sql drivers are, so a
// program links only the databases it uses:
//
//	import _ "github.com/bqueue/bq/drivers/postgres"
//
// Call Migrate once to create bq's tables. Close the client when done.
func Open(ctx context.Context, dsn string, cfg Config) (*Client, error) {
	drv, err := openDriver(ctx, dsn)
	if err != nil {
		return nil, err
	}
	client, err := NewClient(drv, cfg)
	if err != nil {
		drv.Close()
		return nil, err
	}
	// The database answered just now: the first enqueue already follows
	// its clock (a milliseconds' wait; bounded should it stop answering).
	client.firstSync.Wait(ctx, 2*time.Second)
	return client, nil
}

// driverImports names the package to import for each DSN scheme bq knows.
var driverImports = map[string]string{
	"sqlite":     "github.com/bqueue/bq/drivers/sqlite",
	"postgres":   "github.com/bqueue/bq/drivers/postgres",
	"postgresql": "github.com/bqueue/bq/drivers/postgres",
	"mysql":      "github.com/bqueue/bq/drivers/mysql",
}

// openDriver opens dsn with the driver registered for its scheme: each
// driver registers itself when imported, so a program links only the
// drivers it names.
func openDriver(ctx context.Context, dsn string) (Driver, error) {
	scheme, _, _ := strings.Cut(dsn, ":")
	if dsn == "" {
		return nil, errors.New("bq.Open: the DSN is empty: use sqlite:///path/to/file.db, sqlite::memory:, postgres://user:pass@host:5432/db or mysql://user:pass@host:3306/db")
	}
	if open, ok := driver.OpenerOf(scheme); ok {
		return open(ctx, dsn)
	}
	switch imp, known := driverImports[scheme]; {
	case known:
		return nil, fmt.Errorf("bq.Open: no driver for %q: add import _ %q", humanize.RedactDSN(dsn), imp)
	case strings.Contains(dsn, "@tcp(") || strings.Contains(dsn, "@unix("):
		return nil, fmt.Errorf("bq.Open: DSN %q is in go-sql-driver's form: write it as mysql://user:pass@host:3306/db", humanize.RedactDSN(dsn))
	default:
		return nil, fmt.Errorf("bq.Open: unknown DSN %q: it must start with sqlite:, postgres:// or mysql://", humanize.RedactDSN(dsn))
	}
}

// NewClient returns a client on drv, for a pool or *sql.DB you opened:
// bq.NewClient(postgres.New(pool), cfg).
func NewClient(drv Driver, cfg Config) (*Client, error) {
	if drv == nil {
		return nil, errors.New("bq.NewClient: the driver is nil: pass postgres.New(pool), mysql.New(db) or sqlite.New(db)")
	}
	engine := driver.EngineOf(drv)
	if engine == nil {
		return nil, fmt.Errorf("bq.NewClient: %T is not a driver bq made: pass postgres.New(pool), mysql.New(db) or sqlite.New(db)", drv)
	}
	// Everything the client stores or judges follows the database's
	// clock; a clock the application injected is used as given.
	clock := dbclock.New()
	if cfg.Now != nil {
		clock = dbclock.Given(cfg.Now)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("bq.NewClient: %w", err)
	}
	cfg.Now = clock.Now
	if cfg.Prefix != engine.Prefix() {
		engine = engine.WithPrefix(cfg.Prefix)
	}
	met, err := metrics.New(cfg.MeterProvider, cfg.MessagingMetrics)
	if err != nil {
		return nil, fmt.Errorf("bq.NewClient: create metric instruments: %w", err)
	}
	c := &Client{pub: drv, drv: engine, cfg: cfg, log: cfg.Logger, met: met, clock: clock,
		tr: tracing.New(cfg.TracerProvider, cfg.Propagator, cfg.TraceRunsAsChildren), stopGauges: func() error { return nil }}
	c.newRuntime(engine)
	// A client that only enqueues follows the database's clock too (Run
	// compares them again at its start and every few minutes).
	c.firstSync = c.clock.SyncFirst(engine.Exec().ClockNow)
	if !cfg.NoGauges {
		if c.stopGauges, err = met.ObserveGauges(c.gaugeSnapshot); err != nil {
			return nil, fmt.Errorf("bq.NewClient: register gauges: %w", err)
		}
	}
	return c, nil
}

// newRuntime gives the client its runtime on drv, and the runtime its
// periodic scheduler.
func (c *Client) newRuntime(drv driver.Driver) {
	cfg := c.cfg
	c.rt = worker.New(drv, worker.Config{
		PollInterval: cfg.PollInterval, DispatchInterval: cfg.DispatchInterval, HeartbeatInterval: cfg.HeartbeatInterval,
		ProcessDeadAfter: cfg.ProcessDeadAfter, ShutdownTimeout: cfg.ShutdownTimeout, Retention: cfg.Retention,
		Name: cfg.Name, Clock: c.clock, Jobs: runJobs{c}, LeaseLost: ErrLeaseLost, Cancelled: ErrCancelled, ExplainErr: c.explainErr,
	}, c.log, c.met, c.tr)
	worker.Attach(c, c.rt)
	c.sched = c.rt.Scheduler(c.periodics(), func(ctx context.Context, jobs []*driver.NewJob, verdicts []lifecycle.Verdict, promoted driver.Promotion) {
		c.enqueued(ctx, jobs, verdicts, nil)
		c.rt.ReadyAll(readyQueues(jobs, verdicts, promoted))
	})
}

// Close stops the client's gauges and releases the connections it opened
// itself (through Open).
func (c *Client) Close() error {
	c.firstSync.Stop()
	c.rt.Close()
	worker.Detach(c)
	return errors.Join(c.stopGauges(), c.drv.Close())
}

// Run works this client's queues and runs the dispatcher and the
// periodic jobs of Config.Periodic until ctx ends, then stops
// gracefully: no new claims, running jobs get ShutdownTimeout to finish,
// and those still running are cancelled and go back to ready with their
// slots. It returns nil after a clean stop. Jobs' contexts carry ctx's
// values (not its cancellation: a stop lets them finish).
func (c *Client) Run(ctx context.Context) error { return c.run(ctx, true, true) }

// RunWorkers is Run without the dispatcher, for processes that leave
// maintenance to `bq dispatcher` or to other workers.
func (c *Client) RunWorkers(ctx context.Context) error { return c.run(ctx, true, false) }

// RunDispatcher runs only the dispatcher; it needs no job definitions.
// With Config.Periodic it also enqueues the periodic jobs, as Run does.
func (c *Client) RunDispatcher(ctx context.Context) error { return c.run(ctx, false, true) }

func (c *Client) run(ctx context.Context, work, dispatch bool) error {
	o := worker.RunOptions{Work: work, Dispatch: dispatch}
	if work {
		// A kind defined twice is ambiguous: which code runs its jobs?
		if err := worker.Duplicates(); err != nil {
			return fmt.Errorf("run workers: %w", err)
		}
		o.Queues = c.cfg.Queues
		if len(o.Queues) == 0 {
			o.Queues = map[string]int{}
			for _, q := range worker.Queues() {
				o.Queues[q] = 10
			}
		}
		if len(o.Queues) == 0 {
			return errors.New("run workers: no queues to work: define jobs with bq.Define or set Config.Queues")
		}
	}
	if err := c.checkSchema(ctx); err != nil {
		return err
	}
	if work && len(c.cfg.Queues) > 0 {
		c.warnUnworked()
	}
	if dispatch && c.sched != nil {
		o.Periodic = c.sched.Run
	}
	o.Inbox = c.inboxPass
	return c.rt.Run(ctx, o)
}

// warnUnworked warns, in one line, of the queues of job kinds defined in
// this process that Config.Queues leaves out, naming each with its
// kinds. Run cannot know which queues other processes work; a job of
// such a queue waits for one that works it, and a queue left out by
// mistake (a new job kind, a typo) would otherwise leave its jobs ready
// for ever without a word.
func (c *Client) warnUnworked() {
	byQueue := defined.queues()
	var unworked []string
	for _, q := range slices.Sorted(maps.Keys(byQueue)) {
		if _, worked := c.cfg.Queues[q]; !worked {
			unworked = append(unworked, fmt.Sprintf("%s (%s)", q, listSome(byQueue[q], 3)))
		}
	}
	if len(unworked) == 0 {
		return
	}
	c.log.Warn("Config.Queues leaves out queues of jobs defined in this process: it runs none of their jobs, which wait for a process that works their queue",
		"queues", listSome(unworked, 10))
}

// listSome joins the first n of items with ", ", saying how many more
// there are.
func listSome(items []string, n int) string {
	s := strings.Join(items[:min(len(items), n)], ", ")
	if len(items) > n {
		s += fmt.Sprintf(" and %d more", len(items)-n)
	}
	return s
}

// SignalContext returns a context that the first SIGINT or SIGTERM
// cancels, so Run stops gracefully: no new claims, running jobs get
// Config.ShutdownTimeout to finish. A second signal exits the process at
// once with status 1; its claims are reaped by a dispatcher once the
// process is declared dead (Config.ProcessDeadAfter).
//
//	ctx, stop := bq.SignalContext(context.Background())
//	defer stop()
//	err := client.Run(ctx)
func SignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-sigs:
			fmt.Fprintf(os.Stderr, "bq: %s received; stopping gracefully (send it again to stop at once)\n", sig)
			cancel()
		case <-ctx.Done():
			signal.Stop(sigs)
			return
		}
		if sig, ok := <-sigs; ok {
			fmt.Fprintf(os.Stderr, "bq: second %s; exiting now, running jobs will be reaped\n", sig)
			os.Exit(1)
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		cancel()
	}
}

// Driver returns the client's database driver: the value passed to
// NewClient, or the one Open made (a *postgres.Driver, *mysql.Driver or
// *sqlite.Driver, whose Pool or DB is the pool to begin transactions on).
func (c *Client) Driver() Driver { return c.pub }

// bq's own white-box tests reach a client's engine through the internal
// driver package; users cannot import it.
func init() {
	driver.ClientEngine = func(client any) driver.Driver { return client.(*Client).drv }
}

// Migrate applies every pending migration, creating bq's tables. Several
// processes may migrate at once: the others wait for the first.
func (c *Client) Migrate(ctx context.Context) error {
	unlock, err := c.drv.MigrationLock(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer unlock()
	p, err := migrations.NewProvider(c.drv.SQLDB(), string(c.drv.Dialect()), c.cfg.Prefix)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	return nil
}

// MigrateDown rolls back the newest applied migration.
func (c *Client) MigrateDown(ctx context.Context) error {
	unlock, err := c.drv.MigrationLock(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer unlock()
	p, err := migrations.NewProvider(c.drv.SQLDB(), string(c.drv.Dialect()), c.cfg.Prefix)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := p.Down(ctx); err != nil {
		return fmt.Errorf("migrate down: %w", err)
	}
	return nil
}

// Migration is one migration and whether it is applied.
type Migration struct {
	Version   int64
	Name      string
	Applied   bool
	AppliedAt time.Time
}

// MigrationStatus lists every migration and whether it is applied.
func (c *Client) MigrationStatus(ctx context.Context) ([]Migration, error) {
	p, err := migrations.NewProvider(c.drv.SQLDB(), string(c.drv.Dialect()), c.cfg.Prefix)
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	st, err := p.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	out := make([]Migration, len(st))
	for i, s := range st {
		out[i] = Migration{Version: s.Source.Version, Name: s.Source.Path, Applied: s.State == "applied", AppliedAt: s.AppliedAt}
	}
	return out, nil
}

// checkSchema returns ErrNotMigrated unless every migration is applied.
func (c *Client) checkSchema(ctx context.Context) error {
	v, err := c.drv.Exec().SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("check bq's schema: %w", err)
	}
	if want := migrations.Latest(string(c.drv.Dialect())); v < want {
		return fmt.Errorf("%w: the database is at version %d, this bq needs %d", ErrNotMigrated, v, want)
	}
	return nil
}

// explainErr turns a failure on missing tables into ErrNotMigrated.
func (c *Client) explainErr(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	if errors.Is(err, lifecycle.ErrNoRate) {
		// The job, not the database: the policy it relies on sets no rate.
		return fmt.Errorf("%w: %w", ErrInvalidJob, err)
	}
	switch c.drv.Refusal(err) {
	case driver.ReadOnly:
		return fmt.Errorf("%w: %w", ErrReadOnly, err)
	case driver.Full:
		return fmt.Errorf("%w: %w", ErrDatabaseFull, err)
	}
	if schemaErr := c.checkSchema(context.WithoutCancel(ctx)); schemaErr != nil && errors.Is(schemaErr, ErrNotMigrated) {
		return fmt.Errorf("%w: %w", schemaErr, err)
	}
	return err
}

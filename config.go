package bq

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/bqueue/bq/internal/worker"
	"github.com/bqueue/bq/migrations"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// NoRetention, as Config.Retention, deletes jobs as they complete.
const NoRetention time.Duration = -1

// Config tunes a Client. Zero values take the documented defaults.
type Config struct {
	// Queues maps each queue this process works to its slots: how many of
	// its jobs this process runs at once. Default: every queue of the
	// jobs defined in this process, 10 slots each. A run's slot frees when
	// its code returns nil, while its completion waits for the next batch
	// to commit (its claim, and its key's slot, are held until then), so a
	// queue holds at most twice its slots in claims.
	Queues map[string]int
	// Prefix of bq's table names. Default "bq_".
	Prefix string
	// PollInterval is how often an idle queue looks for jobs another
	// process made ready. Default 1s. Work enqueued or promoted in this
	// process wakes its workers at once.
	PollInterval time.Duration
	// DispatchInterval between dispatcher passes. Default 1s.
	DispatchInterval time.Duration
	// HeartbeatInterval between process heartbeats. Default 5s. A beat
	// that fails is tried again every 100 ms until one lands.
	HeartbeatInterval time.Duration
	// ProcessDeadAfter is the heartbeat silence after which a process is
	// dead and its claims are reaped, provided other processes' beats
	// landed meanwhile (a silence all shared is no death). Default 30s;
	// at least three HeartbeatIntervals. A process stops its own runs one
	// HeartbeatInterval before (docs/concurrency.md, "Pauses").
	ProcessDeadAfter time.Duration
	// ShutdownTimeout is how long Run waits for running jobs once its
	// context ends before cancelling them; claims still unfinished then
	// go back to ready with their slots. Default 30s.
	ShutdownTimeout time.Duration
	// Retention keeps finished jobs this long before the dispatcher
	// deletes them. Default 24h; NoRetention deletes at completion.
	// Failed jobs are kept until deleted or retried.
	Retention time.Duration
	// Name identifies this process in status output. Default host:pid.
	Name string
	// Logger for every service. Default slog.Default(). State changes are
	// logged at debug level, failures and reaped claims at warn and error.
	Logger *slog.Logger
	// MeterProvider receives bq's metrics (docs/observability.md lists
	// them). Default otel.GetMeterProvider(): a no-op until the
	// application installs an OpenTelemetry SDK.
	MeterProvider metric.MeterProvider
	// TracerProvider receives bq's spans: one per enqueue call, one per
	// run of a job (docs/observability.md, "Tracing"). Default
	// otel.GetTracerProvider(): a no-op until the application installs
	// an OpenTelemetry SDK.
	TracerProvider trace.TracerProvider
	// Propagator carries an enqueue's trace context to the job's runs
	// in its metadata. Default otel.GetTextMapPropagator(), or W3C
	// TraceContext ("traceparent", "tracestate") while the application
	// installs none.
	Propagator propagation.TextMapPropagator
	// TraceRunsAsChildren makes each run's span a child of its enqueue's
	// span, in the enqueue's trace, besides linked to it. Default off: a
	// run starts a trace of its own, linked to the enqueue, as
	// OpenTelemetry's messaging conventions advise for work that may run
	// long after it was sent, and more than once.
	TraceRunsAsChildren bool
	// MessagingMetrics also reports OpenTelemetry's messaging
	// semantic-convention metrics beside bq's own:
	// messaging.client.sent.messages (each job stored),
	// messaging.client.consumed.messages (each claim) and
	// messaging.process.duration (each run; error.type set when it
	// failed), with messaging.system "bq" and the queue as
	// messaging.destination.name, for dashboards built on the
	// conventions. Default off.
	MessagingMetrics bool
	// NoGauges turns off the observable gauges (jobs per queue and state,
	// figures per limit group). Each collection of them runs two
	// aggregate queries over the whole database and every process
	// reports the same figures, so a large fleet may keep them in one
	// process only (the dispatcher, say). Counters and histograms stay.
	NoGauges bool
	// Now is the clock; tests inject one, used as given. Default: the
	// host's clock, which on PostgreSQL and MySQL/MariaDB bq corrects to
	// the database server's (measured as the client is created and
	// every 5 minutes while running), so hosts whose clocks disagree
	// judge each other's heartbeats alike (docs/concurrency.md,
	// "Clocks").
	Now func() time.Time
	// Periodic lists the periodic jobs this process enqueues on their
	// schedules (bq.Periodic), while Run or RunDispatcher runs. The
	// schedules stored in the database are the fleet's: one removed from
	// every process's list stops (docs/periodic.md). Default: none.
	Periodic []*PeriodicJob
	// WorkerMiddleware wraps every run of every job this client works,
	// outermost first, around each definition's JobOptions.Middleware
	// (see WorkerMiddleware; docs/middleware.md). Default: none.
	WorkerMiddleware []WorkerMiddleware
	// EnqueueHooks see every job this client enqueues before it is
	// stored, in order, before each definition's JobOptions.EnqueueHooks
	// (see EnqueueHook). Default: none.
	EnqueueHooks []EnqueueHook
	// ErrorHandler is told of every failed attempt and panic of the runs
	// of this client, and may make one permanent or a snooze (see
	// ErrorHandler). Default: none; failures are logged either way.
	ErrorHandler ErrorHandler
}

func (c Config) withDefaults() Config {
	c.Prefix = cmp.Or(c.Prefix, migrations.DefaultPrefix)
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.DispatchInterval = cmp.Or(c.DispatchInterval, time.Second)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, 5*time.Second)
	c.ProcessDeadAfter = cmp.Or(c.ProcessDeadAfter, 30*time.Second)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, 30*time.Second)
	c.Retention = cmp.Or(c.Retention, 24*time.Hour)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MeterProvider == nil {
		c.MeterProvider = otel.GetMeterProvider()
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if err := migrations.ValidatePrefix(c.Prefix); err != nil {
		errs = append(errs, fmt.Errorf("Config.Prefix: %w", err))
	}
	for q, n := range c.Queues {
		if n < 1 {
			errs = append(errs, fmt.Errorf("Config.Queues[%q] is %d: give each queue 1 or more slots, or leave it out", q, n))
		}
		if err := validateQueue(q); err != nil {
			errs = append(errs, fmt.Errorf("Config.Queues: %w", err))
		}
	}
	for name, d := range map[string]time.Duration{
		"PollInterval": c.PollInterval, "DispatchInterval": c.DispatchInterval,
		"HeartbeatInterval": c.HeartbeatInterval, "ProcessDeadAfter": c.ProcessDeadAfter,
		"ShutdownTimeout": c.ShutdownTimeout,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("config field %s is %s: use a positive duration, or 0 for the default", name, d))
		}
	}
	if c.ProcessDeadAfter < 3*c.HeartbeatInterval {
		errs = append(errs, fmt.Errorf("Config.ProcessDeadAfter (%s) is under three HeartbeatIntervals (%s): a live process could be reaped between two beats; raise it or beat more often", c.ProcessDeadAfter, c.HeartbeatInterval))
	}
	if err := validateChains("Config.WorkerMiddleware", c.WorkerMiddleware); err != nil {
		errs = append(errs, err)
	}
	if err := validateChains("Config.EnqueueHooks", c.EnqueueHooks); err != nil {
		errs = append(errs, err)
	}
	if err := validatePeriodic(c.Periodic); err != nil {
		errs = append(errs, err)
	}
	if c.Retention < 0 && c.Retention != NoRetention {
		errs = append(errs, fmt.Errorf("Config.Retention is %s: use a positive duration, 0 for the default, or bq.NoRetention", c.Retention))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return nil
}

var (
	// ErrInvalidJob wraps every problem with a job definition or an
	// enqueue (its options, its key); the message names the field and the
	// fix.
	ErrInvalidJob = errors.New("invalid job")
	// ErrInvalidArgument wraps every other bad input refused before it
	// reaches the database (a key or limit given to SetKeyLimit, a queue
	// policy, a Config); the message names the argument and the fix.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotMigrated reports that bq's tables are missing or older than
	// this version of bq.
	ErrNotMigrated = errors.New("bq tables are missing or out of date: run client.Migrate(ctx) or `bq migrate up --dsn ...`")
	// ErrConflict wraps a transient conflict (deadlock, serialization
	// failure, busy database) met inside the caller's transaction: roll
	// the transaction back and run it again. Inside its own transactions
	// bq retries these itself.
	ErrConflict = errors.New("transient database conflict: roll back and retry the transaction")
	// ErrReadOnly wraps the database's refusal of a write because it
	// takes none: a standby (connect to the primary, e.g. with
	// target_session_attrs=read-write on PostgreSQL), a database or
	// server set read-only, or a SQLite file bq may not write. Nothing was
	// stored; a running client keeps what it accepted and goes on by
	// itself once writes work again.
	ErrReadOnly = errors.New("the database refuses writes (read-only: a standby, a read-only database or server, or a file bq may not write): point bq at the primary or make it writable")
	// ErrDatabaseFull wraps the database's refusal of a write because its
	// disk (or a table's space) is full: nothing was stored; free space
	// and bq goes on by itself.
	ErrDatabaseFull = errors.New("the database is full (out of disk or table space): free space and bq goes on by itself")
)

// ErrLeaseLost is the cancellation cause of a run whose process can no
// longer be sure the run is still its own: no heartbeat of the process
// landed for so long that a dispatcher may declare it dead (or reclaim the
// run's slot) and run the job elsewhere, or its claim was found taken.
// Read it with context.Cause(ctx); ctx.Err() is context.Canceled.
var ErrLeaseLost = errors.New("bq: lease lost")

// Permanent wraps err so the job fails at once, without the retries left
// to it: return it from a job whose input can never succeed.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return worker.Permanent(err)
}

func permanent(err error) error { return Permanent(err) }

// Snooze returns an error that ends the run without spending an attempt:
// the job's slot is released (the next blocked job of its key takes it)
// and the job is scheduled to run again after d, admitted when due like
// any scheduled job. Nothing bounds how often a job snoozes: count in its
// args or check a deadline if it must give up. A d of zero or less fails
// the run with an error saying so, as any error would.
func Snooze(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: bq.Snooze: the delay must be positive, got %s: pass how long to wait, e.g. bq.Snooze(30*time.Second)", ErrInvalidArgument, d)
	}
	return &worker.SnoozeError{Delay: d}
}

// Package runtime is bq's worker runtime: a process's registration and
// heartbeat, the claim loop of each queue it works, each run (its lease,
// its self-fencing when beats stop landing), the record of its outcome
// (the completer's batches for completions), the wake-ups that tell
// workers a queue has ready jobs, the counts kept for the history, and
// the dispatcher and periodic scheduler it starts beside them. It owns
// claim → run → record → finish; the job lifecycle's transactions are
// internal/lifecycle's, the database's statements the driver's.
//
// The root package builds a Runtime for each Client and gives it the
// application's code through two seams: Jobs (the job definitions, the
// middleware chain and the error handler) and Config's callbacks.
package worker

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bqueue/bq/internal/dbclock"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/metrics"
	"github.com/bqueue/bq/internal/tracing"
)

// NoRetention, as Config.Retention, deletes jobs as they complete.
const NoRetention time.Duration = -1

// Config is what the runtime needs of a client's configuration, its
// defaults already applied (bq.Config documents each field).
type Config struct {
	PollInterval      time.Duration
	DispatchInterval  time.Duration
	HeartbeatInterval time.Duration
	ProcessDeadAfter  time.Duration
	ShutdownTimeout   time.Duration
	Retention         time.Duration
	Name              string
	// Clock is the host's clock corrected to the database's; Now reads
	// it (see package dbclock). Without one, New makes one: of Now as
	// given, else the host's.
	Clock *dbclock.Clock
	Now   func() time.Time
	// Jobs are the application's job definitions and the code around
	// their runs.
	Jobs Jobs
	// LeaseLost is the cancellation cause of a run whose lease lapsed
	// (bq.ErrLeaseLost); Cancelled of a run whose job was cancelled
	// (bq.ErrCancelled).
	LeaseLost, Cancelled error
	// ExplainErr turns a database error into one naming its cause (a
	// missing migration).
	ExplainErr func(ctx context.Context, err error) error
}

// Jobs is the seam to the application's job definitions.
type Jobs interface {
	// Lookup is the definition of kind; nil when this binary has none.
	Lookup(kind string) Job
	// Run runs job with args through the worker middleware around it; m
	// describes the run. ctx is the run's: a check of it checks the
	// lease, and MayBegin(ctx) must pass before the job's own code.
	Run(ctx context.Context, m Meta, job Job, args []byte) error
	// HandleError gives a failed attempt's error to the application's
	// error handler and returns the error to record.
	HandleError(ctx context.Context, m Meta, err error) error
}

// Job is one job definition, as the runtime needs it.
type Job interface {
	// Timeout bounds a run; 0 for none.
	Timeout() time.Duration
	// Backoff is the delay before attempt's retry.
	Backoff(attempt int) time.Duration
}

// Meta describes a run (bq.Meta has the same fields).
type Meta struct {
	ID          int64
	Kind        string
	Queue       string
	Attempt     int // 1 on the first run
	MaxAttempts int
	Key         string // full concurrency key; "" when unkeyed
	Metadata    map[string]string
	Tags        []string
	Keys        []string
	RateKey     string
	Token       int64
}

// Runtime is one client's worker runtime.
type Runtime struct {
	drv driver.Driver
	cfg Config
	log *slog.Logger
	met *metrics.Instruments
	tr  *tracing.Tracer

	outage outage // database trouble, logged as one event
	// passes: failing dispatcher passes, logged the same way apart from
	// the calls of workers (a pass can fail while claims succeed).
	passes outage
	// wrote is when the newest write that landed began (UnixNano, see
	// dbOK): what shows a pass of the dispatcher's or the periodic
	// scheduler's, which may write nothing, that the database takes
	// writes again.
	wrote atomic.Int64
	// tally counts completed and failed runs for the history.
	tally tally
	// active is the process Run registered; nil outside Run. A failed
	// call to the database makes it verify its claims (process.suspect).
	active atomic.Pointer[process]

	// rateWake tells this process's dispatcher that a job went to a rate
	// line (rateWaits).
	rateWake chan struct{}
	// startLag: how late this process's rated runs lately began, which
	// their claims' start slack covers.
	startLag startLag

	// policies: which queues adapt by their policy (queueAdapts).
	policies policyCache

	mu       sync.Mutex
	wakers   map[string][]chan struct{} // queue -> workers of this process
	announce *announcer                 // started on first use
	closed   bool
	// origin names this client in its notifications, so that its own
	// listener skips what it woke already (driver.Notifier).
	origin string
}

// New returns the runtime of a client on drv.
func New(drv driver.Driver, cfg Config, log *slog.Logger, met *metrics.Instruments, tr *tracing.Tracer) *Runtime {
	if cfg.Clock == nil {
		cfg.Clock = dbclock.New()
		if cfg.Now != nil {
			cfg.Clock = dbclock.Given(cfg.Now)
		}
	}
	cfg.Now = cfg.Clock.Now
	if cfg.ExplainErr == nil {
		cfg.ExplainErr = func(_ context.Context, err error) error { return err }
	}
	if cfg.LeaseLost == nil {
		cfg.LeaseLost = errors.New("bq: lease lost")
	}
	if cfg.Cancelled == nil {
		cfg.Cancelled = errors.New("job cancelled")
	}
	return &Runtime{drv: drv, cfg: cfg, log: log, met: met, tr: tr,
		wakers: map[string][]chan struct{}{}, rateWake: make(chan struct{}, 1), origin: rand.Text()}
}

// Close stops the runtime's notifications; what was announced before
// still goes out.
func (c *Runtime) Close() {
	c.mu.Lock()
	a := c.announce
	c.closed, c.announce = true, nil
	c.mu.Unlock()
	if a != nil {
		a.close()
	}
}

// wake tells this process's workers of queue ("" for all) that jobs are
// ready, so they claim now rather than at their next poll.
func (c *Runtime) wake(queue string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, chans := range c.wakers {
		if queue != "" && q != queue {
			continue
		}
		for _, ch := range chans {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

func (c *Runtime) addWaker(queue string, ch chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wakers[queue] = append(c.wakers[queue], ch)
}

func (c *Runtime) removeWaker(queue string, ch chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	chans := c.wakers[queue]
	for i, x := range chans {
		if x == ch {
			c.wakers[queue] = append(chans[:i:i], chans[i+1:]...)
			break
		}
	}
}

// clients maps each client (a *bq.Client) to its runtime, for bqtest:
// Attach adds one, Detach removes it.
var clients sync.Map

// Attach makes rt the runtime of owner, a *bq.Client (For).
func Attach(owner any, rt *Runtime) { clients.Store(owner, rt) }

// Detach forgets owner's runtime, as its client closes.
func Detach(owner any) { clients.Delete(owner) }

// For is the runtime of owner, a *bq.Client; nil when it has none.
func For(owner any) *Runtime {
	rt, _ := clients.Load(owner)
	r, _ := rt.(*Runtime)
	return r
}

// DueScheduled reports whether a scheduled job is due by the client's
// clock: the dispatcher admits it at its next pass.
func (c *Runtime) DueScheduled(ctx context.Context) (bool, error) {
	due, err := c.drv.Exec().ScheduledDueExists(ctx, c.cfg.Now())
	if err != nil {
		return false, c.explainErr(ctx, err)
	}
	return due, nil
}

// explainErr names a database error's cause (a missing migration).
func (c *Runtime) explainErr(ctx context.Context, err error) error { return c.cfg.ExplainErr(ctx, err) }

// DecodeLabels reads a job's stored metadata and tags; nil JSON reads as
// none.
func DecodeLabels(rawMeta, rawTags []byte) (map[string]string, []string, error) {
	var md map[string]string
	var tags []string
	if len(rawMeta) > 0 {
		if err := json.Unmarshal(rawMeta, &md); err != nil {
			return nil, nil, fmt.Errorf("decode stored metadata: %w", err)
		}
	}
	if len(rawTags) > 0 {
		if err := json.Unmarshal(rawTags, &tags); err != nil {
			return nil, nil, fmt.Errorf("decode stored tags: %w", err)
		}
	}
	return md, tags, nil
}

// Definition is one job kind of this binary, as the runtime and bqtest
// need it (bq.Define makes them).
type Definition interface {
	Job
	Kind() string
	Queue() string
	// Work runs the job with args through its own middleware only, as
	// bqtest.Work does: no database, no lease.
	Work(ctx context.Context, args []byte, o WorkOptions) error
}

// WorkOptions describe the run Definition.Work makes.
type WorkOptions struct {
	ID       int64
	Attempt  int     // default 1
	Key      *string // default: the key the job's definition computes
	Metadata map[string]string
	Tags     []string // added to the definition's tags
}

// ErrNotRun marks a Work that could not run the job at all (its args do
// not decode, an option is invalid).
var ErrNotRun = errors.New("the job did not run")

// registry holds every valid definition of this process, by kind and by
// the value that defined it, and the errors of the kinds defined twice.
var registry = struct {
	sync.RWMutex
	byKind     map[string]Definition
	byOwner    map[any]Definition
	duplicates []error
}{byKind: map[string]Definition{}, byOwner: map[any]Definition{}}

// Register adds d, defined by owner (a *bq.Job), unless its kind is
// taken: then d is not registered by kind, and dup's error, told of the
// first definition, is returned and kept for Duplicates. Of still finds
// d by its owner.
func Register(owner any, d Definition, dup func(first Definition) error) error {
	registry.Lock()
	defer registry.Unlock()
	registry.byOwner[owner] = d
	if first, taken := registry.byKind[d.Kind()]; taken {
		err := dup(first)
		registry.duplicates = append(registry.duplicates, err)
		return err
	}
	registry.byKind[d.Kind()] = d
	return nil
}

// Duplicates returns the errors of every kind defined twice in this
// process, nil when there is none.
func Duplicates() error {
	registry.RLock()
	defer registry.RUnlock()
	return errors.Join(registry.duplicates...)
}

// Lookup is the definition of kind; nil when this binary has none.
func Lookup(kind string) Definition {
	registry.RLock()
	defer registry.RUnlock()
	return registry.byKind[kind]
}

// Of is the definition owner made; nil when it made none (it is
// invalid).
func Of(owner any) Definition {
	registry.RLock()
	defer registry.RUnlock()
	return registry.byOwner[owner]
}

// Kinds lists the kinds of every registered definition, sorted.
func Kinds() []string {
	registry.RLock()
	defer registry.RUnlock()
	return slices.Sorted(maps.Keys(registry.byKind))
}

// Queues lists the queues of every registered definition.
func Queues() []string {
	registry.RLock()
	defer registry.RUnlock()
	seen := map[string]bool{}
	var out []string
	for _, d := range registry.byKind {
		if !seen[d.Queue()] {
			seen[d.Queue()] = true
			out = append(out, d.Queue())
		}
	}
	return out
}

package bq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/worker"
)

// JobMeta describes the running job; read it with JobFromContext.
type JobMeta struct {
	ID          int64
	Kind        string
	Queue       string
	Attempt     int // 1 on the first run
	MaxAttempts int
	Key         string // full concurrency key; "" when unkeyed
	// Metadata and Tags are what the job was enqueued with; nil when none.
	Metadata map[string]string
	Tags     []string
	// Keys are all the job's full concurrency keys, Key first, then
	// MoreConcurrency's; nil when unkeyed. RateKey is its full rate key;
	// "" when it has none.
	Keys    []string
	RateKey string
	// Token is the run's fencing token: its claim's fence, which the
	// database hands out in increasing order, so every later claim of
	// any job, the run that replaces this one after its process was
	// paused or cut off included, carries a larger one. bq refuses a
	// stale run's own writes (its outcome is fenced); hand Token to the
	// systems the job writes to so they can refuse the stale run's too:
	// keep the largest token accepted per resource and accept a write
	// only with a larger one (UPDATE ... SET token = $t ... WHERE
	// token < $t). See docs/concurrency.md, "Fencing your own writes".
	Token int64
}

// JobFromContext returns the metadata of the job whose context ctx is.
func JobFromContext(ctx context.Context) (JobMeta, bool) {
	m, ok := worker.MetaFrom(ctx)
	return JobMeta(m), ok
}

// runJobs gives the runtime the job definitions of this binary, the
// client's middleware around their runs and its error handler.
type runJobs struct{ c *Client }

// runDef is a definition as the runtime sees it.
type runDef struct{ d definition }

func (j runDef) Kind() string                      { return j.d.kind() }
func (j runDef) Queue() string                     { return j.d.queue() }
func (j runDef) Timeout() time.Duration            { return j.d.timeout() }
func (j runDef) Backoff(attempt int) time.Duration { return j.d.backoff(attempt) }
func (j runDef) AdaptiveMin() int                  { return j.d.adaptiveMin() }
func (j runDef) RateAdaptiveMin() int              { return j.d.rateAdaptiveMin() }

func (j runDef) Work(ctx context.Context, args []byte, o worker.WorkOptions) error {
	return j.d.work(ctx, args, o)
}

func (r runJobs) Lookup(kind string) worker.Job {
	if d := worker.Lookup(kind); d != nil {
		return d
	}
	return nil
}

func (r runJobs) Run(ctx context.Context, m worker.Meta, job worker.Job, args []byte) error {
	return r.c.runChain(ctx, JobMeta(m), job.(runDef).d, args)
}

func (r runJobs) HandleError(ctx context.Context, m worker.Meta, err error) error {
	return r.c.handleError(ctx, JobMeta(m), err)
}

// WorkerMiddleware wraps every run of a job: it sees the job (its id,
// kind, queue, attempt, key, metadata and tags) and calls next to run
// the rest of the chain, ending with the job's function. Global
// middleware (Config.WorkerMiddleware) is outermost, in list order, then
// the definition's (JobOptions.Middleware), then the job, as net/http
// handlers nest:
//
//	Config.WorkerMiddleware[0]( … Config.WorkerMiddleware[n](
//	    JobOptions.Middleware[0]( … job(ctx, args))))
//
// What a middleware returns is the run's outcome: an error fails the
// attempt (bq.Snooze, bq.Permanent and bq.Cancel mean what they mean from
// the job). One that returns nil without calling next completes the job
// without running it; bq logs a warning naming the middleware once per
// kind. A panic in a middleware, as in the job, fails the attempt with
// the panic and its stack as the error; the job's slot is released as
// for any failed attempt. Call next at most once, and pass it a context
// derived from ctx: it is the run's, cancelled when the run must stop.
type WorkerMiddleware func(ctx context.Context, job JobMeta, next func(ctx context.Context) error) error

// EnqueueHook sees each job before it is stored, on every enqueue path
// (Enqueue, EnqueueTx, EnqueueMany(Tx), each item of EnqueueBatch(Tx),
// periodic ticks), and may set its priority, set metadata and append
// tags: a trace context, a tenant id. Global hooks (Config.EnqueueHooks)
// run first, in list order, then the definition's (JobOptions.EnqueueHooks).
// After each hook, the job is checked by the rules of WithMetadata,
// WithTags and Priority; a hook's invalid change refuses the enqueue
// with an ErrInvalidJob naming the hook. A hook that returns an error,
// or panics, refuses the enqueue: nothing of the call is stored, and the
// error names the hook and wraps its error. Hooks run before bq's
// transaction begins (in EnqueueTx, inside the caller's, before bq's
// statements), so a slow hook holds no lock of bq's.
type EnqueueHook func(ctx context.Context, job *PendingJob) error

// PendingJob is a job about to be stored, as an EnqueueHook sees it.
type PendingJob struct {
	kind, queue, key string
	args             []byte
	// Priority of the job, settable; the Priority option's range applies.
	Priority int
	// Metadata the job is stored with: the enqueue's WithMetadata and
	// earlier hooks' additions. Never nil; set or delete pairs.
	Metadata map[string]string
	// Tags: the definition's, the enqueue's WithTags, earlier hooks'.
	// Append to it; a tag given twice is stored once.
	Tags []string
}

// Kind is the job's kind, the name given to Define.
func (p *PendingJob) Kind() string { return p.kind }

// Queue is the queue the job goes to.
func (p *PendingJob) Queue() string { return p.queue }

// Key is the job's full concurrency key; "" when unkeyed.
func (p *PendingJob) Key() string { return p.key }

// Args is the job's args as the JSON that is stored (a copy).
func (p *PendingJob) Args() json.RawMessage { return slices.Clone(p.args) }

// ErrorHandler is told of every failed attempt and every panic of a run,
// before the outcome is recorded and without any lock of bq's held, to
// log or report them, and may change the outcome (see ErrorAction). It
// is not called for a run that snoozed or cancelled itself, that a
// shutdown cut short, or that lost its lease. ctx carries the job's
// values (JobFromContext) but not its cancellation: return promptly, the
// job keeps its slot until then. A panic in a handler is logged with its
// stack and the attempt's own error kept.
type ErrorHandler interface {
	// HandleError is called when a run returns err.
	HandleError(ctx context.Context, job JobMeta, err error) ErrorAction
	// HandlePanic is called when a run, or a middleware around it,
	// panics with panicValue; stack is the panicking goroutine's.
	HandlePanic(ctx context.Context, job JobMeta, panicValue any, stack string) ErrorAction
}

// ErrorAction is what an ErrorHandler wants done with a failed attempt.
// The zero value changes nothing: the job is retried per its backoff, or
// fails once its attempts are spent.
type ErrorAction struct {
	// Permanent fails the job at once, as bq.Permanent does. It wins
	// over Snooze.
	Permanent bool
	// Snooze, if positive, snoozes the job for that long instead, as
	// bq.Snooze does: its attempt is not spent and its error not kept.
	Snooze time.Duration
}

// panicError is the error of a run that panicked.
type panicError struct {
	value any
	stack string
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v\n%s", e.value, e.stack) }

// safeRun runs fn, turning a panic into a panicError carrying its stack.
func safeRun(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: string(debug.Stack())}
		}
	}()
	return fn()
}

// runChain runs the job of def through the global and the definition's
// middleware.
func (c *Client) runChain(ctx context.Context, meta JobMeta, def definition, args []byte) error {
	return runThrough(ctx, meta, c.cfg.WorkerMiddleware, def, args, c.warnSkipped)
}

// runThrough runs the job of def through global, then the definition's
// middleware, telling skipped of a middleware that returned nil without
// calling next. bqtest.Work runs a job through it with no global list.
func runThrough(ctx context.Context, meta JobMeta, global []WorkerMiddleware, def definition, args []byte, skipped func(kind, name string)) error {
	own := def.middleware()
	var call func(i int, ctx context.Context) error
	call = func(i int, ctx context.Context) error {
		var mw WorkerMiddleware
		switch {
		case i < len(global):
			mw = global[i]
		case i < len(global)+len(own):
			mw = own[i-len(global)]
		default:
			if err := worker.MayBegin(ctx); err != nil {
				return err
			}
			return def.run(ctx, args)
		}
		called := false
		err := mw(ctx, meta, func(ctx context.Context) error {
			called = true
			return call(i+1, ctx)
		})
		if err == nil && !called {
			skipped(meta.Kind, middlewareName(i, len(global)))
		}
		return err
	}
	// The begin gate, before the first middleware and again before the
	// job (above): a freeze at either point may have let the claim go
	// elsewhere. Without middleware the check above is the only one.
	if len(global)+len(own) > 0 {
		if err := worker.MayBegin(ctx); err != nil {
			return err
		}
	}
	return safeRun(func() error { return call(0, ctx) })
}

func middlewareName(i, globals int) string {
	if i < globals {
		return fmt.Sprintf("Config.WorkerMiddleware[%d]", i)
	}
	return fmt.Sprintf("JobOptions.Middleware[%d]", i-globals)
}

// skipWarned holds "kind\x00middleware" for each warning already logged.
var skipWarned sync.Map

func (c *Client) warnSkipped(kind, name string) {
	if _, seen := skipWarned.LoadOrStore(kind+"\x00"+name, true); !seen {
		c.log.Warn("worker middleware returned nil without calling next: the job completed without running (logged once per kind)",
			"kind", kind, "middleware", name)
	}
}

// handleError gives a failed attempt's error to Config.ErrorHandler and
// returns the error to record.
func (c *Client) handleError(ctx context.Context, meta JobMeta, runErr error) (out error) {
	h := c.cfg.ErrorHandler
	if h == nil {
		return runErr
	}
	ctx = worker.WithMeta(context.WithoutCancel(ctx), worker.Meta(meta))
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("Config.ErrorHandler panicked; the attempt's own error is kept",
				"job_id", meta.ID, "kind", meta.Kind, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			out = runErr
		}
	}()
	var act ErrorAction
	if p := (*panicError)(nil); errors.As(runErr, &p) {
		act = h.HandlePanic(ctx, meta, p.value, p.stack)
	} else {
		act = h.HandleError(ctx, meta, runErr)
	}
	switch {
	case act.Permanent:
		return permanent(runErr)
	case act.Snooze > 0:
		return &worker.SnoozeError{Delay: act.Snooze}
	}
	return runErr
}

// applyHooks runs the global then the definition's enqueue hooks on p,
// checking the job after each.
func (c *Client) applyHooks(ctx context.Context, own []EnqueueHook, p *PendingJob) error {
	global := c.cfg.EnqueueHooks
	for i := range len(global) + len(own) {
		hook, name := (EnqueueHook)(nil), ""
		if i < len(global) {
			hook, name = global[i], fmt.Sprintf("Config.EnqueueHooks[%d]", i)
		} else {
			hook, name = own[i-len(global)], fmt.Sprintf("JobOptions.EnqueueHooks[%d]", i-len(global))
		}
		if err := c.callHook(ctx, hook, name, p); err != nil {
			return err
		}
		if p.Metadata == nil {
			p.Metadata = map[string]string{}
		}
		p.Tags = mergeTags(nil, p.Tags)
		if err := checkPending(p); err != nil {
			return fmt.Errorf("%w: enqueue hook %s: %w", ErrInvalidJob, name, err)
		}
	}
	return nil
}

func (c *Client) callHook(ctx context.Context, hook EnqueueHook, name string, p *PendingJob) (err error) {
	defer func() {
		if r := recover(); r != nil {
			stack := string(debug.Stack())
			c.log.Error("enqueue hook panicked; the enqueue is refused", "hook", name, "kind", p.kind, "panic", fmt.Sprint(r), "stack", stack)
			err = fmt.Errorf("enqueue hook %s panicked: %v (nothing was stored)", name, r)
		}
	}()
	if err := hook(ctx, p); err != nil {
		return fmt.Errorf("enqueue hook %s refused the job (nothing was stored): %w", name, err)
	}
	return nil
}

// checkPending applies the enqueue rules to what a hook may change.
func checkPending(p *PendingJob) error {
	if err := validatePriority(p.Priority); err != nil {
		return err
	}
	if _, err := encodeMetadata(p.Metadata); err != nil {
		return err
	}
	return validateTags(p.Tags)
}

// pendingOf is the PendingJob of a job's fields before the hooks run.
func pendingOf(kind, queue, key string, args []byte, priority int, md map[string]string, tags []string) *PendingJob {
	m := maps.Clone(md)
	if m == nil {
		m = map[string]string{}
	}
	return &PendingJob{kind: kind, queue: queue, key: key, args: args, Priority: priority, Metadata: m, Tags: slices.Clone(tags)}
}

// validateChains checks a list of middleware or hooks for nil entries,
// naming the field.
func validateChains[F any](field string, list []F) error {
	var errs []error
	for i, f := range list {
		if any(f) == nil || isNilFunc(f) {
			errs = append(errs, fmt.Errorf("%s[%d] is nil: remove it or pass a function", field, i))
		}
	}
	return errors.Join(errs...)
}

func isNilFunc[F any](f F) bool {
	switch f := any(f).(type) {
	case WorkerMiddleware:
		return f == nil
	case EnqueueHook:
		return f == nil
	}
	return false
}

// work runs the job's function on raw as execute does — args decoded
// from JSON, the job context set, Timeout applied, the definition's
// middleware around it, a panic returned as an error — with no database: the context's lease checks nothing.
func (j *Job[A]) work(ctx context.Context, raw []byte, o worker.WorkOptions) error {
	meta, err := j.workMeta(raw, o)
	if err != nil {
		return fmt.Errorf("%w: %w", worker.ErrNotRun, err)
	}
	runCtx := worker.WithMeta(ctx, worker.Meta(meta))
	if t := j.opts.Timeout; t > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(runCtx, t)
		defer cancel()
	}
	// The definition's middleware runs as in a worker; Config's belongs
	// to a client, and Work has none.
	return runThrough(runCtx, meta, nil, j, raw, func(string, string) {})
}

// workTokens hands bqtest.Work's runs their fencing tokens: each larger
// than the last, as a database's fences are.
var workTokens atomic.Int64

// workMeta is the job context of a Work run, refusing what an enqueue
// would refuse.
func (j *Job[A]) workMeta(raw []byte, o worker.WorkOptions) (JobMeta, error) {
	if j.err != nil {
		return JobMeta{}, j.err
	}
	var args A
	if err := json.Unmarshal(raw, &args); err != nil {
		return JobMeta{}, fmt.Errorf("decode args of job kind %q as %T: %w", j.name, args, err)
	}
	meta := JobMeta{ID: o.ID, Kind: j.name, Queue: j.opts.Queue, Attempt: max(o.Attempt, 1),
		MaxAttempts: j.opts.MaxAttempts, Metadata: o.Metadata, Tags: mergeTags(j.opts.Tags, o.Tags),
		Token: workTokens.Add(1)}
	if _, err := encodeMetadata(meta.Metadata); err != nil {
		return JobMeta{}, fmt.Errorf("%w: bqtest.WithMetadata: %w", ErrInvalidJob, err)
	}
	if _, err := encodeTags(meta.Tags); err != nil {
		return JobMeta{}, fmt.Errorf("%w: bqtest.WithTags: %w", ErrInvalidJob, err)
	}
	if o.Key != nil {
		if err := validateKey(*o.Key); err != nil {
			return JobMeta{}, fmt.Errorf("%w: bqtest.WithKey: %w", ErrInvalidJob, err)
		}
		meta.Key = *o.Key
		if meta.Key != "" {
			meta.Keys = []string{meta.Key}
		}
		return meta, nil
	}
	first, more, err := j.limits(args, &enqueueOptions{})
	if err != nil {
		return JobMeta{}, err
	}
	meta.Key = first.Key
	for _, l := range append([]driver.Limit{first}, more...) {
		if l.Key != "" {
			meta.Keys = append(meta.Keys, l.Key)
		}
	}
	return meta, nil
}

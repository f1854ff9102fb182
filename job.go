package bq

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/humanize"
	"github.com/bqueue/bq/internal/semaphore"
	"github.com/bqueue/bq/internal/worker"
)

// OnConflict says what happens to a job whose concurrency key has no free
// slot when it is admitted.
type OnConflict int

const (
	// Block stores the job blocked; it becomes ready when a slot frees,
	// highest priority first, FIFO among equals.
	Block OnConflict = iota
	// Discard drops the job: nothing is inserted and the enqueue result
	// says Discarded. A scheduled job or retry discarded when due ends in
	// the discarded state.
	Discard
	// Replace stores the job in place of its key's queued jobs: in the
	// enqueue's transaction, under the key's lock, the key's ready and
	// blocked jobs are cancelled (EnqueueResult.Replaced names them) and
	// the job is admitted as with Block, taking the slot a replaced ready
	// job freed; running jobs keep theirs. However many producers replace
	// on one key at once, one job is left queued: the last to take the
	// key's lock. Only a job's first key may replace, and only at once (not
	// with At or In); a retry waits its turn as with Block. See
	// docs/flow-control.md.
	Replace
	// CancelRunning replaces as Replace does, and also cancels the key's
	// running jobs through the cancel path (as Client.Cancel does: their
	// runs' contexts are cancelled, each keeps its slot until its run
	// ends, EnqueueResult.Stopping names them); the job runs when a slot
	// frees. Hatchet's CANCEL_IN_PROGRESS, CI's cancel-in-progress.
	CancelRunning
)

func (o OnConflict) String() string {
	switch o {
	case Discard:
		return "discard"
	case Replace:
		return "replace"
	case CancelRunning:
		return "cancel-running"
	}
	return "block"
}

// Concurrency limits how many jobs with the same key are ready or running
// at once, across every worker of every process.
type Concurrency[A any] struct {
	// Key returns the job's key; jobs whose full key (Group + "/" + Key)
	// matches share the limit. An empty key means no limit for that job.
	// The full key is at most MaxKeyBytes of valid UTF-8 without NUL
	// bytes; an enqueue of a job whose key is not is refused. Required.
	Key func(args A) string
	// To is the number of jobs of a key that may be ready or running at
	// once. 0 takes the default: the queue policy's MaxActivePerKey
	// (SyncPolicies), else 1. A runtime override (SetKeyLimit) beats it.
	To int
	// Duration bounds a holder's silence: a slot whose holder's process
	// stopped heartbeating for this long (never less than three of its
	// HeartbeatIntervals) is reclaimed by the dispatcher, and the run
	// stops itself one HeartbeatInterval before. It does not bound run
	// time. Default 3m.
	Duration time.Duration
	// Group names the limit; job kinds with the same Group share keys.
	// Default: the job's name.
	Group string
	// OnConflict: Block (default) or Discard.
	OnConflict OnConflict
	// MaxBlocked caps a key's backlog: once that many of its jobs wait,
	// further enqueues of the key are discarded (the result says why).
	// Default: the queue policy's MaxBlocked, else unbounded.
	MaxBlocked int
	// RequireKey refuses an enqueue whose key for this limit is empty
	// (from Key, or from WithConcurrencyKey for Concurrency) with
	// ErrInvalidJob, where an empty key otherwise means the job runs
	// without this limit: set it when every job of the kind must be
	// limited, so a missing tenant is an error rather than a job that
	// ignores the limit. Default false.
	RequireKey bool
	// Debounce, when positive, runs a key's jobs once per quiet period:
	// an enqueue joins the key's job of its kind still waiting to come due
	// (EnqueueResult.Debounced, its ID that job's), moving it to come due
	// Debounce from now with this enqueue's args; with none waiting, the
	// job is stored scheduled Debounce later. So one job runs per burst,
	// with the last args, once no newer job of its key arrived for
	// Debounce. Jobs already due are left to run. Only on Concurrency (a
	// job's one key), not with At or In. See docs/flow-control.md.
	Debounce time.Duration
	// DebounceMaxWait bounds a burst that never goes quiet: its job comes
	// due at most DebounceMaxWait after the burst's first enqueue (0: no
	// bound; else at least Debounce).
	DebounceMaxWait time.Duration
	// DebounceFirst runs a burst with its first enqueue's args rather than
	// its last.
	DebounceFirst bool
	// Sequence runs a key's jobs one at a time in enqueue order (priority
	// first, as in any line), and a failing job keeps its place through its
	// retries: it keeps the key's slot while its retry (or snooze) waits,
	// so the next job starts only once it completes, fails for good, or is
	// cancelled or discarded; the line then continues. To must be 1 (or 0:
	// a sequence's limit is 1 whatever a policy or SetKeyLimit says),
	// OnConflict Block, and no MoreConcurrency, Debounce or Rate. River Pro's
	// sequences, Oban Pro's chains. See docs/flow-control.md.
	Sequence bool
	// SequenceHaltOnFailure halts a Sequence when one of its jobs fails
	// for good (attempts spent, or bq.Permanent): the failed job keeps the
	// key's slot, so the next job waits until it is retried
	// (Client.RetryFailed: it runs again first) or discarded
	// (Client.DiscardFailed, Client.Cancel: the line continues). Default
	// false: the line continues past a job that fails for good.
	SequenceHaltOnFailure bool
	// Adaptive lets the key's limit follow its downstream: a run that
	// returns Throttled lowers the limit fleet-wide (multiplicatively, not
	// below Adaptive.Min), completions raise it back by one at a time up
	// to the key's own limit (To, its override or its policy's). Only on
	// Concurrency (a job's first key). See docs/flow-control.md.
	// Default: nil, the limit stays put.
	Adaptive *Adaptive
}

// JobOptions configures a job kind. Zero values take the defaults.
type JobOptions[A any] struct {
	// Queue the job runs on: 1 to 128 ASCII letters, digits, '_', '-',
	// '.' or ':', starting with a letter or digit. Default "default".
	Queue string
	// Priority: higher runs first within a queue and within a key's
	// blocked line. Default 0.
	Priority int
	// MaxAttempts before the job fails for good. Default 25.
	MaxAttempts int
	// Backoff returns the delay before retry number `attempt` (1 after
	// the first failure). Default: exponential from 1s, capped at 1h,
	// with ±25% jitter.
	Backoff func(attempt int) time.Duration
	// Timeout bounds one run through its context. Default: none.
	Timeout time.Duration
	// Concurrency limits simultaneous jobs per key. Default: none.
	Concurrency *Concurrency[A]
	// MoreConcurrency are further limits, each with its own key (a
	// tenant's, a downstream API's, a region's): a job is ready only when
	// every one of its keys, Concurrency's and these, has a free slot, and
	// takes a slot of each at once, never holding one while it waits for
	// another. At most MaxConcurrencyKeys keys in all, each different. An
	// empty key drops that limit for the job. WithMoreConcurrencyKeys
	// replaces them for one enqueue. See docs/limits.md, "Several keys per
	// job". Default: none.
	MoreConcurrency []Concurrency[A]
	// Rate limits job starts per period per key; it combines with
	// Concurrency (a job then waits for both). Default: none.
	Rate *Rate[A]
	// Unique refuses a job that duplicates one already stored (see
	// Unique); WithUnique replaces it for one enqueue. Default: none.
	Unique *Unique
	// Tags every job of the kind carries, before those of WithTags; each
	// follows WithTags' rule. Default: none.
	Tags []string
	// Middleware wraps every run of the kind, inside Config.WorkerMiddleware
	// (see WorkerMiddleware). Default: none.
	Middleware []WorkerMiddleware
	// EnqueueHooks see each job of the kind before it is stored, after
	// Config.EnqueueHooks (see EnqueueHook). Default: none.
	EnqueueHooks []EnqueueHook
}

const (
	defaultQueue       = "default"
	defaultMaxAttempts = 25
	defaultDuration    = semaphore.DefaultDuration
)

// DefaultBackoff waits 1s, 2s, 4s, ... up to 1h, each ±25%.
func DefaultBackoff(attempt int) time.Duration {
	d := min(time.Second<<min(attempt-1, 12), time.Hour)
	return d*3/4 + rand.N(d/2+1)
}

// Job is a defined job kind with arguments of type A. Define returns it;
// enqueue through it.
type Job[A any] struct {
	name string
	fn   func(context.Context, A) error
	opts JobOptions[A]
	site string // where Define was called
	err  error
}

// Define declares a job kind: its unique name, the function that runs it,
// and its options. The definition is registered so clients of this
// process can run it. An invalid definition is not registered; its error
// is returned by every enqueue and by Err.
//
// A name is defined once per process: a second Define of a name already
// registered is an error naming both call sites, and Run and RunWorkers
// refuse to start in that process, since a worker could not tell which
// definition runs the jobs of that kind. Define job kinds once, in
// package-level variables.
func Define[A any](name string, fn func(ctx context.Context, args A) error, opts JobOptions[A]) *Job[A] {
	j := &Job[A]{name: name, fn: fn, opts: opts, site: callSite(2)}
	j.opts.Queue = cmp.Or(j.opts.Queue, defaultQueue)
	j.opts.MaxAttempts = cmp.Or(j.opts.MaxAttempts, defaultMaxAttempts)
	if j.opts.Backoff == nil {
		j.opts.Backoff = DefaultBackoff
	}
	if c := j.opts.Concurrency; c != nil {
		cc := *c
		cc.Duration = cmp.Or(cc.Duration, defaultDuration)
		cc.Group = cmp.Or(cc.Group, name)
		j.opts.Concurrency = &cc
	}
	more := make([]Concurrency[A], len(j.opts.MoreConcurrency))
	for i, c := range j.opts.MoreConcurrency {
		c.Duration = cmp.Or(c.Duration, defaultDuration)
		c.Group = cmp.Or(c.Group, name)
		more[i] = c
	}
	j.opts.MoreConcurrency = more
	if r := j.opts.Rate; r != nil {
		rr := *r
		rr.Group = cmp.Or(rr.Group, name)
		j.opts.Rate = &rr
	}
	if j.err = j.validate(); j.err == nil {
		j.err = register(j)
	}
	return j
}

// callSite is "file:line" of the caller skip frames up.
func callSite(skip int) string {
	_, file, line, ok := runtime.Caller(skip)
	if !ok {
		return "an unknown place"
	}
	return fmt.Sprintf("%s:%d", file, line)
}

func (j *Job[A]) validate() error {
	var errs []error
	if j.name == "" {
		errs = append(errs, errors.New("the name is empty: give the job a unique name, e.g. \"billing.charge\""))
	}
	if j.fn == nil {
		errs = append(errs, errors.New("the function is nil: pass the func(ctx, args) error that runs the job"))
	}
	if err := validateQueue(j.opts.Queue); err != nil {
		errs = append(errs, err)
	}
	if err := validatePriority(j.opts.Priority); err != nil {
		errs = append(errs, err)
	}
	if j.opts.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("MaxAttempts is %d: use 1 or more (0 means the default, %d)", j.opts.MaxAttempts, defaultMaxAttempts))
	}
	if tags := mergeTags(nil, j.opts.Tags); len(tags) < len(j.opts.Tags) {
		errs = append(errs, fmt.Errorf("job option Tags names a tag twice: %q; name each once", j.opts.Tags))
	} else if err := validateTags(tags); err != nil {
		errs = append(errs, fmt.Errorf("job option Tags: %w", err))
	}
	if err := validateChains("job option Middleware", j.opts.Middleware); err != nil {
		errs = append(errs, err)
	}
	if err := validateChains("job option EnqueueHooks", j.opts.EnqueueHooks); err != nil {
		errs = append(errs, err)
	}
	if j.opts.Timeout < 0 {
		errs = append(errs, fmt.Errorf("job option Timeout is %s: use a positive duration, or 0 for none", j.opts.Timeout))
	}
	if c := j.opts.Concurrency; c != nil {
		if err := c.validate("Concurrency"); err != nil {
			errs = append(errs, err)
		}
	}
	for i, c := range j.opts.MoreConcurrency {
		if err := c.validate(fmt.Sprintf("MoreConcurrency[%d]", i)); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, adaptiveProblems(j.opts.Concurrency, j.opts.MoreConcurrency)...)
	if err := sameKeyTwice(j.opts.Concurrency, j.opts.MoreConcurrency); err != nil {
		errs = append(errs, err)
	}
	if replacesWithMore(j.opts.Concurrency, j.opts.MoreConcurrency) {
		errs = append(errs, errors.New(replaceOneKey))
	}
	errs = append(errs, debounceProblems(j.opts.Concurrency, j.opts.MoreConcurrency)...)
	errs = append(errs, sequenceProblems(j.opts.Concurrency, j.opts.MoreConcurrency)...)
	if c := j.opts.Concurrency; c != nil && c.Sequence && j.opts.Rate != nil {
		errs = append(errs, errors.New("Concurrency.Sequence with Rate: a sequence's retry keeps its place without waiting for a start again; drop Rate, or drop Sequence"))
	}
	if n := len(j.opts.MoreConcurrency); n > 0 && n+1 > MaxConcurrencyKeys {
		errs = append(errs, fmt.Errorf("MoreConcurrency has %d limits: a job carries at most %d concurrency keys (bq.MaxConcurrencyKeys), Concurrency's among them; combine limits or drop one", n, MaxConcurrencyKeys))
	}
	if r := j.opts.Rate; r != nil {
		if err := validateRateSpec(r); err != nil {
			errs = append(errs, err)
		}
	}
	if u := j.opts.Unique; u != nil {
		if err := u.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: job %q: %w", ErrInvalidJob, j.name, err)
	}
	return nil
}

// sameKeyTwice refuses two limits of one kind that name the same key on
// every job: the same Group and the same Key func value (sameFunc), so
// every enqueue would be refused for naming one key twice. Define cannot
// call Key without args; two funcs that merely return equal keys are
// found at enqueue.
func sameKeyTwice[A any](first *Concurrency[A], more []Concurrency[A]) error {
	type limit struct {
		name string
		c    *Concurrency[A]
	}
	var all []limit
	if first != nil {
		all = append(all, limit{"Concurrency", first})
	}
	for i := range more {
		all = append(all, limit{fmt.Sprintf("MoreConcurrency[%d]", i), &more[i]})
	}
	for i, a := range all {
		for _, b := range all[i+1:] {
			if a.c.Key != nil && a.c.Group == b.c.Group && sameFunc(a.c.Key, b.c.Key) {
				return fmt.Errorf("%s and %s have the same Group (%s) and the same Key func: every job would name one key twice and be refused; give one of them a Group of its own (e.g. Group: \"tenant\") or another Key",
					a.name, b.name, quoted(a.c.Group))
			}
		}
	}
	return nil
}

// sameFunc reports whether f and g are one func value: the same code
// with the same captured variables, so that called with the same args
// they return the same. A func value is a pointer to its closure; reflect
// offers only the code pointer, which the closures of one literal share
// whatever they captured (field("tenant") and field("region")).
// replaceOneKey refuses Replace or CancelRunning on a job of several keys.
const replaceOneKey = "OnConflict bq.Replace or bq.CancelRunning is for a job with one concurrency key: " +
	"a job of several keys waits in one line at a time, so what it would replace is not one key's queue; use bq.Block or drop the further keys"

// replacesWithMore reports whether a job of several keys names Replace.
func replacesWithMore[A any](first *Concurrency[A], more []Concurrency[A]) bool {
	if len(more) == 0 {
		return false
	}
	if first != nil && first.OnConflict >= Replace {
		return true
	}
	return slices.ContainsFunc(more, func(c Concurrency[A]) bool { return c.OnConflict >= Replace })
}

func sameFunc[F any](f, g F) bool {
	return *(*unsafe.Pointer)(unsafe.Pointer(&f)) == *(*unsafe.Pointer)(unsafe.Pointer(&g))
}

// validate checks one concurrency limit of a definition, named what.
func (c *Concurrency[A]) validate(what string) error {
	var errs []error
	if c.Key == nil {
		errs = append(errs, fmt.Errorf("%s.Key is nil: set Key to a func(args) string that returns the key to limit by, or remove %s", what, what))
	}
	if err := validateTo("concurrency To", c.To); err != nil {
		errs = append(errs, err)
	}
	if err := validateGroup(c.Group); err != nil {
		errs = append(errs, err)
	}
	if c.MaxBlocked < 0 {
		errs = append(errs, fmt.Errorf("concurrency MaxBlocked is %d: use 1 or more, or 0 for no cap", c.MaxBlocked))
	}
	if err := validateSpec(c.Duration, c.OnConflict); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func validateSpec(d time.Duration, oc OnConflict) error {
	var errs []error
	if d < 0 {
		errs = append(errs, fmt.Errorf("concurrency Duration is %s: use a positive duration (default %s)", d, defaultDuration))
	}
	if oc < Block || oc > CancelRunning {
		errs = append(errs, fmt.Errorf("concurrency OnConflict is %d: use bq.Block, bq.Discard, bq.Replace or bq.CancelRunning", oc))
	}
	return errors.Join(errs...)
}

// validatePriority keeps priorities within the 32-bit columns that store
// them, rather than letting a database wrap or refuse them.
func validatePriority(p int) error {
	if p < math.MinInt32 || p > math.MaxInt32 {
		return fmt.Errorf("priority %d is out of range: use a value between %d and %d", p, math.MinInt32, math.MaxInt32)
	}
	return nil
}

// Name is the job kind's name, as stored in the database.
func (j *Job[A]) Name() string { return j.name }

// Err is the definition's error, or nil when it is valid.
func (j *Job[A]) Err() error { return j.err }

// limit returns the concurrency limit of one job: the enqueue-time key if
// given, else the definition's.
func (j *Job[A]) limit(args A, o *enqueueOptions) (driver.Limit, error) {
	c := j.opts.Concurrency
	l := driver.Limit{Duration: defaultDuration}
	group := j.name
	if c != nil {
		group, l.To, l.Duration, l.OnConflict, l.MaxBlocked = c.Group, c.To, c.Duration, driver.OnConflict(c.OnConflict), c.MaxBlocked
		l.Sequence, l.SequenceHalt = c.Sequence, c.SequenceHaltOnFailure
	}
	key := ""
	switch k := o.key; {
	case k != nil:
		if err := validateTo("To", k.to); err != nil {
			return driver.Limit{}, fmt.Errorf("%w: WithConcurrencyKey(%s, %d): %w", ErrInvalidJob, quoted(k.key), k.to, err)
		}
		if l.Sequence {
			if err := sequenceKeyProblem(k.key, k.to, k.onConflict, false); err != nil {
				return driver.Limit{}, err
			}
		}
		if k.onConflict != nil {
			if err := validateSpec(l.Duration, *k.onConflict); err != nil {
				return driver.Limit{}, fmt.Errorf("%w: WithConcurrencyKey: %w", ErrInvalidJob, err)
			}
			l.OnConflict = driver.OnConflict(*k.onConflict)
		}
		if bare, full := fullOfGroup(group, k.key); full {
			return driver.Limit{}, fmt.Errorf("%w: WithConcurrencyKey(%s, %d): the key starts with its Group, %s: WithConcurrencyKey takes the bare key, %s, and adds the Group (KeyLimit, SetKeyLimit and KeyState take the full key)",
				ErrInvalidJob, quoted(k.key), k.to, quoted(groupInKey.Replace(group)+"/"), quoted(bare))
		}
		key, l.To = k.key, k.to
		if key == "" && c != nil && c.RequireKey {
			return driver.Limit{}, fmt.Errorf("%w: WithConcurrencyKey gave an empty key and Concurrency.RequireKey is set: the job would run without the limit; pass the key to limit by", ErrInvalidJob)
		}
	case c != nil:
		key = c.Key(args)
		if key == "" && c.RequireKey {
			return driver.Limit{}, fmt.Errorf("%w: %s", ErrInvalidJob, requiredKey("Concurrency"))
		}
	}
	if key == "" {
		return driver.Limit{}, nil
	}
	l.Key = fullKey(group, key)
	if err := validateKey(l.Key); err != nil {
		return driver.Limit{}, fmt.Errorf("%w: %w", ErrInvalidJob, err)
	}
	if l.Sequence {
		l.To = 1
	}
	return l, nil
}

// requiredKey is the error of a limit named what whose Key returned an
// empty key while its RequireKey is set.
func requiredKey(what string) string {
	return fmt.Sprintf("%s.Key returned an empty key and %s.RequireKey is set: the job would run without the limit; return the key to limit by, or leave RequireKey unset for such jobs to run unlimited", what, what)
}

// MaxConcurrencyKeys is the most concurrency keys one job may carry:
// Concurrency's and MoreConcurrency's (or WithMoreConcurrencyKeys') in all.
const MaxConcurrencyKeys = 4

// limits returns every concurrency limit of one job: its first (limit's)
// and the rest. An empty key drops its limit; when Concurrency's is
// empty, the first of the rest takes its place.
func (j *Job[A]) limits(args A, o *enqueueOptions) (driver.Limit, []driver.Limit, error) {
	first, err := j.limit(args, o)
	if err != nil {
		return driver.Limit{}, nil, err
	}
	var more []driver.Limit
	if o.more != nil && first.Sequence && len(*o.more) > 0 {
		return driver.Limit{}, nil, sequenceKeyProblem("", 0, nil, true)
	}
	if o.more != nil {
		for _, k := range *o.more {
			l := driver.Limit{Key: k.Key, To: k.To, Duration: defaultDuration, OnConflict: driver.OnConflict(k.OnConflict)}
			if err := validateTo("To", k.To); err != nil {
				return driver.Limit{}, nil, fmt.Errorf("%w: WithMoreConcurrencyKeys(%s): %w", ErrInvalidJob, quoted(k.Key), err)
			}
			if err := validateSpec(l.Duration, k.OnConflict); err != nil {
				return driver.Limit{}, nil, fmt.Errorf("%w: WithMoreConcurrencyKeys(%s): %w", ErrInvalidJob, quoted(k.Key), err)
			}
			if k.Key == "" {
				continue
			}
			if err := validateFullKey(k.Key, j.name); err != nil {
				return driver.Limit{}, nil, fmt.Errorf("%w: WithMoreConcurrencyKeys: %w", ErrInvalidJob, err)
			}
			more = append(more, l)
		}
	} else {
		for i, c := range j.opts.MoreConcurrency {
			key := c.Key(args)
			if key == "" && c.RequireKey {
				return driver.Limit{}, nil, fmt.Errorf("%w: %s", ErrInvalidJob, requiredKey(fmt.Sprintf("MoreConcurrency[%d]", i)))
			}
			if key == "" {
				continue
			}
			l := driver.Limit{Key: fullKey(c.Group, key), To: c.To, Duration: c.Duration, OnConflict: driver.OnConflict(c.OnConflict), MaxBlocked: c.MaxBlocked}
			if err := validateKey(l.Key); err != nil {
				return driver.Limit{}, nil, fmt.Errorf("%w: MoreConcurrency: %w", ErrInvalidJob, err)
			}
			more = append(more, l)
		}
	}
	if first.Key == "" && len(more) > 0 {
		first, more = more[0], more[1:]
	}
	if len(more) == 0 {
		return first, nil, nil
	}
	if n := len(more) + 1; n > MaxConcurrencyKeys {
		return driver.Limit{}, nil, fmt.Errorf("%w: the job carries %d concurrency keys: at most %d (bq.MaxConcurrencyKeys); drop one or combine two limits into one key", ErrInvalidJob, n, MaxConcurrencyKeys)
	}
	seen := map[string]bool{first.Key: true}
	for _, l := range more {
		if seen[l.Key] {
			return driver.Limit{}, nil, fmt.Errorf("%w: concurrency key %q is named twice on one job: give each of its limits a different key or Group", ErrInvalidJob, l.Key)
		}
		seen[l.Key] = true
	}
	return first, more, nil
}

// definition is a job kind without its type parameter, as workers see it.
type definition interface {
	kind() string
	queue() string
	run(ctx context.Context, args []byte) error
	timeout() time.Duration
	backoff(attempt int) time.Duration
	adaptiveMin() int
	definedAt() string
	middleware() []WorkerMiddleware
	work(ctx context.Context, args []byte, o worker.WorkOptions) error
	// debounced is the kind's Debounce and DebounceMaxWait (replace.go).
	debounced() (wait, maxWait time.Duration)
	// inboxJob is the job an inbox row of the kind describes (inbox.go).
	inboxJob(ctx context.Context, c *Client, args []byte, o *enqueueOptions, now time.Time) (*driver.NewJob, error)
}

func (j *Job[A]) kind() string                      { return j.name }
func (j *Job[A]) queue() string                     { return j.opts.Queue }
func (j *Job[A]) timeout() time.Duration            { return j.opts.Timeout }
func (j *Job[A]) backoff(attempt int) time.Duration { return j.opts.Backoff(attempt) }
func (j *Job[A]) definedAt() string                 { return j.site }
func (j *Job[A]) middleware() []WorkerMiddleware    { return j.opts.Middleware }

// adaptiveMin is the floor of the kind's adaptive limit; 0 when its
// limit does not adapt.
func (j *Job[A]) adaptiveMin() int {
	if c := j.opts.Concurrency; c != nil && c.Adaptive != nil {
		return c.Adaptive.Min
	}
	return 0
}

func (j *Job[A]) run(ctx context.Context, raw []byte) error {
	var args A
	if err := json.Unmarshal(raw, &args); err != nil {
		return permanent(fmt.Errorf("decode args of job kind %q as %T: %w (were they enqueued by an incompatible version of the job?)", j.name, args, err))
	}
	return j.fn(ctx, args)
}

// register adds j's definition, unless its name is taken: then the
// error, naming both call sites, is returned and kept for run.
func register(j definition) error {
	err := worker.Register(j, runDef{j}, func(first worker.Definition) error {
		return fmt.Errorf("%w: job %q is defined twice, at %s and at %s: give each job kind one definition (a package-level variable) and a name of its own",
			ErrInvalidJob, j.kind(), first.(runDef).d.definedAt(), j.definedAt())
	})
	if err == nil {
		defined.add(j.queue(), j.kind())
	}
	return err
}

// defined lists the job kinds registered in this process by queue: Run
// names them when it does not work their queue.
var defined = kindsByQueue{m: map[string][]string{}}

type kindsByQueue struct {
	mu sync.Mutex
	m  map[string][]string
}

func (k *kindsByQueue) add(queue, kind string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.m[queue] = append(k.m[queue], kind)
}

// queues returns the queues and their kinds, each sorted.
func (k *kindsByQueue) queues() map[string][]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(map[string][]string, len(k.m))
	for q, kinds := range k.m {
		out[q] = slices.Sorted(slices.Values(kinds))
	}
	return out
}

// The drivers' columns hold as many keys as a job may carry.
var _ [MaxConcurrencyKeys - driver.MaxKeys]struct{}
var _ [driver.MaxKeys - MaxConcurrencyKeys]struct{}

// MaxKeyBytes is the longest full concurrency key, Group + "/" + Key, in
// bytes: 2048, the most every database bq runs on can index (at least 512
// characters of any script). A longer key is refused before it reaches
// the database, on every database alike; hash a longer natural key.
const MaxKeyBytes = 2048

// maxQueueBytes is the longest queue name, as the queue columns hold.
const maxQueueBytes = 128

// queueRule is the queue name rule, for error messages.
const queueRule = "use 1 to 128 ASCII letters, digits, '_', '-', '.' or ':', starting with a letter or digit"

// validateQueue checks a queue name against queueRule: names appear in
// URLs, logs, metric attributes and the CLI's output, where spaces,
// control characters or quotes would be ambiguous.
func validateQueue(q string) error {
	ok := q != "" && len(q) <= maxQueueBytes && isAlnum(q[0])
	for i := 0; ok && i < len(q); i++ {
		ok = isAlnum(q[i]) || strings.IndexByte("_-.:", q[i]) >= 0
	}
	if !ok {
		return fmt.Errorf("queue name %s is invalid: %s", quoted(q), queueRule)
	}
	return nil
}

func isAlnum(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
}

// validateKey checks a full concurrency key (Group + "/" + Key): at most
// MaxKeyBytes, valid UTF-8, no NUL byte. PostgreSQL refuses the last two in
// text; the others would store them, and a key must mean the same on all.
func validateKey(key string) error {
	const fix = "keys (Group + \"/\" + Key) are valid UTF-8 without NUL bytes, at most %d bytes (bq.MaxKeyBytes); hash a longer or binary key, e.g. hex of its SHA-256"
	switch {
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("concurrency key %s is %d bytes long: "+fix, quoted(key), len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return fmt.Errorf("concurrency key %s is not valid UTF-8: "+fix, quoted(key), MaxKeyBytes)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("concurrency key %s has a NUL byte: "+fix, quoted(key), MaxKeyBytes)
	}
	return nil
}

// groupInKey writes a Group into a full key with '%' and '/' escaped (as
// %25 and %2F), so the first '/' of a full key always ends its group: a
// job of Group "billing" for tenant "charge/acme" and one of Group
// "billing/charge" for tenant "acme" hold different keys. A Group without
// either character reads as it is.
var groupInKey = strings.NewReplacer("%", "%25", "/", "%2F")

// fullKey is the full concurrency key of group and key.
func fullKey(group, key string) string { return groupInKey.Replace(group) + "/" + key }

// validateGroup checks a Concurrency.Group: the start of every full key.
func validateGroup(group string) error {
	if len(groupInKey.Replace(group))+1 >= MaxKeyBytes {
		return fmt.Errorf("concurrency Group %s is %d bytes long: a full key (Group + \"/\" + Key) is at most %d bytes (bq.MaxKeyBytes); use a shorter Group",
			quoted(group), len(group), MaxKeyBytes)
	}
	if err := validateKey(group); err != nil {
		return fmt.Errorf("concurrency Group: %w", err)
	}
	return nil
}

// validateTo checks a limit per key named what, as Concurrency.To and
// WithConcurrencyKey take it: one rule, one wording.
func validateTo(what string, to int) error {
	if to < 0 {
		return fmt.Errorf("%s is %d: use 1 or more jobs at once per key, or 0 for the default (the queue policy's MaxActivePerKey, else 1)", what, to)
	}
	return nil
}

// quoted is s quoted with %q, cut to its first 32 bytes (whole
// characters) when longer than 64: an error must not repeat a huge key.
func quoted(s string) string {
	if len(s) <= 64 {
		return fmt.Sprintf("%q", s)
	}
	start, _ := humanize.Clip(s, 32)
	return fmt.Sprintf("%q...", start)
}

// validateFullKey checks a full key given whole (Group + "/" + Key), as
// WithMoreConcurrencyKeys takes it in a KeyLimit: its group must not be
// empty. The error suggests the job's name, the default Group, as the
// group.
func validateFullKey(key, job string) error {
	if strings.IndexByte(key, '/') < 1 {
		return fmt.Errorf("KeyLimit.Key %s has no group: KeyLimit takes a full key, bq.Key(group, key), as SetKeyLimit does: bq.Key(%q, %s) (WithConcurrencyKey and WithRateKey take the bare key and add the Group)",
			quoted(key), job, quoted(key))
	}
	return validateKey(key)
}

// fullOfGroup reports whether key, given where a bare key is taken
// (WithConcurrencyKey, WithRateKey), is a full key of group already,
// bq.Key(group, bare), and returns bare. Taken as it is, it would be
// the key group/group/bare, which no job of bare holds.
func fullOfGroup(group, key string) (bare string, full bool) {
	bare, full = strings.CutPrefix(key, groupInKey.Replace(group)+"/")
	return bare, full && bare != ""
}

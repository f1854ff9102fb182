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

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/humanize"
	"github.com/bqueue/bq/internal/semaphore"
	"github.com/bqueue/bq/internal/worker"
)

// JobOptions configures a job kind. Zero values take the defaults.
type JobOptions[A any] struct {
	// Queue the job runs on: 1 to 128 ASCII letters, digits, '_', '-',
	// '.' or ':', starting with a letter or digit. Default "default".
	Queue string
	// Priority: higher runs first within a queue and within a key's
	// blocked line. Default 0.
	Priority int
	// Slots is how many slots of each of its concurrency keys the job
	// takes (a heavy export counts as 3): all at once when every key has
	// them free, given back all at once, on every path a slot is. At most
	// MaxSlots, and at most each key's To; more than 1 needs a
	// concurrency key, and not a Sequence. The Slots option overrides it
	// for one enqueue. It counts Slots against its queue's MaxActive and
	// its key's fair share too. See docs/concurrency.md, "Jobs that take
	// several slots". Default 1.
	Slots int
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
	if err := j.slotsDefined().problem(); err != nil {
		errs = append(errs, fmt.Errorf("job option %w", err))
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

// definition is a job kind without its type parameter, as workers see it.
type definition interface {
	kind() string
	queue() string
	run(ctx context.Context, args []byte) error
	timeout() time.Duration
	backoff(attempt int) time.Duration
	adaptiveMin() int
	rateAdaptiveMin() int
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

func (j *Job[A]) rateAdaptiveMin() int {
	if r := j.opts.Rate; r != nil && r.Adaptive != nil {
		return r.Adaptive.Min
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

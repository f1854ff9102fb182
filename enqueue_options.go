package bq

import (
	"fmt"
	"slices"
	"time"
)

// EnqueueOption changes one enqueue.
type EnqueueOption func(*enqueueOptions)

type enqueueOptions struct {
	at       time.Time
	in       time.Duration
	priority *int
	queue    *string
	key      *keyOption
	more     *[]KeyLimit
	rate     *rateOption
	unique   *Unique
	metadata map[string]string
	tags     []string
	// dependsOn and evenIfFailed: depend.go.
	dependsOn    []int64
	evenIfFailed bool
}

type keyOption struct {
	key        string
	to         int
	onConflict *OnConflict
}

// At runs the job no earlier than t. Its concurrency key is checked when
// it becomes due, not at enqueue.
func At(t time.Time) EnqueueOption { return func(o *enqueueOptions) { o.at = t } }

// In runs the job no earlier than d from now.
func In(d time.Duration) EnqueueOption { return func(o *enqueueOptions) { o.in = d } }

// Priority overrides the definition's priority; higher runs first.
func Priority(p int) EnqueueOption { return func(o *enqueueOptions) { o.priority = &p } }

// Queue overrides the definition's queue. The name follows the rule of
// JobOptions.Queue; an empty one is an error, not the default.
func Queue(name string) EnqueueOption { return func(o *enqueueOptions) { o.queue = &name } }

// WithConcurrencyKey limits this job to `to` at once among jobs of the same
// key, replacing the definition's key and limit (the definition's Group,
// Duration and OnConflict still apply). As with Concurrency.To, a `to` of 0
// takes the default: the queue policy's MaxActivePerKey, else 1.
// onConflict, if given, overrides OnConflict too. An empty key means no
// limit for this job; the full key (Group + "/" + key) is at most
// MaxKeyBytes of valid UTF-8 without NUL bytes.
func WithConcurrencyKey(key string, to int, onConflict ...OnConflict) EnqueueOption {
	return func(o *enqueueOptions) {
		k := &keyOption{key: key, to: to}
		if len(onConflict) > 0 {
			k.onConflict = &onConflict[0]
		}
		o.key = k
	}
}

// KeyLimit is one further concurrency key of a job at enqueue
// (WithMoreConcurrencyKeys).
type KeyLimit struct {
	// Key is the full key, Group + "/" + key, as SetKeyLimit takes it;
	// "" drops the limit.
	Key string
	// To is the key's limit; 0 takes the default, as Concurrency.To.
	To int
	// OnConflict: Block (default) or Discard, when this key is full.
	OnConflict OnConflict
}

// WithMoreConcurrencyKeys gives this job further concurrency keys,
// replacing the definition's MoreConcurrency (none: the job keeps only
// its first key). The job's keys, its first among them, are at most
// MaxConcurrencyKeys and each different; see JobOptions.MoreConcurrency.
func WithMoreConcurrencyKeys(keys ...KeyLimit) EnqueueOption {
	return func(o *enqueueOptions) {
		k := slices.Clone(keys)
		o.more = &k
	}
}

// applyOptions collects opts; a nil option is an error, not a panic.
func applyOptions(opts []EnqueueOption) (enqueueOptions, error) {
	var o enqueueOptions
	for i, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%w: enqueue option %d is nil: pass options such as bq.Priority(5), or leave it out", ErrInvalidJob, i)
		}
		opt(&o)
	}
	return o, nil
}

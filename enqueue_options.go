package bq

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// EnqueueOption changes one enqueue.
type EnqueueOption func(*enqueueOptions)

type enqueueOptions struct {
	at       time.Time
	in       time.Duration
	priority *int
	slots    *int
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

// Unique makes a job unique: an enqueue finding a job of the same unique
// key in one of ByStates inserts nothing, and its result says Duplicate
// with the id of that job (DuplicateOf). Uniqueness is always within the
// job kind; each field set narrows the key further. At least one field
// must be set. The check is the database's, made under a lock on the key
// in the enqueue's transaction, so it holds across processes.
type Unique struct {
	// ByArgs adds the args to the key, as encoding/json encodes them: a
	// map's keys sorted, a struct's fields in the type's order, so two
	// args equal as JSON are the same key.
	ByArgs bool
	// ByPeriod adds the period of the job's scheduled time (its run-at,
	// else the enqueue's now), floored to a multiple of ByPeriod in UTC:
	// with 1h, one job per kind per hour. At least 1s; 0 leaves time out.
	ByPeriod time.Duration
	// ByQueue adds the queue the job is enqueued on.
	ByQueue bool
	// ByStates are the states of an existing job that make a new one a
	// duplicate. Default: scheduled, ready, blocked, running, completed,
	// waiting; a failed, discarded or cancelled job does not count.
	ByStates []JobState
}

// WithUnique makes this enqueue unique by u, replacing the definition's
// Unique (JobOptions.Unique).
func WithUnique(u Unique) EnqueueOption {
	return func(o *enqueueOptions) { o.unique = &u }
}

// defaultUniqueStates are River's: every state but the endings that did
// not do the job's work (waiting, for the jobs it depends on, included).
var defaultUniqueStates = []JobState{StateScheduled, StateReady, StateBlocked, StateRunning, StateCompleted, StateWaiting}

// uniqueStates are the states ByStates may name.
var uniqueStates = []JobState{StateScheduled, StateReady, StateBlocked, StateRunning, StateCompleted,
	StateFailed, StateDiscarded, StateCancelled, StateWaiting}

// validate refuses a spec that names nothing, a bad period or an unknown
// or repeated state.
func (u *Unique) validate() error {
	var errs []error
	if !u.ByArgs && u.ByPeriod == 0 && !u.ByQueue && len(u.ByStates) == 0 {
		errs = append(errs, errors.New("Unique sets no field: set ByArgs, ByPeriod, ByQueue or ByStates (or use no Unique)"))
	}
	if u.ByPeriod < 0 || (u.ByPeriod > 0 && u.ByPeriod < time.Second) {
		errs = append(errs, fmt.Errorf("Unique.ByPeriod is %s: use 1s or more, or 0 to leave time out of the key", u.ByPeriod))
	}
	for i, s := range u.ByStates {
		if !slices.Contains(uniqueStates, s) {
			errs = append(errs, fmt.Errorf("Unique.ByStates[%d] is %q, no job state: use %v", i, s, uniqueStates))
		} else if slices.Contains(u.ByStates[:i], s) {
			errs = append(errs, fmt.Errorf("Unique.ByStates[%d] repeats %q: name each state once", i, s))
		}
	}
	return errors.Join(errs...)
}

// key is the unique key of a job of kind: the SHA-256, in hex, of the
// parts the spec names, each length-prefixed so no two sets of parts
// spell the same text.
func (u *Unique) key(kind, queue string, args []byte, at time.Time) string {
	h := sha256.New()
	part := func(name, v string) {
		fmt.Fprintf(h, "%s:%d:%s|", name, len(v), v)
	}
	part("kind", kind)
	if u.ByQueue {
		part("queue", queue)
	}
	if u.ByArgs {
		part("args", string(args))
	}
	if u.ByPeriod > 0 {
		p := u.ByPeriod.Nanoseconds()
		ns := at.UTC().UnixNano()
		bucket := ns / p
		if ns < 0 && ns%p != 0 {
			bucket--
		}
		part("period", strconv.FormatInt(bucket*p, 10))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// states returns ByStates, or the default, as the driver spells them.
func (u *Unique) states() []driver.JobState {
	states := u.ByStates
	if len(states) == 0 {
		states = defaultUniqueStates
	}
	out := make([]driver.JobState, len(states))
	for i, s := range states {
		out[i] = driver.JobState(s)
	}
	return out
}

// MaxSlots is the most slots a job may take of each of its concurrency
// keys (JobOptions.Slots, Slots).
const MaxSlots = driver.MaxSlots

// Slots overrides the definition's Slots for this enqueue: the job takes
// k slots of every one of its concurrency keys (see JobOptions.Slots).
func Slots(k int) EnqueueOption { return func(o *enqueueOptions) { o.slots = &k } }

// slotsOf is the Slots of one job: its keys' limits (limit first, then
// more) and its kind's adaptive floor (0: none), checked by slotsProblem.
type slotsOf struct {
	slots       int
	keyed       bool
	sequence    bool
	adaptiveMin int
	limits      []keyLimit
}

// keyLimit is a key's own To (0: left to its queue's policy), named as
// the error names it.
type keyLimit struct {
	name string
	to   int
}

// slotsAtEnqueue is s of a job about to be stored.
func slotsAtEnqueue(slots int, limit driver.Limit, more []driver.Limit, adaptiveMin int) slotsOf {
	s := slotsOf{slots: slots, keyed: limit.Key != "", sequence: limit.Sequence, adaptiveMin: adaptiveMin}
	for _, l := range append([]driver.Limit{limit}, more...) {
		s.limits = append(s.limits, keyLimit{name: "concurrency key " + quoted(l.Key), to: l.To})
	}
	return s
}

// problem is why the job cannot take its slots, or nil. Only a key's own
// To is checked: a limit left to the queue's policy, or set by
// SetKeyLimit, is known at admission only (the job then waits until the
// limit is raised; Explain says so).
func (s slotsOf) problem() error {
	switch {
	case s.slots < 0 || s.slots > MaxSlots:
		return fmt.Errorf("Slots is %d: use 1 to %d (bq.MaxSlots), or 0 for 1", s.slots, MaxSlots)
	case s.slots <= 1:
		return nil
	case !s.keyed:
		return fmt.Errorf("Slots is %d on a job with no concurrency key: slots count against a key's limit: give the job a Concurrency key, or drop Slots", s.slots)
	case s.sequence:
		return fmt.Errorf("Slots is %d on a job of a Concurrency.Sequence: a sequence runs one job at a time: drop Slots, or drop Sequence", s.slots)
	case s.adaptiveMin > 0 && s.slots > s.adaptiveMin:
		return fmt.Errorf("Slots is %d, above Concurrency.Adaptive.Min %d: a throttled key's limit may fall to Min, and the job would then wait for slots no completion gives back: raise Min to at least %d or lower Slots", s.slots, s.adaptiveMin, s.slots)
	}
	for _, l := range s.limits {
		if l.to > 0 && s.slots > l.to {
			return fmt.Errorf("Slots is %d, above the limit %d of %s: the job could never start: raise To to at least %d or lower Slots", s.slots, l.to, l.name, s.slots)
		}
	}
	return nil
}

// slotsDefined is s of the kind's definition.
func (j *Job[A]) slotsDefined() slotsOf {
	c := j.opts.Concurrency
	s := slotsOf{slots: j.opts.Slots, keyed: c != nil || len(j.opts.MoreConcurrency) > 0, sequence: c != nil && c.Sequence, adaptiveMin: j.adaptiveMin()}
	if c != nil {
		s.limits = append(s.limits, keyLimit{name: "Concurrency", to: c.To})
	}
	for i, m := range j.opts.MoreConcurrency {
		s.limits = append(s.limits, keyLimit{name: fmt.Sprintf("MoreConcurrency[%d]", i), to: m.To})
	}
	return s
}

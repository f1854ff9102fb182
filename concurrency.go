package bq

import (
	"errors"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
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
	// MaxWait is backpressure: an enqueue of a job that would be blocked
	// and is expected to wait longer than MaxWait for its slot is refused
	// (nothing is stored; Enqueue and EnqueueTx return a
	// *WaitTooLongError, errors.Is ErrWaitTooLong, with a RetryAfter; in
	// EnqueueMany, EnqueueManyTx and EnqueueBatch that job's result says
	// so in Refused and the others go on). The expected wait is the job's
	// place in the key's line times the key's recent release interval
	// (EnqueueResult.ExpectedStart; see docs/flow-control.md): while the
	// key has none measured, nothing is refused. It is decided under the
	// key's lock, as ready or blocked is, so it holds across a fleet. Only
	// a job due now is refused: one enqueued with At or In, a retry, a
	// promotion, a replacing job (Replace, CancelRunning) never are.
	// Default 0: no bound.
	MaxWait time.Duration
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
	if c.MaxWait < 0 {
		errs = append(errs, fmt.Errorf("%s.MaxWait is %s: use a positive duration (the longest a job may be expected to wait for its slot), or 0 for no bound", what, c.MaxWait))
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

// limit returns the concurrency limit of one job: the enqueue-time key if
// given, else the definition's.
func (j *Job[A]) limit(args A, o *enqueueOptions) (driver.Limit, error) {
	c := j.opts.Concurrency
	l := driver.Limit{Duration: defaultDuration}
	group := j.name
	if c != nil {
		group, l.To, l.Duration, l.OnConflict, l.MaxBlocked, l.MaxWait = c.Group, c.To, c.Duration, driver.OnConflict(c.OnConflict), c.MaxBlocked, c.MaxWait
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
			l := driver.Limit{Key: fullKey(c.Group, key), To: c.To, Duration: c.Duration, OnConflict: driver.OnConflict(c.OnConflict), MaxBlocked: c.MaxBlocked, MaxWait: c.MaxWait}
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

// ErrWaitTooLong is what a *WaitTooLongError matches with errors.Is: an
// enqueue refused by its key's Concurrency.MaxWait.
var ErrWaitTooLong = errors.New("expected wait for a concurrency slot too long")

// WaitTooLongError refuses the enqueue of a job whose expected wait in
// its key's line exceeds the key's Concurrency.MaxWait: nothing was
// stored. Enqueue again after RetryAfter, when the line is expected to
// have moved enough for the job to fit, or shed the work.
type WaitTooLongError struct {
	Key          string        // the full key whose line is too long
	ExpectedWait time.Duration // place in line × the key's release interval
	MaxWait      time.Duration // the bound it exceeded
	// Policy: MaxWait is the queue policy's (Policy.MaxWait), the job's
	// definition setting none.
	Policy   bool
	Interval time.Duration // the key's recent release interval
	// RetryAfter is ExpectedWait - MaxWait, at least one Interval.
	RetryAfter time.Duration
}

func (e *WaitTooLongError) Error() string {
	whose := "its Concurrency.MaxWait"
	if e.Policy {
		whose = "its queue policy's MaxWait"
	}
	return fmt.Sprintf("concurrency key %q: a job joining its line now is expected to wait %s for a slot (its place in line × the key's release interval %s), above %s %s: nothing was stored; enqueue again after %s, raise the key's limit or MaxWait, or shed the work",
		e.Key, e.ExpectedWait.Round(time.Millisecond), e.Interval, whose, e.MaxWait, e.RetryAfter.Round(time.Millisecond))
}

// Is matches ErrWaitTooLong.
func (e *WaitTooLongError) Is(target error) bool { return target == ErrWaitTooLong }

// waitTooLong is the error of a job its key's MaxWait refused (w.MaxWait
// set), else nil.
func waitTooLong(w lifecycle.Wait) *WaitTooLongError {
	if w.MaxWait <= 0 {
		return nil
	}
	return &WaitTooLongError{Key: w.Key, ExpectedWait: w.Expected, MaxWait: w.MaxWait, Policy: w.Policy, Interval: w.Interval,
		RetryAfter: max(w.Expected-w.MaxWait, w.Interval)}
}

package driver

import (
	"context"
	"slices"
	"time"
)

// OnConflict says what admission does with a job whose key has no slot.
type OnConflict int

const (
	Block OnConflict = iota
	Discard
)

// Limit is the concurrency spec a keyed job carries in its row, so the
// dispatcher can admit it without the job's code.
type Limit struct {
	Key string // full key, Group + "/" + Key(args); "" means unkeyed
	// To is the job's own limit; 0 leaves it to its queue's policy
	// (MaxActivePerKey), else 1. A key override (SetKeyLimit) beats both.
	To         int
	Duration   time.Duration
	OnConflict OnConflict
	// MaxBlocked caps the key's backlog; 0 leaves it to the queue's
	// policy, else unbounded.
	MaxBlocked int
	// MaxWait refuses a new job due now whose expected wait in the key's
	// line (ExpectedWait) exceeds it; 0 refuses none. It is not stored:
	// a job once accepted (scheduled, retried, promoted) is never
	// refused.
	MaxWait time.Duration
	// Sequence: the key's jobs run one at a time in enqueue order, and a
	// failing job keeps its slot, and so its place, through its retries
	// (a job's primary key only; stored in jobs.sequence).
	// SequenceHalt: a job of the sequence that fails for good keeps the
	// slot too, until it is retried or discarded by hand.
	Sequence, SequenceHalt bool
}

// Bits of the jobs.sequence column.
const (
	SequenceJob = 1 // a job of a sequence
	// SequenceHeld: a sequence's job that holds its key's slot while
	// scheduled (a retry, a snooze) or failed (SequenceHalt).
	SequenceHeld = 2
	SequenceHalt = 4 // its sequence halts when it fails for good
)

// SequenceColumn is the jobs.sequence value of a new job of l.
func SequenceColumn(l Limit) int {
	switch {
	case !l.Sequence || l.Key == "":
		return 0
	case l.SequenceHalt:
		return SequenceJob | SequenceHalt
	}
	return SequenceJob
}

// ScanSequence sets the fields of j that jobs.sequence value v holds.
func ScanSequence(j *Job, v int) {
	j.Limit.Sequence = v&SequenceJob != 0
	j.Limit.SequenceHalt = v&SequenceHalt != 0
	j.SlotHeld = v&SequenceHeld != 0
}

// Promotion is what moving blocked jobs to ready did: how many moved, and
// the queues they are in, each once: whose workers, in every process,
// must be woken.
type Promotion struct {
	Jobs   int
	Queues []string
	// JobIDs are the jobs moved (a hand-off claims among them).
	JobIDs []int64
	// LineLeft (SemaphoreReleaseMany only): the key's line holds multi-key jobs
	// (its Multi > 0), so its slots were given back but its line left for
	// the caller to promote (package semaphore).
	LineLeft bool
}

// Add counts o in p.
func (p *Promotion) Add(o Promotion) {
	p.Jobs += o.Jobs
	p.JobIDs = append(p.JobIDs, o.JobIDs...)
	for _, q := range o.Queues {
		p.AddQueue(q)
	}
}

// AddQueue names one more queue that got ready jobs.
func (p *Promotion) AddQueue(q string) {
	if !slices.Contains(p.Queues, q) {
		p.Queues = append(p.Queues, q)
	}
}

// Semaphore is a key's slot count. Value is the number of free slots:
// Limit minus the holders (ready and claimed jobs of the key). Blocked is
// how many jobs of the key wait in the blocked table.
type Semaphore struct {
	Key     string
	Value   int
	Limit   int
	Blocked int
	// Multi counts the multi-key jobs and the jobs of more than one slot
	// among Blocked (HeadByHead; see MultiKeyStore): while above 0, the line is promoted by package semaphore, head by
	// head, never by a driver's set-wise promotion.
	Multi     int
	Duration  time.Duration
	ExpiresAt time.Time
	// Interval is the key's release interval (see Released): the mean
	// time between two releases of its slots while its line was not
	// empty; 0 until one was measured. LastRelease is the last release
	// that found the line non-empty; zero once a release found it empty.
	// SemaphoreLock, SemaphoreLockMany and SemaphoreGet read Interval;
	// SemaphoreLock also LastRelease, setting Timed, and SemaphoreSave
	// writes both only when Timed is set (a row read without them keeps
	// the stored ones).
	Interval    time.Duration
	LastRelease time.Time
	Timed       bool

	// Read by SemaphoreLock, never saved:
	Override int    // the key's SetKeyLimit override; 0 when none
	Adapt    int    // the key's adaptive limit (KeyAdapt.Limit); 0 when none
	Policy   Policy // the policy of the queue named to SemaphoreLock
}

// RenewAfter is the share of a key's Duration left on its semaphore's
// failsafe (ExpiresAt) below which a slot taken or passed on renews it
// to a full Duration: package semaphore and the drivers' set-wise
// releases follow this one rule, so a busy key's expiry changes once per
// half Duration rather than with every job.
const RenewAfter = 0.5

// Renews reports whether a semaphore whose failsafe is at expires renews
// it at now, its Duration d: less than RenewAfter of d is left.
func Renews(expires, now time.Time, d time.Duration) bool {
	return expires.Before(now.Add(time.Duration(float64(d) * RenewAfter)))
}

// SemaphoreStore keeps each key's slot count; see package semaphore.
type SemaphoreStore interface {
	// SemaphoreEnsure creates key's semaphore with every slot free (limit
	// max(l.To, 1)) unless it exists; it never fails on a concurrent create.
	SemaphoreEnsure(ctx context.Context, l Limit, now time.Time) error
	// SemaphoreLock reads key's semaphore, its override and the policy of
	// queue ("" for none), and locks the semaphore until the transaction
	// ends. ok is false when it does not exist.
	SemaphoreLock(ctx context.Context, key, queue string) (s Semaphore, ok bool, err error)
	// SemaphoreTryLock locks key's semaphore until the transaction ends
	// unless another transaction holds it: maintenance skips a key
	// someone is admitting or releasing (they promote it themselves) and
	// never waits behind a holder that froze. false: missing or held.
	SemaphoreTryLock(ctx context.Context, key string) (bool, error)
	// SemaphoreSave writes Value, Limit, Blocked, Multi, Duration and ExpiresAt.
	SemaphoreSave(ctx context.Context, s Semaphore) error
	// LinePromote moves up to n blocked jobs of key to ready, highest
	// priority first, FIFO among equals, and returns what moved, with the
	// moved jobs' ids in that order.
	// Callers hold the key's semaphore lock.
	LinePromote(ctx context.Context, key string, n int, now time.Time) (Promotion, error)
	// HolderCount counts what the key's rows say its semaphore holds.
	HolderCount(ctx context.Context, key string) (HolderCount, error)
	MultiKeyStore
	MultiBatcher
	// SemaphoreReleaseMany gives back counts[i] slots of keys[i]
	// (sorted, distinct), each capped at its limit, then promotes blocked
	// jobs into the free slots, highest priority first, FIFO among
	// equals, and returns what each key promoted: the one release call
	// of the engine, each driver its best way (set-wise in a fixed number
	// of statements, or ReleaseOne for a single key where that is
	// cheaper). A key whose Multi is above 0 gets its slots back but its
	// line is left alone, its Promotion's LineLeft set: multi-key lines
	// are the engine's to promote (package semaphore).
	SemaphoreReleaseMany(ctx context.Context, keys []string, counts []int, now time.Time) ([]Promotion, error)
}

// ReleaseWeight is the most weight, in quarters, one release's sample of
// a key's release interval gets in its mean (Released).
const ReleaseWeight = 4

// Released is the release interval and last release of a key after n of
// its slots are released at once at now, blocked jobs in its line before
// the release (every release statement of every driver follows this one
// rule, in whole microseconds). Only a release that finds the line
// non-empty counts, so an idle gap never enters the mean: it sets last
// to now, and if the one before it found the line non-empty too, the
// time between them, shared by the n slots, is a sample s:
//
//	interval = s                              the first sample
//	interval = (interval*(4-w) + s*w) / 4     w = min(n, 4) after it
//
// (an exponentially weighted mean, n slots at once counting as n
// releases: a sample's weight halves in less than 3 releases, so the
// mean follows a change of run time within about 10), never below 1µs. A release that finds the line empty clears
// last, so the next sample starts from a release with a line. A saturated
// key of limit L whose jobs run T releases every T/L: a job p-th in line
// starts about p × interval from now.
func Released(interval time.Duration, last time.Time, blocked, n int, now time.Time) (time.Duration, time.Time) {
	if blocked <= 0 || n <= 0 {
		return interval, time.Time{}
	}
	if !last.IsZero() && now.UnixMicro() > last.UnixMicro() {
		s := (now.UnixMicro() - last.UnixMicro()) / int64(n)
		iv := interval.Microseconds()
		if iv > 0 {
			w := int64(min(n, ReleaseWeight))
			s = (iv*(ReleaseWeight-w) + s*w) / ReleaseWeight
		}
		interval = time.Duration(max(s, 1)) * time.Microsecond
	}
	return interval, now
}

// ExpectedWait is how long a job place-th in a key's line (1 for next)
// is expected to wait for its slot, from the key's release interval:
// place × interval; 0 when the interval is not known yet.
func ExpectedWait(place int, interval time.Duration) time.Duration {
	return time.Duration(max(place, 1)) * interval
}

// ReleaseOne is the per-key release, in three statements (lock, promote,
// save): the cheaper way for a single key on a database whose set-wise
// release costs more than that (MySQL, SQLite), and every key's way for
// a store with no set-wise release. It gives back count slots of key,
// capped at its limit, and promotes min(free, blocked) of its line,
// highest priority first, FIFO among equals; a key whose line holds
// multi-key jobs gets its slots back and its line is left to the
// caller (Promotion.LineLeft), as SemaphoreReleaseMany's.
func ReleaseOne(ctx context.Context, ex SemaphoreStore, key string, count int, now time.Time) (Promotion, error) {
	row, ok, err := ex.SemaphoreLock(ctx, key, "")
	if err != nil || !ok {
		return Promotion{}, err // not found: deleted idle, nothing held it
	}
	row.Interval, row.LastRelease = Released(row.Interval, row.LastRelease, row.Blocked, count, now)
	row.Value = min(row.Value+count, row.Limit)
	var p Promotion
	switch n := min(max(row.Value, 0), row.Blocked); {
	case row.Multi > 0:
		p.LineLeft = true
	case n > 0:
		if p, err = ex.LinePromote(ctx, key, n, now); err != nil {
			return Promotion{}, err
		}
		row.Value -= p.Jobs
		row.Blocked -= p.Jobs
		if p.Jobs < n {
			row.Blocked = 0 // fewer rows than counted: nothing is left
		}
		if p.Jobs > 0 && Renews(row.ExpiresAt, now, row.Duration) {
			row.ExpiresAt = now.Add(row.Duration)
		}
	}
	return p, ex.SemaphoreSave(ctx, row)
}

// BatchLocker is an executor that creates and locks the semaphores of
// many keys in a fixed number of statements, however many keys there
// are, so admitting a batch over many keys costs a constant number of
// round trips. Without it, keys are locked and saved one by one.
type BatchLocker interface {
	// SemaphoreLockMany creates each missing semaphore of limits (sorted
	// by Key, distinct), as SemaphoreEnsure does, then locks them all in
	// key order until the transaction ends, and returns each one's row,
	// override and the policy of queues[i], as SemaphoreLock does, in the
	// order of limits. A concurrent create of the same key never fails it.
	SemaphoreLockMany(ctx context.Context, limits []Limit, queues []string, now time.Time) ([]Semaphore, error)
	// SemaphoreSaveMany writes each semaphore as SemaphoreSave does, in
	// one statement.
	SemaphoreSaveMany(ctx context.Context, sems []Semaphore) error
}

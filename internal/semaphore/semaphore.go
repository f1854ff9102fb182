// Package semaphore is bq's concurrency core: a counting semaphore per
// concurrency key, stored in the database and changed only inside the
// transaction that changes the jobs it counts.
//
// A semaphore's value is its free slots: limit minus holders, where a
// holder is a ready or claimed job of the key. Admission (Lock, Wait,
// Block), release (Release) and a cancelled blocked job leaving the line
// (Leave) lock the row first, so an enqueue that decides to block and a
// completion that frees the slot are serialised: the completion sees the
// blocked row and promotes it (no lost wake-up).
package semaphore

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Semaphore is one key's slot count, locked until the transaction ends.
type Semaphore struct {
	ex         driver.SemaphoreStore
	row        driver.Semaphore
	now        time.Time
	maxBlocked int
	promoted   driver.Promotion
	set        *Set // the transaction's semaphores, once it reaches other keys
}

// Limit resolves a key's limit: a sequence's is 1; a key override
// (SetKeyLimit) beats the job's own To, which beats its queue policy's
// MaxActivePerKey; the default is 1.
func Limit(l driver.Limit, override int, policy driver.Policy) int {
	switch {
	case l.Sequence:
		return 1
	case override > 0:
		return override
	case l.To > 0:
		return l.To
	case policy.MaxActivePerKey > 0:
		return policy.MaxActivePerKey
	default:
		return 1
	}
}

// lock reads the key's semaphore, creating it if missing.
func lock(ctx context.Context, ex driver.SemaphoreStore, l driver.Limit, queue string, now time.Time) (*Semaphore, error) {
	// The dispatcher deletes idle semaphores; one may vanish between the
	// create and the lock, so try again.
	for range 3 {
		row, ok, err := ex.SemaphoreLock(ctx, l.Key, queue)
		if err != nil {
			return nil, err
		}
		if ok {
			s := &Semaphore{ex: ex, row: row, now: now}
			s.setLimit(driver.Adapted(Limit(l, row.Override, row.Policy), row.Adapt))
			return s, nil
		}
		if err := ex.SemaphoreEnsure(ctx, l, now); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("lock semaphore %q: it keeps disappearing", l.Key)
}

// Lock creates the key's semaphore if it is missing and locks it for
// admitting jobs of queue. The stored limit follows the resolved limit
// (see Limit): a changed limit moves the free slots by the difference, so
// the holders already admitted stay counted. Admission calls
// PromoteBlocked next, so jobs already blocked on the key take any free
// slot before a fresh enqueue can.
func Lock(ctx context.Context, ex driver.SemaphoreStore, l driver.Limit, queue string, now time.Time) (*Semaphore, error) {
	s, err := lock(ctx, ex, l, queue, now)
	if err != nil {
		return nil, err
	}
	s.admitting(l)
	return s, nil
}

// admitting applies the spec of the jobs being admitted: its Duration and
// its backlog cap, else its queue policy's.
func (s *Semaphore) admitting(l driver.Limit) {
	s.row.Duration = l.Duration
	s.maxBlocked = cmp.Or(l.MaxBlocked, s.row.Policy.MaxBlocked)
}

// LockMany locks the semaphores of limits (sorted by Key, distinct) for
// admitting jobs of queues[i], as Lock does for each, in key order, so
// two transactions admitting overlapping keys cannot deadlock. Drivers
// that can do it set-wise (driver.BatchLocker) create and lock any
// number of keys in a fixed number of statements.
func LockMany(ctx context.Context, ex driver.SemaphoreStore, limits []driver.Limit, queues []string, now time.Time) ([]*Semaphore, error) {
	if len(limits) != len(queues) {
		return nil, fmt.Errorf("lock %d semaphores: %d queues given, want one a key", len(limits), len(queues))
	}
	out := make([]*Semaphore, len(limits))
	bl, ok := ex.(driver.BatchLocker)
	if !ok || len(limits) < 2 {
		for i, l := range limits {
			var err error
			if out[i], err = Lock(ctx, ex, l, queues[i], now); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	rows, err := bl.SemaphoreLockMany(ctx, limits, queues, now)
	if err != nil {
		return nil, err
	}
	if len(rows) != len(limits) {
		return nil, fmt.Errorf("lock %d semaphores: the driver returned %d", len(limits), len(rows))
	}
	for i, l := range limits {
		if rows[i].Key != l.Key {
			return nil, fmt.Errorf("lock semaphore %q: the driver returned %q in its place", l.Key, rows[i].Key)
		}
		s := &Semaphore{ex: ex, row: rows[i], now: now}
		s.setLimit(driver.Adapted(Limit(l, s.row.Override, s.row.Policy), s.row.Adapt))
		s.admitting(l)
		out[i] = s
	}
	return out, nil
}

// SaveMany writes sems back, in one statement where the driver can
// (driver.BatchLocker).
func SaveMany(ctx context.Context, ex driver.SemaphoreStore, sems []*Semaphore) error {
	bl, ok := ex.(driver.BatchLocker)
	if !ok || len(sems) < 2 {
		for _, s := range sems {
			if err := s.Save(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	rows := make([]driver.Semaphore, len(sems))
	for i, s := range sems {
		rows[i] = s.row
	}
	return bl.SemaphoreSaveMany(ctx, rows)
}

// Promoted is what the semaphore promoted while locked.
func (s *Semaphore) Promoted() driver.Promotion { return s.promoted }

// setLimit moves the free slots by the change of limit.
func (s *Semaphore) setLimit(limit int) {
	s.row.Value += limit - s.row.Limit
	s.row.Limit = limit
}

// Resolve applies the key's limit now, after an override or a policy
// changed: raising it promotes blocked jobs at once; lowering it admits
// nothing until the holders drain below it (running jobs finish). l is the
// key's job spec and queue their queue (for the policy); a key never seen
// gets a semaphore.
func Resolve(ctx context.Context, ex driver.SemaphoreStore, l driver.Limit, queue string, now time.Time) (driver.Promotion, error) {
	l.Duration = cmp.Or(l.Duration, DefaultDuration)
	s, err := lock(ctx, ex, l, queue, now)
	if err != nil {
		return driver.Promotion{}, err
	}
	set := NewSet(ex, now)
	set.add(s)
	if err := s.PromoteBlocked(ctx); err != nil {
		return driver.Promotion{}, err
	}
	return set.Promoted(), set.Save(ctx)
}

// DefaultDuration is the failsafe of a semaphore created without a job.
const DefaultDuration = 3 * time.Minute

// Free is the number of slots no holder has.
func (s *Semaphore) Free() int { return max(s.row.Value, 0) }

// BacklogFull reports whether the key's MaxBlocked jobs already wait.
func (s *Semaphore) BacklogFull() bool { return s.maxBlocked > 0 && s.row.Blocked >= s.maxBlocked }

// Limit is the key's current limit.
func (s *Semaphore) Limit() int { return s.row.Limit }

// MaxBlocked is the key's backlog cap; 0 when unbounded.
func (s *Semaphore) MaxBlocked() int { return s.maxBlocked }

// PolicyMaxWait is the MaxWait of the policy of the queue the key was
// locked for; 0 when none.
func (s *Semaphore) PolicyMaxWait() time.Duration { return s.row.Policy.MaxWait }

// Wait takes up to n free slots and returns how many it took.
func (s *Semaphore) Wait(n int) int {
	taken := min(s.Free(), n)
	if taken > 0 {
		s.row.Value -= taken
		s.renew()
	}
	return taken
}

// Block counts n more jobs waiting in the blocked table.
func (s *Semaphore) Block(n int) { s.row.Blocked += n }

// BlockMulti counts one more job waiting in the key's line that its
// promotion walks head by head: a multi-key job or one of several slots
// (driver.HeadByHead).
func (s *Semaphore) BlockMulti() {
	s.row.Blocked++
	s.row.Multi++
}

// Blocked is the number of jobs waiting in the key's line.
func (s *Semaphore) Blocked() int { return s.row.Blocked }

// Interval is the key's release interval (driver.Released); 0 until
// measured.
func (s *Semaphore) Interval() time.Duration { return s.row.Interval }

// ExpectedWait is the expected wait of a job joining the key's line now,
// behind every job in it (driver.ExpectedWait); 0 when unknown.
func (s *Semaphore) ExpectedWait() time.Duration {
	return driver.ExpectedWait(s.row.Blocked+1, s.row.Interval)
}

// Save writes the semaphore back.
func (s *Semaphore) Save(ctx context.Context) error {
	return s.ex.SemaphoreSave(ctx, s.row)
}

// renew pushes the failsafe back to a full Duration from now once less
// than half of it is left: a busy key's expiry then changes
// once per half Duration (driver.RenewAfter), not on every admission, so its row is written
// without touching the expiry index (a HOT update on PostgreSQL, fewer
// pages on SQLite). Expiring early only makes the dispatcher recount the
// key from its rows, which never frees a live holder's slot.
func (s *Semaphore) renew() {
	if driver.Renews(s.row.ExpiresAt, s.now, s.row.Duration) {
		s.row.ExpiresAt = s.now.Add(s.row.Duration)
	}
}

// PromoteBlocked hands free slots to blocked jobs: min(free, blocked) of
// them, highest priority first, FIFO among equals.
func (s *Semaphore) PromoteBlocked(ctx context.Context) error {
	if s.row.Multi > 0 {
		if s.set == nil {
			NewSet(s.ex, s.now).add(s)
		}
		return s.set.promoteLines(ctx, []*Semaphore{s})
	}
	n := min(s.Free(), s.row.Blocked)
	if n <= 0 {
		return nil
	}
	p, err := s.ex.LinePromote(ctx, s.row.Key, n, s.now)
	if err != nil {
		return err
	}
	s.promoted.Add(p)
	s.row.Value -= p.Jobs
	s.row.Blocked -= p.Jobs
	if p.Jobs < n {
		s.row.Blocked = 0 // fewer rows than counted: nothing is left
	}
	if p.Jobs > 0 {
		s.renew()
	}
	return nil
}

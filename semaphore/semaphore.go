// Package semaphore is bq's concurrency core: a counting semaphore per
// concurrency key, stored in the database and changed only inside the
// transaction that changes the jobs it counts.
//
// A semaphore's value is its free slots: limit minus holders, where a
// holder is a ready or claimed job of the key. Admission (Lock, Wait,
// Block) and release (Signal) lock the row first, so an enqueue that
// decides to block and a completion that frees the slot are serialised:
// the completion sees the blocked row and promotes it (no lost wake-up).
package semaphore

import (
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Semaphore is one key's slot count, locked until the transaction ends.
type Semaphore struct {
	ex  driver.Executor
	row driver.Semaphore
	now time.Time
}

// Lock creates the key's semaphore if it is missing and locks it. The
// stored limit follows l.To: a changed limit moves the free slots by the
// difference, so the holders already admitted stay counted. Jobs already
// blocked on the key take any free slot before Lock returns, so a fresh
// enqueue never overtakes them.
func Lock(ctx context.Context, ex driver.Executor, l driver.Limit, now time.Time) (*Semaphore, error) {
	// The dispatcher deletes idle semaphores; one may vanish between the
	// create and the lock, so try again.
	for range 3 {
		row, ok, err := ex.SemaphoreLock(ctx, l.Key)
		if err != nil {
			return nil, err
		}
		if !ok {
			if err := ex.SemaphoreEnsure(ctx, l, now); err != nil {
				return nil, err
			}
			continue
		}
		s := &Semaphore{ex: ex, row: row, now: now}
		if row.Limit != l.To {
			s.row.Value += l.To - row.Limit
			s.row.Limit = l.To
		}
		s.row.Duration = l.Duration
		if _, err := s.promote(ctx); err != nil {
			return nil, err
		}
		return s, nil
	}
	return nil, fmt.Errorf("lock semaphore %q: it keeps disappearing", l.Key)
}

// Free is the number of slots no holder has.
func (s *Semaphore) Free() int { return max(s.row.Value, 0) }

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

// Save writes the semaphore back.
func (s *Semaphore) Save(ctx context.Context) error {
	return s.ex.SemaphoreSave(ctx, s.row)
}

func (s *Semaphore) renew() {
	if exp := s.now.Add(s.row.Duration); exp.After(s.row.ExpiresAt) {
		s.row.ExpiresAt = exp
	}
}

// promote hands free slots to blocked jobs: min(free, blocked) of them,
// highest priority first, FIFO among equals.
func (s *Semaphore) promote(ctx context.Context) (int, error) {
	n := min(s.Free(), s.row.Blocked)
	if n <= 0 {
		return 0, nil
	}
	moved, err := s.ex.PromoteBlocked(ctx, s.row.Key, n, s.now)
	if err != nil {
		return 0, err
	}
	s.row.Value -= moved
	s.row.Blocked -= moved
	if moved < n {
		// Fewer rows than counted: nothing is left blocked.
		s.row.Blocked = 0
	}
	if moved > 0 {
		s.renew()
	}
	return moved, nil
}

// Signal releases one slot of key, as a holder finishes, fails or leaves
// for a later retry, and passes it straight to the next blocked job. The
// free count never rises above the limit, so a second release of the same
// holder cannot create a slot. Callers release only after deleting the
// holder's claim (fence matched) in the same transaction.
func Signal(ctx context.Context, ex driver.Executor, key string, now time.Time) (promoted int, err error) {
	row, ok, err := ex.SemaphoreLock(ctx, key)
	if err != nil || !ok {
		return 0, err
	}
	s := &Semaphore{ex: ex, row: row, now: now}
	s.row.Value = min(s.row.Value+1, s.row.Limit)
	if promoted, err = s.promote(ctx); err != nil {
		return 0, err
	}
	return promoted, s.Save(ctx)
}

// Promote hands a key's free slots to its blocked jobs; the dispatcher
// runs it for keys that have both, so nothing waits beside a free slot
// for longer than one dispatcher interval.
func Promote(ctx context.Context, ex driver.Executor, key string, now time.Time) (promoted int, err error) {
	row, ok, err := ex.SemaphoreLock(ctx, key)
	if err != nil || !ok {
		return 0, err
	}
	s := &Semaphore{ex: ex, row: row, now: now}
	if promoted, err = s.promote(ctx); err != nil || promoted == 0 {
		return promoted, err
	}
	return promoted, s.Save(ctx)
}

// Reclaim recounts an expired semaphore from the rows it stands for:
// free = limit - (ready + claimed jobs of the key), and blocked from the
// blocked table. Slots whose holders are gone come back and pass to
// blocked jobs; slots of live holders stay taken, so reclaiming never lets
// a job start beside one that still runs. Callers first return the claims
// of dead processes to ready (they keep their slots) or fail them.
func Reclaim(ctx context.Context, ex driver.Executor, key string, now time.Time) (promoted int, err error) {
	row, ok, err := ex.SemaphoreLock(ctx, key)
	if err != nil || !ok {
		return 0, err
	}
	holders, blocked, err := ex.CountHolders(ctx, key)
	if err != nil {
		return 0, err
	}
	s := &Semaphore{ex: ex, row: row, now: now}
	s.row.Value = s.row.Limit - holders
	s.row.Blocked = blocked
	s.row.ExpiresAt = now.Add(s.row.Duration)
	if promoted, err = s.promote(ctx); err != nil {
		return 0, err
	}
	return promoted, s.Save(ctx)
}

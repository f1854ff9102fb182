package sqlexec

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// A rate key's ring: its slots, each the instant of one of its last
// starts or a job's reservation (driver.RateStore).

// rateBatch bounds the slots of one multi-row INSERT (3 arguments each).
// Counts are cut into powers of two up to it, so a handful of statement
// texts serve every ring size and each stays prepared (SQLite's cache).
const rateBatch = 256

// insertSlots adds n free slots to key's ring, numbered from first.
func (e *Executor) insertSlots(ctx context.Context, key string, first, n int) error {
	k := e.d.KeyIndex(key)
	for n > 0 {
		size := rateBatch
		for size > n {
			size /= 2
		}
		args := make([]any, 0, 3*size)
		for i := range size {
			args = append(args, k, first+i, int64(0))
		}
		if _, err := e.db.ExecContext(ctx, e.q.Rate.Slots+Values(size, 3), args...); err != nil {
			return err
		}
		first, n = first+size, n-size
	}
	return nil
}

func (e *Executor) RateEnsure(ctx context.Context, spec driver.RateSpec, now time.Time) error {
	if err := e.d.CheckKey(spec.Key); err != nil {
		return fmt.Errorf("create rate: %w", err)
	}
	err := e.Atomic(ctx, func(x *Executor) error {
		n, err := x.exec(ctx, x.q.Rate.Ensure, x.key(spec.Key, spec.Limit, spec.Period.Milliseconds(), Micros(now))...)
		if err != nil || n != 1 {
			return err
		}
		return x.insertSlots(ctx, spec.Key, 0, spec.Limit)
	})
	if err != nil {
		return fmt.Errorf("create rate %q: %w", spec.Key, err)
	}
	return nil
}

func (e *Executor) rateLock(ctx context.Context, query, key string) (driver.Rate, bool, error) {
	r := driver.Rate{Key: key}
	ok, err := found(scanRate(e.db.QueryRowContext(ctx, query, e.d.KeyIndex(key)).Scan, &r, nil))
	if err != nil {
		return driver.Rate{}, false, fmt.Errorf("lock rate %q: %w", key, err)
	}
	if !ok {
		return driver.Rate{}, false, nil
	}
	return r, true, nil
}

// RateLock locks the key's row in a statement of its own (LockRow),
// then reads it with its override and adaptive limit, as the
// transaction it may have waited for left them (see SemaphoreLock).
func (e *Executor) RateLock(ctx context.Context, key string) (driver.Rate, bool, error) {
	if e.q.Rate.LockRow != "" {
		var one int
		if _, err := found(e.db.QueryRowContext(ctx, e.q.Rate.LockRow, e.d.KeyIndex(key)).Scan(&one)); err != nil {
			return driver.Rate{}, false, fmt.Errorf("lock rate %q: %w", key, err)
		}
	}
	return e.rateLock(ctx, e.q.Rate.Lock, key)
}

func (e *Executor) RateTryLock(ctx context.Context, key string) (driver.Rate, bool, error) {
	return e.rateLock(ctx, e.q.Rate.TryLock, key)
}

func (e *Executor) RateSave(ctx context.Context, r driver.Rate, now time.Time) error {
	if _, err := e.exec(ctx, e.q.Rate.Save, r.Limit, r.Period.Milliseconds(), r.Waiting, nullMicros(r.NextAt),
		Micros(now), e.d.KeyIndex(r.Key)); err != nil {
		return fmt.Errorf("save rate %q: %w", r.Key, err)
	}
	return nil
}

func (e *Executor) RateResizeRing(ctx context.Context, key string, from, to int) error {
	if from == to {
		return nil
	}
	err := e.Atomic(ctx, func(x *Executor) error {
		k := x.d.KeyIndex(key)
		if to > from {
			var last int
			if err := x.db.QueryRowContext(ctx, x.q.Rate.MaxSlot, k).Scan(&last); err != nil {
				return err
			}
			return x.insertSlots(ctx, key, last+1, to-from)
		}
		slots, err := Column[int64](ctx, x.db, x.q.Rate.Oldest, k, from-to)
		if err != nil || len(slots) == 0 {
			return err
		}
		_, err = execInAfter(ctx, x, x.q.Rate.DropSlots, []any{k}, slots)
		return err
	})
	if err != nil {
		return fmt.Errorf("resize the ring of rate %q from %d to %d: %w", key, from, to, err)
	}
	return nil
}

func (e *Executor) RateSlotListFree(ctx context.Context, key string, notAfter time.Time, max int) ([]int, error) {
	slots, err := Column[int](ctx, e.db, e.q.Rate.Free, e.d.KeyIndex(key), Micros(notAfter), max)
	if err != nil {
		return nil, fmt.Errorf("read free slots of rate %q: %w", key, err)
	}
	return slots, nil
}

func (e *Executor) RateSlotSetMany(ctx context.Context, p driver.RateSlotsParams) error {
	key, slots, jobIDs, at := p.Key, p.Slots, p.JobIDs, p.At
	if len(slots) != len(jobIDs) {
		return fmt.Errorf("set slots of rate %q: %d slots but %d job ids", key, len(slots), len(jobIDs))
	}
	// One statement per MaxList slots: a claim's stamps are one round
	// trip, however many it starts.
	step := len(slots)
	if m := e.d.MaxList(); m > 0 {
		step = min(step, m/2)
	}
	for len(slots) > 0 {
		n := min(step, len(slots))
		query := e.q.Rate.SetSlotsHead + strings.Repeat(" WHEN ? THEN ?", n) + e.q.Rate.SetSlotsTail
		args := []any{Micros(at)}
		for i, slot := range slots[:n] {
			args = append(args, slot, sql.NullInt64{Int64: jobIDs[i], Valid: jobIDs[i] != 0})
		}
		query, list := in(e, query, slots[:n])
		args = append(append(args, e.d.KeyIndex(key)), list...)
		if _, err := e.exec(ctx, query, args...); err != nil {
			return fmt.Errorf("set slots of rate %q: %w", key, err)
		}
		slots, jobIDs = slots[n:], jobIDs[n:]
	}
	return nil
}

func (e *Executor) RateSlotUnstamp(ctx context.Context, p driver.RateUnstampParams) (bool, error) {
	key, slot, stamped, to := p.Key, p.Slot, p.Stamped, p.To
	n, err := e.exec(ctx, e.q.Rate.Unstamp, Micros(to), e.d.KeyIndex(key), slot, Micros(stamped))
	if err != nil {
		return false, fmt.Errorf("give back slot %d of rate %q: %w", slot, key, err)
	}
	return n == 1, nil
}

func (e *Executor) RateSlotListReserved(ctx context.Context, key string, jobIDs []int64) (map[int64]int, error) {
	out := map[int64]int{}
	if len(jobIDs) == 0 {
		return out, nil
	}
	query, args := in(e, e.q.Rate.Reserved, jobIDs)
	type pair struct {
		job  int64
		slot int
	}
	pairs, err := Collect(ctx, e.db, func(rows *sql.Rows) (p pair, err error) {
		err = rows.Scan(&p.job, &p.slot)
		return p, err
	}, query, append([]any{e.d.KeyIndex(key)}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("read the reservations of rate %q: %w", key, err)
	}
	for _, p := range pairs {
		out[p.job] = p.slot
	}
	return out, nil
}

func (e *Executor) RateSlotCancelReservation(ctx context.Context, key string, jobID int64) error {
	if _, err := e.exec(ctx, e.q.Rate.CancelReservation, e.d.KeyIndex(key), jobID); err != nil {
		return fmt.Errorf("cancel the reservation of job %d in rate %q: %w", jobID, key, err)
	}
	return nil
}

func (e *Executor) RateSlotRepairReservations(ctx context.Context, key string) (int, error) {
	n, err := e.exec(ctx, e.q.Rate.Repair, e.d.KeyIndex(key))
	if err != nil {
		return 0, fmt.Errorf("repair reservations of rate %q: %w", key, err)
	}
	return int(n), nil
}

func (e *Executor) RateSlotGetOldest(ctx context.Context, key string, except []int) (time.Time, error) {
	type slotAt struct {
		slot int
		at   int64
	}
	rows, err := Collect(ctx, e.db, func(r *sql.Rows) (s slotAt, err error) {
		err = r.Scan(&s.slot, &s.at)
		return s, err
	}, e.q.Rate.OldestSlot, e.d.KeyIndex(key), len(except)+1)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the oldest slot of rate %q: %w", key, err)
	}
	for _, r := range rows {
		if !slices.Contains(except, r.slot) {
			return FromMicros(r.at), nil
		}
	}
	return driver.Reserved, nil // no slot left out: none to wait for
}

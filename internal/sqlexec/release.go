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

var _ driver.SemaphoreStore = (*Executor)(nil)

// ReleaseQueries are the statements of the set-wise release
// (SemaphoreReleaseMany; a dialect releasing its own way, SQLite, leaves them
// empty). Keys travel as their KeyIndex.
type ReleaseQueries struct {
	// Lock reads position, value, lim, blocked, multi, duration_ms,
	// expires_at, release_interval_us, last_release_at of the keys of its ListMarker, a table of (at, k): each
	// key's position in the batch and its KeyIndex. It locks them in
	// position order, the keys' sorted order.
	Lock string
	// FirstKey selects the first row of Lock's table, naming its columns
	// at and k; NextKey, each further row, joined to it by UNION ALL.
	FirstKey, NextKey string
	// PickBranch is one key's part of the pick, joined by UNION ALL: its
	// first blocked jobs in line order (args: the key's position, its
	// index, how many) as position, job_id, queue, priority.
	PickBranch string
	// SaveHead and SaveTail enclose the VALUES rows (key index, key,
	// value, lim, blocked, multi, duration_ms, expires_at) of the
	// semaphores written back; the release's SaveTail leaves multi as it
	// is (the release changes no multi-key job's line). The release
	// writes its rows with TimedHead: SaveHead's columns, then
	// release_interval_us and last_release_at (driver.Released).
	SaveHead, TimedHead, SaveTail string
}

// releasing is one key of a SemaphoreReleaseMany: its locked row and what the
// release does to it.
type releasing struct {
	key            string
	give           int // slots given back
	found          bool
	interval       time.Duration // the release interval (driver.Released)
	last           time.Time
	value, lim     int
	blocked, take  int
	multi          int // multi-key jobs in the line: left to the caller
	durMS, expires int64
	promoted       driver.Promotion
}

// SemaphoreReleaseMany does set-wise what semaphore.ReleaseN does per key, in a
// fixed number of statements per MaxList keys: lock the semaphores in key
// order (one statement), give back the slots capped at each limit, pick
// each key's first min(free, blocked) blocked jobs (one statement, each
// key's branch bounded by its index, so a long line is not read), move
// them to ready, and write the semaphores back in one statement. A key
// whose line holds multi-key jobs (multi > 0) gets its slots back but
// promotes none: its line is the caller's (Promotion.LineLeft).
func (e *Executor) SemaphoreReleaseMany(ctx context.Context, keys []string, counts []int, now time.Time) ([]driver.Promotion, error) {
	if len(keys) == 1 {
		// One key: lock, promote and save cost less than the set-wise
		// statements.
		var p driver.Promotion
		err := e.Atomic(ctx, func(x *Executor) (err error) {
			p, err = driver.ReleaseOne(ctx, x, keys[0], counts[0], now)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("release key %q: %w", keys[0], err)
		}
		return []driver.Promotion{p}, nil
	}
	out := make([]driver.Promotion, len(keys))
	err := e.Atomic(ctx, func(x *Executor) error {
		size := len(keys)
		if m := x.d.MaxList(); m > 0 {
			size = min(size, m)
		}
		// keys are sorted: chunk after chunk, the semaphores are locked in
		// key order, as admission locks them (DESIGN.md lesson 7).
		for from := 0; from < len(keys); from += size {
			batch := make([]*releasing, min(size, len(keys)-from))
			for j := range batch {
				batch[j] = &releasing{key: keys[from+j], give: counts[from+j]}
			}
			if err := x.releaseChunk(ctx, batch, now); err != nil {
				return err
			}
			for j, r := range batch {
				out[from+j] = r.promoted
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("release %d keys: %w", len(keys), err)
	}
	return out, nil
}

// releaseChunk releases the keys of one chunk.
func (x *Executor) releaseChunk(ctx context.Context, batch []*releasing, now time.Time) error {
	q := x.q.Release
	keys := make([]any, 0, 2*len(batch))
	for i, r := range batch {
		keys = append(keys, i, x.d.KeyIndex(r.key))
	}
	table := "(" + q.FirstKey + strings.Repeat(q.NextKey, len(batch)-1) + ")"
	rows, err := x.db.QueryContext(ctx, strings.Replace(q.Lock, ListMarker, table, 1), keys...)
	if err != nil {
		return fmt.Errorf("lock the semaphores: %w", err)
	}
	for rows.Next() {
		var at, value, lim, blocked, multi int
		var durMS, expires, intervalUS int64
		var last sql.NullInt64
		if err := rows.Scan(&at, &value, &lim, &blocked, &multi, &durMS, &expires, &intervalUS, &last); err != nil {
			rows.Close()
			return err
		}
		if at < 0 || at >= len(batch) {
			rows.Close()
			return fmt.Errorf("lock of semaphores named key %d of %d", at, len(batch))
		}
		r := batch[at]
		r.found, r.value, r.lim, r.blocked, r.multi, r.durMS, r.expires = true, value, lim, blocked, multi, durMS, expires
		r.interval, r.last = driver.Released(time.Duration(intervalUS)*time.Microsecond, optMicros(last), blocked, r.give, now)
	}
	if err := CloseRows(rows); err != nil {
		return fmt.Errorf("lock the semaphores: %w", err)
	}

	// Give back, capped at the limit; then what is free goes to the line.
	var branches []string
	var args []any
	for i, r := range batch {
		if !r.found {
			continue // deleted idle: nothing held it
		}
		r.value = min(r.value+r.give, r.lim)
		if r.multi > 0 {
			r.promoted.LineLeft = true
			continue
		}
		if r.take = min(max(r.value, 0), r.blocked); r.take > 0 {
			branches = append(branches, "("+q.PickBranch+")")
			args = append(args, i, x.d.KeyIndex(r.key), r.take)
		}
	}
	var picked []driver.Execution
	if len(branches) > 0 {
		// The semaphore locks held cover the key's blocked rows, which
		// every writer of them takes first: a plain read is stable.
		picked, err = Collect(ctx, x.db, func(rows *sql.Rows) (p driver.Execution, err error) {
			var at int
			if err = rows.Scan(&at, &p.JobID, &p.Queue, &p.Priority); err != nil {
				return p, err
			}
			if at < 0 || at >= len(batch) {
				return p, fmt.Errorf("pick of blocked jobs named key %d of %d", at, len(batch))
			}
			r := batch[at]
			p.Key, p.At = r.key, now
			r.promoted.Jobs++
			r.promoted.JobIDs = append(r.promoted.JobIDs, p.JobID)
			r.promoted.AddQueue(p.Queue)
			return p, nil
		}, strings.Join(branches, "\nUNION ALL\n"), args...)
		if err != nil {
			return fmt.Errorf("pick blocked jobs: %w", err)
		}
	}
	if len(picked) > 0 {
		ids := make([]int64, len(picked))
		for i, p := range picked {
			ids[i] = p.JobID
		}
		slices.Sort(ids)
		deleted, err := ExecIn(ctx, x, x.q.DeleteBlocked, ids)
		if err != nil {
			return fmt.Errorf("delete blocked rows: %w", err)
		}
		if deleted != int64(len(ids)) {
			return fmt.Errorf("%d of %d blocked rows vanished under the semaphore locks", int64(len(ids))-deleted, len(ids))
		}
		if err := x.insertExecutions(ctx, driver.StateReady, picked); err != nil {
			return err
		}
	}

	values := make([]any, 0, 10*len(batch))
	n := 0
	for _, r := range batch {
		if !r.found {
			continue
		}
		moved := r.promoted.Jobs
		r.value -= moved
		if moved < r.take {
			r.blocked = 0 // fewer rows than counted: nothing is left blocked
		} else {
			r.blocked -= moved
		}
		// A key that promoted renews its expiry as Semaphore.Wait does.
		if moved > 0 && driver.Renews(FromMicros(r.expires), now, time.Duration(r.durMS)*time.Millisecond) {
			r.expires = Micros(now) + r.durMS*1000
		}
		values = append(values, x.d.KeyIndex(r.key), x.d.Text(r.key), r.value, r.lim, r.blocked, r.multi, r.durMS, r.expires,
			r.interval.Microseconds(), lastMicros(r.last))
		n++
	}
	if n == 0 {
		return nil
	}
	if _, err := x.db.ExecContext(ctx, q.TimedHead+Values(n, 10)+q.SaveTail, values...); err != nil {
		return fmt.Errorf("save the semaphores: %w", err)
	}
	return nil
}

package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlexec"
)

// executor is sqlexec's, with what SQLite does its own way: completion
// and release set-wise (RETURNING, json_each), and the processes'
// beacons (beacon.go).
type executor struct {
	*sqlexec.Executor
	d *engine
}

// txExecutor is a transaction bq owns.
type txExecutor struct {
	executor
	sqlexec.Ending
}

var (
	_ driver.Tx             = txExecutor{}
	_ driver.SemaphoreStore = executor{}
)

// ClaimCompleteMany ends the claims set-wise: one DELETE ... RETURNING
// finds those whose fences match.
func (e executor) ClaimCompleteMany(ctx context.Context, claims []*driver.Claim, keep bool, now time.Time) ([]driver.Ended, error) {
	pairs := make([][2]int64, len(claims))
	for i, c := range claims {
		pairs[i] = [2]int64{c.ID, c.Fence}
	}
	arg := jsonOf(pairs)
	var matched []driver.Ended
	err := e.Atomic(ctx, func(x *sqlexec.Executor) error {
		matched = matched[:0]
		rows, err := x.DB().QueryContext(ctx, e.d.dl.own.endClaims, arg)
		if err != nil {
			return err
		}
		ended := make([]int64, 0, len(claims))
		for rows.Next() {
			var f driver.Ended
			if err := rows.Scan(&f.JobID, &f.Fence); err != nil {
				rows.Close()
				return err
			}
			matched = append(matched, f)
			ended = append(ended, f.JobID)
		}
		if err := sqlexec.CloseRows(rows); err != nil || len(ended) == 0 {
			return err
		}
		if err := e.markDependents(ctx, x, matched, ended); err != nil {
			return err
		}
		if keep {
			_, err = x.DB().ExecContext(ctx, e.d.dl.own.finishJobs, sqlexec.Micros(now), jsonOf(ended))
		} else {
			_, err = x.DB().ExecContext(ctx, e.d.dl.q.DeleteJobs, jsonOf(ended))
		}
		return err
	})
	if err != nil {
		return nil, sqlexec.CompleteError(len(claims), err)
	}
	return matched, nil
}

// SemaphoreReleaseMany releases and promotes for every key of a batch in a fixed
// number of statements, whatever the number of keys: it does set-wise
// what semaphore.SignalN does per key (release capped at the limit,
// promote min(free, blocked) jobs, renew the expiry of keys that
// promoted). The transaction's write lock makes reading, computing and
// writing back safe. A key whose line holds multi-key jobs (multi > 0)
// gets its slots back but promotes none: its line is the caller's
// (Promotion.LineLeft).
func (e executor) SemaphoreReleaseMany(ctx context.Context, keys []string, counts []int, now time.Time) ([]driver.Promotion, error) {
	if len(keys) == 1 {
		// One key: lock, promote and save cost less than the set-wise
		// statements.
		var p driver.Promotion
		err := e.Atomic(ctx, func(x *sqlexec.Executor) (err error) {
			p, err = driver.ReleaseOne(ctx, x, keys[0], counts[0], now)
			return err
		})
		return []driver.Promotion{p}, err
	}
	out := make([]driver.Promotion, len(keys))
	err := e.Atomic(ctx, func(x *sqlexec.Executor) error {
		sems, err := e.readSems(ctx, x, keys)
		if err != nil {
			return err
		}
		var waiting []string // keys with a free slot and a blocked job
		var takes []int
		for i, k := range keys {
			s := sems[k]
			if s == nil {
				continue // deleted idle: nothing held it
			}
			s.interval, s.last = driver.Released(s.interval, s.last, s.blocked, counts[i], now)
			s.value = min(s.value+counts[i], s.limit)
			if s.multi > 0 {
				continue // its line holds multi-key jobs: the caller's to promote
			}
			if take := min(max(s.value, 0), s.blocked); take > 0 {
				waiting, takes = append(waiting, k), append(takes, take)
			}
		}
		moved, err := e.promoteFirst(ctx, x, waiting, takes, now)
		if err != nil {
			return err
		}
		for i, k := range waiting {
			s := sems[k]
			s.promoted = moved[i]
			if s.promoted.Jobs < takes[i] {
				s.blocked = s.promoted.Jobs // fewer rows than counted: nothing is left blocked
			}
		}
		settle := make([]any, 0, 5*len(sems)) // key, value, blocked, interval, last
		var renew []any                       // key, expires_at
		for i, k := range keys {
			s := sems[k]
			if s == nil {
				continue
			}
			n := s.promoted.Jobs
			s.value -= n
			s.blocked -= n
			var last any // NULL
			if !s.last.IsZero() {
				last = sqlexec.Micros(s.last)
			}
			settle = append(settle, k, s.value, s.blocked, s.interval.Microseconds(), last)
			if n > 0 && driver.Renews(s.expires, now, s.duration) {
				renew = append(renew, k, sqlexec.Micros(now.Add(s.duration)))
			}
			out[i] = driver.Promotion{Jobs: n, Queues: s.promoted.Queues, JobIDs: s.promoted.JobIDs, LineLeft: s.multi > 0}
		}
		if len(settle) == 0 {
			return nil
		}
		if err := x.ExecRows(ctx, e.d.dl.own.settleKeys, 5, settle); err != nil {
			return err
		}
		return x.ExecRows(ctx, e.d.dl.own.expireSems, 2, renew)
	})
	if err != nil {
		return nil, fmt.Errorf("release %d keys: %w", len(keys), err)
	}
	return out, nil
}

// semRow is the part of a semaphore SemaphoreReleaseMany reads and writes.
type semRow struct {
	value, limit, blocked, multi int
	duration                     time.Duration
	expires                      time.Time
	interval                     time.Duration // the release interval (driver.Released)
	last                         time.Time
	promoted                     driver.Promotion
}

func (e executor) readSems(ctx context.Context, x *sqlexec.Executor, keys []string) (map[string]*semRow, error) {
	rows, err := x.DB().QueryContext(ctx, e.d.dl.own.readSems, jsonOf(keys))
	if err != nil {
		return nil, err
	}
	sems := make(map[string]*semRow, len(keys))
	for rows.Next() {
		var key string
		var durMS, expires, intervalUS int64
		var last sql.NullInt64
		s := &semRow{}
		if err := rows.Scan(&key, &s.value, &s.limit, &s.blocked, &s.multi, &durMS, &expires, &intervalUS, &last); err != nil {
			rows.Close()
			return nil, err
		}
		s.duration, s.expires = time.Duration(durMS)*time.Millisecond, sqlexec.FromMicros(expires)
		s.interval = time.Duration(intervalUS) * time.Microsecond
		if last.Valid {
			s.last = sqlexec.FromMicros(last.Int64)
		}
		sems[key] = s
	}
	return sems, sqlexec.CloseRows(rows)
}

// promoteFirst moves the first ns[i] blocked jobs of each keys[i]'s line
// (fewer if the line is shorter) to ready in three statements, whatever
// the number of keys: one pick, one copy to ready, one delete. Each
// key's promotion lists its jobs in line order. The caller holds the
// write lock, so the lines cannot change under it.
func (e executor) promoteFirst(ctx context.Context, x *sqlexec.Executor, keys []string, ns []int, now time.Time) ([]driver.Promotion, error) {
	out := make([]driver.Promotion, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	rows, err := x.DB().QueryContext(ctx, e.d.dl.own.pickBlockedOfKeys, jsonOf(keys), slices.Max(ns))
	if err != nil {
		return nil, err
	}
	var picked []int64
	for rows.Next() {
		var at, priority int
		var id int64
		var queue string
		if err := rows.Scan(&at, &id, &queue, &priority); err != nil {
			rows.Close()
			return nil, err
		}
		if at < 0 || at >= len(keys) {
			rows.Close()
			return nil, fmt.Errorf("pick of blocked jobs named key %d of %d", at, len(keys))
		}
		// Each key's rows come in line order: keep its first ns[at].
		if p := &out[at]; p.Jobs < ns[at] {
			p.Jobs++
			p.JobIDs = append(p.JobIDs, id)
			p.AddQueue(queue)
			picked = append(picked, id)
		}
	}
	if err := sqlexec.CloseRows(rows); err != nil || len(picked) == 0 {
		return out, err
	}
	list := jsonOf(picked)
	copied, err := sqlexec.Column[int64](ctx, x.DB(), e.d.dl.own.promoteReady, sqlexec.Micros(now), list)
	if err != nil {
		return nil, fmt.Errorf("copy blocked jobs to ready: %w", err)
	}
	res, err := x.DB().ExecContext(ctx, e.d.dl.q.DeleteBlocked, list)
	if err != nil {
		return nil, fmt.Errorf("delete blocked rows: %w", err)
	}
	if deleted, err := res.RowsAffected(); err != nil || deleted != int64(len(picked)) || len(copied) != len(picked) {
		return nil, fmt.Errorf("promote %d blocked jobs: %d copied, %d deleted (%v)", len(picked), len(copied), deleted, err)
	}
	return out, nil
}

// markDependents sets HasDependents on the ended claims whose jobs others
// wait for, read before the jobs are finished or deleted.
func (e executor) markDependents(ctx context.Context, x *sqlexec.Executor, matched []driver.Ended, ended []int64) error {
	ids, err := sqlexec.Collect(ctx, x.DB(), func(r *sql.Rows) (id int64, err error) {
		err = r.Scan(&id)
		return id, err
	}, e.d.dl.own.withDependents, jsonOf(ended))
	if err != nil || len(ids) == 0 {
		return err
	}
	for i := range matched {
		matched[i].HasDependents = slices.Contains(ids, matched[i].JobID)
	}
	return nil
}

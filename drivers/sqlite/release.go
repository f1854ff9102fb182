package sqlite

import (
	"context"
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
	_ driver.Tx            = txExecutor{}
	_ driver.BatchReleaser = executor{}
)

// CompleteClaims ends the claims set-wise: one DELETE ... RETURNING
// finds those whose fences match.
func (e executor) CompleteClaims(ctx context.Context, claims []*driver.Claim, keep bool, now time.Time) ([]driver.Fenced, error) {
	pairs := make([][2]int64, len(claims))
	for i, c := range claims {
		pairs[i] = [2]int64{c.ID, c.Fence}
	}
	arg := jsonOf(pairs)
	var matched []driver.Fenced
	err := e.Atomic(ctx, func(x *sqlexec.Executor) error {
		matched = matched[:0]
		rows, err := x.DB().QueryContext(ctx, e.d.dl.own.endClaims, arg)
		if err != nil {
			return err
		}
		ended := make([]int64, 0, len(claims))
		for rows.Next() {
			var f driver.Fenced
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

// ReleaseMany releases and promotes for every key of a batch in at most
// five statements, whatever the number of keys: it does set-wise what
// semaphore.SignalN does per key (release capped at the limit, promote
// min(free, blocked) jobs, renew the expiry of keys that promoted). The
// transaction's write lock makes reading, computing and writing back safe.
// A key whose line holds multi-key jobs (multi > 0) gets its slots back
// but promotes none: its line is the caller's (Promotion.LineLeft).
func (e executor) ReleaseMany(ctx context.Context, keys []string, counts []int, now time.Time) ([]driver.Promotion, error) {
	out := make([]driver.Promotion, len(keys))
	err := e.Atomic(ctx, func(x *sqlexec.Executor) error {
		sems, err := e.readSems(ctx, x, keys)
		if err != nil {
			return err
		}
		var waiting []string // keys with a free slot and a blocked job
		most := 0
		for i, k := range keys {
			s := sems[k]
			if s == nil {
				continue // deleted idle: nothing held it
			}
			s.value = min(s.value+counts[i], s.limit)
			if s.multi > 0 {
				continue // its line holds multi-key jobs: the caller's to promote
			}
			if s.take = min(max(s.value, 0), s.blocked); s.take > 0 {
				waiting = append(waiting, k)
				most = max(most, s.take)
			}
		}
		var picked []int64
		keyOf := map[int64]string{}
		if len(waiting) > 0 {
			rows, err := x.DB().QueryContext(ctx, e.d.dl.own.pickBlockedOfKeys, jsonOf(waiting), most)
			if err != nil {
				return err
			}
			for rows.Next() {
				var key string
				var id int64
				if err := rows.Scan(&key, &id); err != nil {
					rows.Close()
					return err
				}
				// Each key's rows come in line order: keep its first take.
				if s := sems[key]; s.moved < s.take {
					s.moved++
					picked = append(picked, id)
					keyOf[id] = key
				}
			}
			if err := sqlexec.CloseRows(rows); err != nil {
				return err
			}
		}
		queueOf := map[string][]string{} // key -> queues promoted into
		if len(picked) > 0 {
			list := jsonOf(picked)
			queues, err := e.promoteReady(ctx, x, list, now)
			if err != nil {
				return err
			}
			for id, q := range queues {
				if k := keyOf[id]; !slices.Contains(queueOf[k], q) {
					queueOf[k] = append(queueOf[k], q)
				}
			}
			if _, err := x.DB().ExecContext(ctx, e.d.dl.q.DeleteBlocked, list); err != nil {
				return err
			}
		}
		settle := make([][4]any, 0, len(sems))
		for i, k := range keys {
			s := sems[k]
			if s == nil {
				continue
			}
			s.value -= s.moved
			if s.moved < s.take {
				s.blocked = 0 // fewer rows than counted: nothing is left blocked
			} else {
				s.blocked -= s.moved
			}
			settle = append(settle, [4]any{k, s.value, s.blocked, s.moved})
			out[i] = driver.Promotion{Jobs: s.moved, Queues: queueOf[k], LineLeft: s.multi > 0}
		}
		if len(settle) == 0 {
			return nil
		}
		_, err = x.DB().ExecContext(ctx, e.d.dl.own.settleKeys, sqlexec.Micros(now), jsonOf(settle))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("release %d keys: %w", len(keys), err)
	}
	return out, nil
}

// semRow is the part of a semaphore ReleaseMany reads and writes.
type semRow struct{ value, limit, blocked, multi, take, moved int }

func (e executor) readSems(ctx context.Context, x *sqlexec.Executor, keys []string) (map[string]*semRow, error) {
	rows, err := x.DB().QueryContext(ctx, e.d.dl.own.readSems, jsonOf(keys))
	if err != nil {
		return nil, err
	}
	sems := make(map[string]*semRow, len(keys))
	for rows.Next() {
		var key string
		s := &semRow{}
		if err := rows.Scan(&key, &s.value, &s.limit, &s.blocked, &s.multi); err != nil {
			rows.Close()
			return nil, err
		}
		sems[key] = s
	}
	return sems, sqlexec.CloseRows(rows)
}

// promoteReady copies the blocked jobs of list (JSON ids) to ready and
// returns the queue of each, by job id.
func (e executor) promoteReady(ctx context.Context, x *sqlexec.Executor, list string, now time.Time) (map[int64]string, error) {
	rows, err := x.DB().QueryContext(ctx, e.d.dl.own.promoteReady, sqlexec.Micros(now), list)
	if err != nil {
		return nil, err
	}
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var q string
		if err := rows.Scan(&id, &q); err != nil {
			rows.Close()
			return nil, err
		}
		out[id] = q
	}
	return out, sqlexec.CloseRows(rows)
}

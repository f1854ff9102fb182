package postgres

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// The PostgreSQL side of the set-wise promotion of lines holding
// multi-key jobs: each method against its per-key counterpart, the
// try-lock's skipping, and the plans (the shared contract suite checks
// the behaviour on every driver).

// rolledBack runs fn in a transaction it rolls back, so the per-key
// methods and the set-wise ones see the same rows.
func (f *mkFixture) rolledBack(fn func(ex driver.Executor) error) {
	f.t.Helper()
	tx, err := f.d.Begin(f.ctx)
	f.must(err)
	defer func() { f.must(tx.Rollback(f.ctx)) }()
	f.must(fn(tx))
}

func (f *mkFixture) multiLines() (keys []string, ids []int64) {
	a, b, c := lim("g/a", 1), lim("g/b", 2), lim("h/c", 3)
	ids = f.insert(
		inLine(mkJob(driver.StateReady, 0, a, b), "g/a"),
		inLine(mkJob(driver.StateReady, 5, a), "g/a"),
		inLine(mkJob(driver.StateReady, 0, a, c), "g/a"),
		inLine(mkJob(driver.StateReady, 5, b, a, c), "g/b"),
		inLine(mkJob(driver.StateReady, 1, b), "g/b"),
		inLine(mkJob(driver.StateReady, 0, c), "h/c"),
	)
	// The second job of g/a's line goes to another queue, so a promotion
	// names two.
	_, err := f.d.pool.Exec(f.ctx, `UPDATE bq_blocked_executions SET queue = 'other' WHERE job_id = $1`, ids[2])
	f.must(err)
	return []string{"g/a", "g/b", "g/x", "h/c"}, ids
}

func TestMultiBatchLineHeadsMany(t *testing.T) {
	f := newMK(t)
	keys, _ := f.multiLines()
	for _, ns := range [][]int{{1, 1, 1, 1}, {2, 0, 5, 1}, {10, 10, 10, 10}, {0, 0, 0, 0}} {
		var got [][]driver.LineHead
		f.rolledBack(func(ex driver.Executor) (err error) {
			got, err = ex.(driver.MultiBatcher).LineListHeadsMany(f.ctx, keys, ns)
			return err
		})
		if len(got) != len(keys) {
			t.Fatalf("LineHeadsMany(%v) = %d lines, want %d", ns, len(got), len(keys))
		}
		for i, k := range keys {
			want, err := f.d.Exec().LineListHeads(f.ctx, k, ns[i])
			f.must(err)
			if len(want) == 0 && len(got[i]) == 0 {
				continue
			}
			if !reflect.DeepEqual(got[i], want) {
				t.Errorf("LineHeadsMany(ns %v) for %s = %+v, want LineHeads' %+v", ns, k, got[i], want)
			}
		}
	}
	if _, err := f.d.Exec().(driver.MultiBatcher).LineListHeadsMany(f.ctx, keys, []int{1}); err == nil {
		t.Errorf("LineHeadsMany with fewer ns than keys: no error")
	}
}

func TestMultiBatchPromoteFirst(t *testing.T) {
	f := newMK(t)
	keys, _ := f.multiLines()
	type outcome struct {
		proms  []driver.Promotion
		ready  [][3]any // job_id, queue, priority
		blocks [][2]any // job_id, key
	}
	rows := func(ex driver.Executor, o *outcome) error {
		pt := ex.(*txExecutor).tx
		r, err := pt.Query(f.ctx, `SELECT job_id, queue, priority FROM bq_ready_executions ORDER BY job_id`)
		if err != nil {
			return err
		}
		for r.Next() {
			var id int64
			var q string
			var p int
			if err := r.Scan(&id, &q, &p); err != nil {
				return err
			}
			o.ready = append(o.ready, [3]any{id, q, p})
		}
		if err := r.Err(); err != nil {
			return err
		}
		r, err = pt.Query(f.ctx, `SELECT job_id, concurrency_key FROM bq_blocked_executions ORDER BY job_id`)
		if err != nil {
			return err
		}
		for r.Next() {
			var id int64
			var k string
			if err := r.Scan(&id, &k); err != nil {
				return err
			}
			o.blocks = append(o.blocks, [2]any{id, k})
		}
		return r.Err()
	}
	for _, counts := range [][]int{{1, 1, 1, 1}, {2, 0, 3, 5}, {0, 0, 0, 0}, {3, 2, 0, 1}} {
		var want, got outcome
		f.rolledBack(func(ex driver.Executor) error {
			for i, k := range keys {
				p, err := ex.LinePromote(f.ctx, k, counts[i], mkT0)
				if err != nil {
					return err
				}
				want.proms = append(want.proms, p)
			}
			return rows(ex, &want)
		})
		f.rolledBack(func(ex driver.Executor) (err error) {
			if got.proms, err = ex.(driver.MultiBatcher).LinePromoteFirst(f.ctx, keys, counts, mkT0); err != nil {
				return err
			}
			return rows(ex, &got)
		})
		if !reflect.DeepEqual(got, want) {
			t.Errorf("PromoteFirst(counts %v) = %+v\nwant PromoteBlocked's %+v", counts, got, want)
		}
		// Both in promotion order: the heads of each line, as LineListHeads reads them.
		for i, k := range keys {
			heads, err := f.d.Exec().LineListHeads(f.ctx, k, counts[i])
			f.must(err)
			var ids []int64
			for _, h := range heads {
				ids = append(ids, h.JobID)
			}
			if !slices.Equal(got.proms[i].JobIDs, ids) {
				t.Errorf("PromoteFirst(counts %v) of %s moved %v, want the line's first %v", counts, k, got.proms[i].JobIDs, ids)
			}
		}
	}
	// The ready rows' created_at is now, as LinePromote writes it.
	f.tx(func(ex driver.Executor) error {
		_, err := ex.(driver.MultiBatcher).LinePromoteFirst(f.ctx, []string{"h/c"}, []int{1}, mkT0)
		return err
	})
	var at time.Time
	f.must(f.d.pool.QueryRow(f.ctx, `SELECT created_at FROM bq_ready_executions`).Scan(&at))
	if !at.Equal(mkT0) {
		t.Errorf("ready row created at %v, want %v", at, mkT0)
	}
}

func TestMultiBatchTryLockManySkips(t *testing.T) {
	f := newMK(t)
	for _, k := range []string{"g/a", "g/b", "g/c"} {
		f.semaphore(driver.Semaphore{Key: k, Value: 1, Limit: 2, Blocked: 3, Multi: 1, Duration: time.Minute, ExpiresAt: mkT0})
	}
	other, err := f.d.Begin(f.ctx)
	f.must(err)
	defer func() { f.must(other.Rollback(f.ctx)) }()
	if _, ok, err := other.SemaphoreLock(f.ctx, "g/b", "q"); err != nil || !ok {
		t.Fatalf("lock g/b in another transaction: %v, %v", ok, err)
	}
	f.rolledBack(func(ex driver.Executor) error {
		if _, ok, err := ex.SemaphoreLock(f.ctx, "g/c", "q"); err != nil || !ok {
			t.Fatalf("lock g/c: %v, %v", ok, err)
		}
		quick, cancel := context.WithTimeout(f.ctx, 2*time.Second)
		defer cancel()
		got, err := ex.(driver.MultiBatcher).SemaphoreTryLockMany(quick, []string{"g/a", "g/b", "g/c", "g/x"})
		if errors.Is(quick.Err(), context.DeadlineExceeded) {
			t.Fatalf("SemaphoreTryLockMany waited for the key another transaction holds")
		}
		if err != nil {
			return err
		}
		want := []driver.Semaphore{
			{Key: "g/a", Value: 1, Limit: 2, Blocked: 3, Multi: 1, Duration: time.Minute, ExpiresAt: mkT0},
			{Key: "g/c", Value: 1, Limit: 2, Blocked: 3, Multi: 1, Duration: time.Minute, ExpiresAt: mkT0},
		}
		for i := range got {
			got[i].ExpiresAt = got[i].ExpiresAt.UTC()
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("SemaphoreTryLockMany = %+v, want %+v (g/b held elsewhere, g/x missing)", got, want)
		}
		// What it locked is held: the other transaction's try-lock skips it.
		if ok, err := other.SemaphoreTryLock(f.ctx, "g/a"); err != nil || ok {
			t.Errorf("g/a try-locked elsewhere after SemaphoreTryLockMany: %v, %v; want held", ok, err)
		}
		return nil
	})
}

// Each statement walks the blocked_line index per key, never the whole
// line: checked on the plans over lines long enough to make a scan dear.
func TestMultiBatchPlansUseLineIndex(t *testing.T) {
	f := newMK(t)
	_, err := f.d.pool.Exec(f.ctx, `
INSERT INTO bq_jobs (id, kind, queue, args, priority, max_attempts, concurrency_key, concurrency_limit,
	concurrency_duration_ms, on_conflict, max_blocked, scheduled_at, created_at)
OVERRIDING SYSTEM VALUE
SELECT i, 'k', 'q', '{}', i % 7, 1, 'g/' || (i % 200), 1, 60000, 0, 0, now(), now() FROM generate_series(1, 20000) i`)
	f.must(err)
	_, err = f.d.pool.Exec(f.ctx, `
INSERT INTO bq_blocked_executions (job_id, queue, priority, concurrency_key, created_at)
SELECT id, queue, priority, concurrency_key, created_at FROM bq_jobs`)
	f.must(err)
	_, err = f.d.pool.Exec(f.ctx, `ANALYZE bq_jobs; ANALYZE bq_blocked_executions`)
	f.must(err)
	keys, ns := []string{"g/1", "g/2", "g/3"}, []int32{2, 2, 2}
	for name, c := range map[string]struct {
		sql  string
		args []any
	}{
		"lineHeadsMany": {f.d.q.lineHeadsMany, []any{keys, ns}},
		"promoteFirst":  {f.d.q.promoteFirst, []any{keys, ns, mkT0}},
	} {
		tx, err := f.d.pool.Begin(f.ctx)
		f.must(err)
		var plan string
		r, err := tx.Query(f.ctx, "EXPLAIN "+c.sql, c.args...)
		f.must(err)
		for r.Next() {
			var line string
			f.must(r.Scan(&line))
			plan += line + "\n"
		}
		f.must(r.Err())
		f.must(tx.Rollback(f.ctx))
		t.Logf("%s:\n%s", name, plan)
		if !strings.Contains(plan, "bq_blocked_line") || strings.Contains(plan, "Seq Scan on bq_blocked_executions") {
			t.Errorf("%s does not walk the blocked_line index:\n%s", name, plan)
		}
	}
}

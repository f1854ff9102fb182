package drivertest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// batcher is ex as a driver.MultiBatcher; the test is skipped for a
// driver whose executors are not one.
func (f *fixture) batcher(ex driver.Executor) driver.MultiBatcher {
	f.t.Helper()
	b, ok := ex.(driver.MultiBatcher)
	if !ok {
		f.t.Skipf("%s executors are not a driver.MultiBatcher", f.d.Dialect())
	}
	return b
}

// multiLines stores blocked jobs in the lines of g/a (priorities mixed,
// multi-key jobs among them, one moved there from its first key's line),
// g/b and g/d, none in g/c, and one ready job of g/a; the same calls on a
// fresh database give the same ids.
func (f *fixture) multiLines() []int64 {
	f.t.Helper()
	a, b, d := keyed("g/a", 1), keyed("g/b", 1), keyed("g/d", 1)
	return f.insert(T0,
		job("q1", a, blocked, prio(0)),
		job("q2", a, blocked, prio(5), also(2, "g/x")),
		job("q1", a, blocked, prio(0), also(1, "g/x", "g/y")),
		job("q1", a, blocked, prio(5)),
		job("q2", keyed("g/x", 1), also(1, "g/a"), blocked, inLine("g/a"), prio(3)),
		job("q1", b, blocked, prio(1), also(1, "g/y")),
		job("q2", b, blocked, prio(1)),
		job("q1", d, blocked),
		job("q1", a),
		job("q1", keyed("g/other", 1), blocked, prio(9)),
	)
}

// Set-wise promotion of the lines of many keys holding multi-key jobs
// (driver.MultiBatcher): each does in a fixed number of statements what
// the per-key methods do key by key.
var _ = add("multibatch",
	test{"LineHeadsManyIsLineHeadsKeyByKey", func(t *testing.T, f *fixture) {
		f.batcher(f.d.Exec())
		f.multiLines()
		keys := []string{"g/a", "g/b", "g/c", "g/d", "g/e"}
		for _, ns := range [][]int{{3, 10, 2, 0, 1}, {10, 1, 0, 1, 0}, {1, 2, 1, 1, 1}, {0, 0, 0, 0, 0}} {
			var got [][]driver.LineHead
			f.tx(func(ex driver.Executor) (err error) {
				got, err = f.batcher(ex).LineListHeadsMany(f.ctx, keys, ns)
				return err
			})
			if len(got) != len(keys) {
				t.Fatalf("LineHeadsMany(%v, %v) = %d lines, want %d", keys, ns, len(got), len(keys))
			}
			for i, k := range keys {
				var want []driver.LineHead
				if ns[i] > 0 {
					want = f.heads(k, ns[i])
				}
				if len(got[i]) == 0 && len(want) == 0 {
					continue
				}
				if !reflect.DeepEqual(got[i], want) {
					t.Errorf("LineHeadsMany(ns %v) of %s = %+v, want LineHeads' %+v", ns, k, got[i], want)
				}
			}
		}
		// g/a's line is long enough that every n reads a bounded head.
		var got [][]driver.LineHead
		f.tx(func(ex driver.Executor) (err error) {
			got, err = f.batcher(ex).LineListHeadsMany(f.ctx, []string{"g/a"}, []int{2})
			return err
		})
		if ids := headIDs(got[0]); len(ids) != 2 {
			t.Errorf("LineHeadsMany(g/a, 2) = %v, want 2 jobs", ids)
		}
	}},
	test{"SemaphoreTryLockManyTakesOwnAndFreeOmitsMissing", func(t *testing.T, f *fixture) {
		f.batcher(f.d.Exec())
		exp := T0.Add(time.Minute)
		f.multiSemaphore("g/a", 0, 1, 2, 1, exp)
		f.multiSemaphore("g/b", 1, 3, 4, 2, exp.Add(time.Second))
		f.semaphore("g/c", 2, 2, 0, exp)
		var got []driver.Semaphore
		f.tx(func(ex driver.Executor) error {
			if _, ok, err := ex.SemaphoreLock(f.ctx, "g/b", ""); !ok || err != nil {
				t.Fatalf("SemaphoreLock(g/b): %v, %v", ok, err)
			}
			var err error
			got, err = f.batcher(ex).SemaphoreTryLockMany(f.ctx, []string{"g/a", "g/b", "g/c", "g/m"})
			return err
		})
		var keys []string
		for _, s := range got {
			keys = append(keys, s.Key)
		}
		if !slices.Equal(keys, []string{"g/a", "g/b", "g/c"}) {
			t.Fatalf("SemaphoreTryLockMany(g/a, g/b (own), g/c, g/m (missing)) locked %v, want g/a g/b g/c", keys)
		}
		want := driver.Semaphore{Key: "g/b", Value: 1, Limit: 3, Blocked: 4, Multi: 2, Duration: time.Minute}
		b := got[1]
		f.sameTime("g/b's ExpiresAt", b.ExpiresAt, exp.Add(time.Second))
		b.ExpiresAt = time.Time{}
		if !reflect.DeepEqual(b, want) {
			t.Errorf("SemaphoreTryLockMany's g/b = %+v, want %+v", b, want)
		}
	}},
	test{"SemaphoreTryLockManySkipsHeldWithoutWaiting", func(t *testing.T, f *fixture) {
		f.needRowLocks()
		f.batcher(f.d.Exec())
		for _, k := range []string{"g/a", "g/b", "g/c", "g/d"} {
			f.semaphore(k, 1, 1, 0, T0.Add(time.Minute))
		}
		holder := f.begin()
		if _, ok, err := holder.SemaphoreLock(f.ctx, "g/b", ""); !ok || err != nil {
			t.Fatalf("SemaphoreLock(g/b): %v, %v", ok, err)
		}
		var keys []string
		err := driver.InTx(f.quick(), f.d, func(ex driver.Executor) error {
			if _, ok, err := ex.SemaphoreLock(f.ctx, "g/c", ""); !ok || err != nil {
				return errors.Join(err, errors.New("g/c not found"))
			}
			got, err := f.batcher(ex).SemaphoreTryLockMany(f.quick(), []string{"g/a", "g/b", "g/c", "g/d"})
			keys = keys[:0]
			for _, s := range got {
				keys = append(keys, s.Key)
			}
			return err
		})
		if err != nil {
			t.Fatalf("SemaphoreTryLockMany while another transaction holds g/b = %v; want g/b skipped at once", err)
		}
		if !slices.Equal(keys, []string{"g/a", "g/c", "g/d"}) {
			t.Errorf("SemaphoreTryLockMany while another transaction holds g/b locked %v, want g/a g/c (own) g/d", keys)
		}
		f.must(holder.Rollback(f.ctx))
	}},
	test{"PromoteFirstIsPromoteBlockedKeyByKey", func(t *testing.T, f *fixture) {
		f.batcher(f.d.Exec())
		keys := []string{"g/a", "g/b", "g/c", "g/d", "g/e"}
		for _, counts := range [][]int{{3, 10, 2, 0, 1}, {1, 1, 1, 1, 1}, {10, 0, 0, 10, 0}, {0, 0, 0, 0, 0}} {
			g, h := f.other(), f.other()
			ids := g.multiLines()
			if hids := h.multiLines(); !slices.Equal(ids, hids) {
				t.Fatalf("two fresh databases gave ids %v and %v", ids, hids)
			}
			now := T0.Add(time.Minute)
			var got []driver.Promotion
			g.tx(func(ex driver.Executor) (err error) {
				got, err = g.batcher(ex).LinePromoteFirst(g.ctx, keys, counts, now)
				return err
			})
			want := make([]driver.Promotion, len(keys))
			h.tx(func(ex driver.Executor) (err error) {
				for i, k := range keys {
					if counts[i] == 0 {
						continue
					}
					if want[i], err = ex.LinePromote(h.ctx, k, counts[i], now); err != nil {
						return err
					}
				}
				return nil
			})
			if len(got) != len(keys) {
				t.Fatalf("PromoteFirst(%v) = %d promotions, want %d", counts, len(got), len(keys))
			}
			for i, k := range keys {
				w, p := want[i], got[i]
				if p.Jobs != w.Jobs || !slices.Equal(p.Queues, w.Queues) || !slices.Equal(p.JobIDs, w.JobIDs) || p.LineLeft {
					t.Errorf("PromoteFirst(counts %v) of %s = %+v, want PromoteBlocked's %+v", counts, k, p, w)
				}
			}
			for _, id := range ids {
				if gs, hs := g.state(id), h.state(id); gs != hs {
					t.Errorf("counts %v: job %d is %q after PromoteFirst, %q after PromoteBlocked", counts, id, gs, hs)
				}
			}
			for _, id := range ids {
				if g.state(id) == driver.StateReady {
					g.sameTime("ready since", g.execution(id).ReadySince, h.execution(id).ReadySince)
				}
			}
			// The ready rows' queues and priorities: each queue claims them
			// in the same order.
			gp, hp := g.process("w", T0, time.Second, time.Minute), h.process("w", T0, time.Second, time.Minute)
			for _, q := range []string{"q1", "q2"} {
				gc, hc := claimIDs(g.claim(g.ex(), q, 20, gp, now)), claimIDs(h.claim(h.ex(), q, 20, hp, now))
				if !slices.Equal(gc, hc) {
					t.Errorf("counts %v: %s claims %v after PromoteFirst, %v after PromoteBlocked", counts, q, gc, hc)
				}
			}
		}
	}},
	// Many keys take several statements (chunks): every chunk's keys are
	// read, locked and promoted, each in its place.
	test{"ManyKeysAcrossChunks", func(t *testing.T, f *fixture) {
		f.batcher(f.d.Exec())
		keys := make([]string, 601)
		for i := range keys {
			keys[i] = fmt.Sprintf("g/%04d", i)
		}
		with := []int{0, 199, 200, 401, 600} // keys with a semaphore and a line of two
		var js []*driver.NewJob
		for _, i := range with {
			f.semaphore(keys[i], 1, 1, 2, T0.Add(time.Minute))
			js = append(js, job("q", keyed(keys[i], 1), blocked, prio(1)), job("q", keyed(keys[i], 1), blocked, prio(2)))
		}
		ids := f.insert(T0, js...)
		ns := make([]int, len(keys))
		for i := range ns {
			ns[i] = 1
		}
		var heads [][]driver.LineHead
		var locked []driver.Semaphore
		var moved []driver.Promotion
		f.tx(func(ex driver.Executor) (err error) {
			b := f.batcher(ex)
			if locked, err = b.SemaphoreTryLockMany(f.ctx, keys); err != nil {
				return err
			}
			if heads, err = b.LineListHeadsMany(f.ctx, keys, ns); err != nil {
				return err
			}
			moved, err = b.LinePromoteFirst(f.ctx, keys, ns, T0)
			return err
		})
		var lockedKeys, wantKeys []string
		for _, s := range locked {
			lockedKeys = append(lockedKeys, s.Key)
		}
		for _, i := range with {
			wantKeys = append(wantKeys, keys[i])
		}
		if !slices.Equal(lockedKeys, wantKeys) {
			t.Errorf("SemaphoreTryLockMany of %d keys locked %v, want %v", len(keys), lockedKeys, wantKeys)
		}
		for i, k := range keys {
			at := slices.Index(with, i)
			var want []int64
			if at >= 0 {
				want = []int64{ids[2*at+1]} // priority 2 first
			}
			if got := headIDs(heads[i]); !slices.Equal(got, want) && (len(got) > 0 || len(want) > 0) {
				t.Errorf("LineHeadsMany's head of %s = %v, want %v", k, got, want)
			}
			if !slices.Equal(moved[i].JobIDs, want) || moved[i].Jobs != len(want) {
				t.Errorf("PromoteFirst of %s = %+v, want %v moved", k, moved[i], want)
			}
		}
		for at := range with {
			f.wantState(driver.StateReady, ids[2*at+1])
			f.wantState(driver.StateBlocked, ids[2*at])
		}
	}},
)

package drivertest

import (
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Adaptive limits (AdaptStore): a key's lowered limit, read back by
// every semaphore lock (Semaphore.Adapt); a rate key's, the row of its
// line key, by every read of its rate row (Rate.Adapt).
var _ = add("adapt",
	test{"KeyAdaptSetGetListDelete", func(t *testing.T, f *fixture) {
		if _, ok, err := f.ex().KeyAdaptGet(f.ctx, "g/k"); ok || err != nil {
			t.Fatalf("KeyAdaptGet of a key never adapted = %v, %v; want none", ok, err)
		}
		a := driver.KeyAdapt{Key: "g/k", Limit: 5, Min: 2, Successes: 3, AdaptedAt: T0}
		f.must(f.ex().KeyAdaptSet(f.ctx, a))
		f.must(f.ex().KeyAdaptSet(f.ctx, driver.KeyAdapt{Key: "g/a", Limit: 1, Min: 1, AdaptedAt: T0}))
		got, ok, err := f.ex().KeyAdaptGet(f.ctx, "g/k")
		f.must(err)
		if !ok || got.Key != a.Key || got.Limit != 5 || got.Min != 2 || got.Successes != 3 {
			t.Errorf("KeyAdaptGet = %+v (%v), want %+v", got, ok, a)
		}
		f.sameTime("AdaptedAt", got.AdaptedAt, T0)
		// Set replaces.
		a.Limit, a.Successes, a.AdaptedAt = 4, 0, T0.Add(time.Minute)
		f.must(f.ex().KeyAdaptSet(f.ctx, a))
		list, err := f.ex().KeyAdaptList(f.ctx, 10)
		f.must(err)
		if len(list) != 2 || list[0].Key != "g/a" || list[1].Key != "g/k" || list[1].Limit != 4 || list[1].Successes != 0 {
			t.Fatalf("KeyAdaptList = %+v, want g/a then g/k at 4 (replaced)", list)
		}
		f.sameTime("replaced AdaptedAt", list[1].AdaptedAt, T0.Add(time.Minute))
		if one, err := f.ex().KeyAdaptList(f.ctx, 1); err != nil || len(one) != 1 {
			t.Errorf("KeyAdaptList(1) = %+v, %v; want one row", one, err)
		}
		ok, err = f.ex().KeyAdaptDelete(f.ctx, "g/k")
		f.must(err)
		again, err := f.ex().KeyAdaptDelete(f.ctx, "g/k")
		f.must(err)
		if _, left, _ := f.ex().KeyAdaptGet(f.ctx, "g/k"); !ok || again || left {
			t.Errorf("KeyAdaptDelete = %v then %v, row left %v; want true, false, none", ok, again, left)
		}
	}},
	test{"SemaphoreLockReadsTheAdaptiveLimit", func(t *testing.T, f *fixture) {
		f.semaphore("g/k", 3, 6, 0, T0.Add(time.Hour))
		read := func() (one, many int) {
			f.tx(func(ex driver.Executor) error {
				s, _, err := ex.SemaphoreLock(f.ctx, "g/k", "")
				one = s.Adapt
				return err
			})
			if _, ok := f.ex().(driver.BatchLocker); ok {
				f.tx(func(ex driver.Executor) error {
					got, err := ex.(driver.BatchLocker).SemaphoreLockMany(f.ctx,
						[]driver.Limit{{Key: "g/a", Duration: time.Minute}, {Key: "g/k", To: 6, Duration: time.Minute}}, []string{"", ""}, T0)
					if err == nil && len(got) == 2 {
						many = got[1].Adapt
					}
					return err
				})
			} else {
				many = one
			}
			return one, many
		}
		if one, many := read(); one != 0 || many != 0 {
			t.Errorf("Adapt of a key never throttled = %d, %d (lock, lock many); want 0", one, many)
		}
		f.must(f.ex().KeyAdaptSet(f.ctx, driver.KeyAdapt{Key: "g/k", Limit: 2, Min: 1, AdaptedAt: T0}))
		if one, many := read(); one != 2 || many != 2 {
			t.Errorf("Adapt of a key lowered to 2 = %d, %d (lock, lock many); want 2", one, many)
		}
		if s := f.sem("g/k"); s.Limit != 6 || s.Value != 3 {
			t.Errorf("g/k = %+v after reads; want its row unchanged (6, 3 free): the lock reads, the engine applies", s)
		}
	}},
	test{"RateLockReadsTheAdaptiveLimit", func(t *testing.T, f *fixture) {
		f.rateEnsure("g/k", 6, time.Second)
		f.rateEnsure("g/other", 6, time.Second)
		// A concurrency key of the same name is another limit.
		f.must(f.ex().KeyAdaptSet(f.ctx, driver.KeyAdapt{Key: "g/k", Limit: 1, Min: 1, AdaptedAt: T0}))
		read := func() (lock, try, get, list int) {
			f.tx(func(ex driver.Executor) error {
				r, _, err := ex.RateLock(f.ctx, "g/k")
				lock = r.Adapt
				return err
			})
			f.tx(func(ex driver.Executor) error {
				r, _, err := ex.RateTryLock(f.ctx, "g/k")
				try = r.Adapt
				return err
			})
			r, _, _, err := f.ex().RateGet(f.ctx, "g/k", T0)
			f.must(err)
			rows, err := f.ex().RateList(f.ctx, "g/j", 1)
			f.must(err)
			if len(rows) != 1 || rows[0].Key != "g/k" {
				t.Fatalf("RateList(g/j, 1) = %+v, want g/k", rows)
			}
			return lock, try, r.Adapt, rows[0].Adapt
		}
		if a, b, c, d := read(); a != 0 || b != 0 || c != 0 || d != 0 {
			t.Errorf("Adapt of a rate never throttled = %d, %d, %d, %d (lock, try lock, get, list); want 0", a, b, c, d)
		}
		f.must(f.ex().KeyAdaptSet(f.ctx, driver.KeyAdapt{Key: driver.RateLine("g/k"), Limit: 3, Min: 2, AdaptedAt: T0}))
		if a, b, c, d := read(); a != 3 || b != 3 || c != 3 || d != 3 {
			t.Errorf("Adapt of a rate lowered to 3 = %d, %d, %d, %d (lock, try lock, get, list); want 3", a, b, c, d)
		}
		if r, _ := f.readRate("g/other", T0); r.Adapt != 0 {
			t.Errorf("Adapt of another rate key = %d, want 0", r.Adapt)
		}
		if r, _ := f.readRate("g/k", T0); r.Limit != 6 {
			t.Errorf("g/k = %+v after reads; want its row unchanged (6): the lock reads, the engine applies", r)
		}
	}},
)

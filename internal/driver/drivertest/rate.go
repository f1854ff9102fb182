package drivertest

import (
	"slices"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Rates: each key's row, the overrides and the reads the engine's rate
// limiting builds on (the ring of start slots: rateslots.go).
var _ = add("rate",
	test{"EnsureCreatesOnce", func(t *testing.T, f *fixture) {
		if _, _, ok, err := f.ex().RateGet(f.ctx, "g/k", T0); err != nil || ok {
			t.Fatalf("ReadRate of a missing key = %v, %v; want not found", ok, err)
		}
		f.tx(func(ex driver.Executor) error {
			_, ok, err := ex.RateLock(f.ctx, "g/k")
			if err == nil && ok {
				t.Errorf("RateLock of a missing key found it")
			}
			return err
		})
		f.rateEnsure("g/k", 3, time.Minute)
		f.rateEnsure("g/k", 5, time.Hour) // exists: changes nothing
		r, recent := f.readRate("g/k", T0.Add(-time.Hour))
		if r.Key != "g/k" || r.Limit != 3 || r.Period != time.Minute || r.Waiting != 0 || !r.NextAt.IsZero() ||
			r.Override != (driver.RateSpec{}) || recent != 0 {
			t.Errorf("ReadRate = %+v, recent %d; want limit 3 per minute, nothing waiting, no override, no start", r, recent)
		}
		if got := sortedInts(f.freeSlots("g/k", T0, 10)); !slices.Equal(got, []int{0, 1, 2}) {
			t.Errorf("FreeSlots = %v, want the ring's 3 slots, 0..2", got)
		}
		f.sameTime("OldestSlot of a new ring", f.oldest("g/k"), epoch)
		// A ring of more slots than one INSERT takes.
		f.rateEnsure("g/big", 300, time.Second)
		f.must(f.ex().RateResizeRing(f.ctx, "g/big", 300, 301))
		if got := sortedInts(f.freeSlots("g/big", T0, 1000)); len(got) != 301 || got[0] != 0 || got[300] != 300 {
			t.Errorf("a ring of 300 grown by one has %d slots (%v...), want 0..300", len(got), got[:min(len(got), 3)])
		}
		// Concurrent creates of another key: none fails, one ring.
		f.must(together(4, func(int) error {
			return driver.Atomic(f.ctx, f.d, func(ex driver.Executor) error {
				return ex.RateEnsure(f.ctx, driver.RateSpec{Key: "g/race", Limit: 2, Period: time.Second}, T0)
			})
		}))
		if got := f.freeSlots("g/race", T0, 10); len(got) != 2 {
			t.Errorf("FreeSlots after concurrent creates = %v, want 2 slots", got)
		}
	}},
	test{"SaveLockAndOverride", func(t *testing.T, f *fixture) {
		f.rateEnsure("g/k", 3, time.Minute)
		f.must(f.ex().RateSave(f.ctx, driver.Rate{Key: "g/k", Limit: 4, Period: 2 * time.Minute, Waiting: 2,
			NextAt: T0.Add(time.Second)}, T0))
		f.must(f.ex().KeyRateSet(f.ctx, driver.RateSpec{Key: "g/k", Limit: 7, Period: 30 * time.Second}, T0))
		f.must(f.ex().KeyRateSet(f.ctx, driver.RateSpec{Key: "g/k", Limit: 8, Period: 40 * time.Second}, T0))
		want := driver.Rate{Key: "g/k", Limit: 4, Period: 2 * time.Minute, Waiting: 2,
			Override: driver.RateSpec{Key: "g/k", Limit: 8, Period: 40 * time.Second}}
		check := func(what string, r driver.Rate, ok bool, err error) {
			t.Helper()
			f.must(err)
			if !ok {
				t.Fatalf("%s: g/k not found", what)
			}
			f.sameTime(what+" NextAt", r.NextAt, T0.Add(time.Second))
			r.NextAt = time.Time{}
			if r != want {
				t.Errorf("%s = %+v, want %+v", what, r, want)
			}
		}
		f.tx(func(ex driver.Executor) error {
			r, ok, err := ex.RateLock(f.ctx, "g/k")
			check("RateLock", r, ok, err)
			return nil
		})
		f.tx(func(ex driver.Executor) error {
			r, ok, err := ex.RateTryLock(f.ctx, "g/k")
			check("RateTryLock", r, ok, err)
			return nil
		})
		r, _, ok, err := f.ex().RateGet(f.ctx, "g/k", T0)
		check("ReadRate", r, ok, err)
		if had, err := f.ex().KeyRateDelete(f.ctx, "g/k"); err != nil || !had {
			t.Errorf("DeleteKeyRate = %v, %v; want true", had, err)
		}
		if had, err := f.ex().KeyRateDelete(f.ctx, "g/k"); err != nil || had {
			t.Errorf("second DeleteKeyRate = %v, %v; want false", had, err)
		}
		f.must(f.ex().RateSave(f.ctx, driver.Rate{Key: "g/k", Limit: 4, Period: 2 * time.Minute}, T0))
		if r, _ := f.readRate("g/k", T0); r.Override != (driver.RateSpec{}) || !r.NextAt.IsZero() || r.Waiting != 0 {
			t.Errorf("after DeleteKeyRate and a save with no wait: %+v; want no override, zero NextAt", r)
		}
	}},
	test{"TryLockSkipsAHeldRow", func(t *testing.T, f *fixture) {
		f.needRowLocks()
		f.rateEnsure("g/k", 1, time.Minute)
		tx := f.begin()
		if _, ok, err := tx.RateLock(f.ctx, "g/k"); err != nil || !ok {
			t.Fatalf("RateLock = %v, %v", ok, err)
		}
		f.tx(func(ex driver.Executor) error {
			_, ok, err := ex.RateTryLock(f.quick(), "g/k")
			if err == nil && ok {
				t.Errorf("RateTryLock of a row another transaction holds returned it")
			}
			return err
		})
		f.must(tx.Rollback(f.ctx))
	}},
	test{"DueRatesAndNextRateAt", func(t *testing.T, f *fixture) {
		if _, ok, err := f.ex().RateNextAt(f.ctx); err != nil || ok {
			t.Errorf("NextRateAt with no rate = %v, %v; want none", ok, err)
		}
		for _, k := range []string{"g/a", "g/b", "g/c"} {
			f.rateEnsure(k, 1, time.Minute)
		}
		f.must(f.ex().RateSave(f.ctx, driver.Rate{Key: "g/a", Limit: 1, Period: time.Minute, Waiting: 1, NextAt: T0.Add(2 * time.Second)}, T0))
		f.must(f.ex().RateSave(f.ctx, driver.Rate{Key: "g/b", Limit: 1, Period: time.Minute, Waiting: 2, NextAt: T0.Add(time.Second)}, T0))
		at, ok, err := f.ex().RateNextAt(f.ctx)
		if f.must(err); !ok {
			t.Fatalf("NextRateAt found none")
		}
		f.sameTime("NextRateAt", at, T0.Add(time.Second))
		// later: the NextAt after now the same read gives (zero: none).
		dueLater := func(now time.Time, max int, later time.Time, want ...string) {
			t.Helper()
			got, err := f.ex().RateListDue(f.ctx, now, max)
			f.must(err)
			if !slices.Equal(got.Keys, want) && !(len(got.Keys) == 0 && len(want) == 0) {
				t.Errorf("DueRates(T0%+v, %d) = %q, want %q", now.Sub(T0), max, got.Keys, want)
			}
			if got.LaterOK != !later.IsZero() {
				t.Errorf("DueRates(T0%+v, %d) later %v (%v), want %v", now.Sub(T0), max, got.Later, got.LaterOK, later)
			} else if got.LaterOK {
				f.sameTime("DueRates' later", got.Later, later)
			}
		}
		due := func(now time.Time, max int, want ...string) { t.Helper(); dueLater(now, max, time.Time{}, want...) }
		dueLater(T0, 10, T0.Add(time.Second))
		dueLater(T0.Add(time.Second), 10, T0.Add(2*time.Second), "g/b")
		due(T0.Add(time.Hour), 10, "g/b", "g/a")
		due(T0.Add(time.Hour), 1, "g/b")
		f.must(f.ex().RateSave(f.ctx, driver.Rate{Key: "g/b", Limit: 1, Period: time.Minute}, T0))
		f.must(f.ex().RateSave(f.ctx, driver.Rate{Key: "g/a", Limit: 1, Period: time.Minute}, T0))
		if _, ok, err := f.ex().RateNextAt(f.ctx); err != nil || ok {
			t.Errorf("NextRateAt with nothing waiting = %v, %v; want none", ok, err)
		}
		due(T0.Add(time.Hour), 10)
	}},
	test{"DeleteIdleRates", func(t *testing.T, f *fixture) {
		for _, k := range []string{"g/idle1", "g/idle2", "g/recent", "g/reserved", "g/waiting"} {
			f.rateEnsure(k, 2, time.Minute)
		}
		f.must(f.ex().RateSlotSetMany(f.ctx, driver.RateSlotsParams{Key: "g/idle2", Slots: []int{0}, JobIDs: []int64{0}, At: T0.Add(-time.Hour)}))
		f.must(f.ex().RateSlotSetMany(f.ctx, driver.RateSlotsParams{Key: "g/recent", Slots: []int{0}, JobIDs: []int64{0}, At: T0}))
		f.must(f.ex().RateSlotSetMany(f.ctx, driver.RateSlotsParams{Key: "g/reserved", Slots: []int{1}, JobIDs: []int64{5}, At: driver.Reserved}))
		f.must(f.ex().RateSave(f.ctx, driver.Rate{Key: "g/waiting", Limit: 2, Period: time.Minute, Waiting: 1,
			NextAt: T0}, T0))
		if n, err := f.ex().RateDeleteIdle(f.ctx, T0.Add(30*time.Second), 1); err != nil || n != 1 {
			t.Errorf("DeleteIdleRates(max 1) = %d, %v; want 1", n, err)
		}
		if n, err := f.ex().RateDeleteIdle(f.ctx, T0.Add(30*time.Second), 10); err != nil || n != 1 {
			t.Errorf("second DeleteIdleRates = %d, %v; want the other idle key", n, err)
		}
		for _, k := range []string{"g/idle1", "g/idle2"} {
			if _, _, ok, err := f.ex().RateGet(f.ctx, k, T0); err != nil || ok {
				t.Errorf("%s survived (%v, %v)", k, ok, err)
			}
			if got := f.freeSlots(k, Far, 10); len(got) != 0 {
				t.Errorf("%s's ring survived: %v", k, got)
			}
		}
		if n, err := f.ex().RateDeleteIdle(f.ctx, T0.Add(30*time.Second), 10); err != nil || n != 0 {
			t.Errorf("DeleteIdleRates within the recent start's period = %d, %v; want 0", n, err)
		}
		if n, err := f.ex().RateDeleteIdle(f.ctx, T0.Add(time.Minute), 10); err != nil || n != 1 {
			t.Errorf("DeleteIdleRates a period after the start = %d, %v; want g/recent", n, err)
		}
		for _, k := range []string{"g/reserved", "g/waiting"} {
			if _, _, ok, err := f.ex().RateGet(f.ctx, k, T0); err != nil || !ok {
				t.Errorf("%s was deleted (%v, %v)", k, ok, err)
			}
			if got := f.freeSlots(k, Far, 10); len(got) == 0 {
				t.Errorf("%s's ring was deleted", k)
			}
		}
	}},
	test{"LatestJobRate", func(t *testing.T, f *fixture) {
		rated := func(limit int, period time.Duration) func(*driver.NewJob) {
			return func(j *driver.NewJob) { j.Rate = driver.RateSpec{Key: "g/k", Limit: limit, Period: period} }
		}
		if _, ok, err := f.ex().JobRateGetLatest(f.ctx, "g/k"); err != nil || ok {
			t.Errorf("LatestJobRate with no job = %v, %v; want none", ok, err)
		}
		ids := f.insert(T0, job("q", rated(5, time.Minute)), job("q", rated(7, 2*time.Minute)), job("q"))
		latest := func(want driver.RateSpec) {
			t.Helper()
			got := find(f.ex().JobRateGetLatest(f.ctx, "g/k")).of(f, "g/k's newest job")
			if got != want {
				t.Errorf("LatestJobRate = %+v, want %+v", got, want)
			}
		}
		latest(driver.RateSpec{Key: "g/k", Limit: 7, Period: 2 * time.Minute})
		f.tx(func(ex driver.Executor) error { return ex.JobFinish(f.ctx, ids[1], T0, true) })
		latest(driver.RateSpec{Key: "g/k", Limit: 5, Period: time.Minute})
		f.tx(func(ex driver.Executor) error { return ex.JobFinish(f.ctx, ids[0], T0, true) })
		if _, ok, err := f.ex().JobRateGetLatest(f.ctx, "g/k"); err != nil || ok {
			t.Errorf("LatestJobRate with every job finished = %v, %v; want none", ok, err)
		}
		// A job with no rate of its own has its queue policy's.
		f.insert(T0, job("q", rated(0, 0)))
		latest(driver.RateSpec{Key: "g/k"})
		_, err := f.ex().PolicyInsert(f.ctx, driver.Policy{Queue: "q", Namespace: "ns", MaxStartsPerKey: 4, StartsPeriod: 3 * time.Second,
			UpdatedAt: T0})
		f.must(err)
		latest(driver.RateSpec{Key: "g/k", Limit: 4, Period: 3 * time.Second})
	}},
	test{"ListRates", func(t *testing.T, f *fixture) {
		for _, k := range []string{"b/1", "a/2", "a/1"} {
			f.rateEnsure(k, 1, time.Second)
		}
		f.must(f.ex().KeyRateSet(f.ctx, driver.RateSpec{Key: "a/2", Limit: 3, Period: time.Minute}, T0))
		keys := func(rs []driver.Rate) []string {
			out := make([]string, len(rs))
			for i, r := range rs {
				out[i] = r.Key
			}
			return out
		}
		first, err := f.ex().RateList(f.ctx, "", 2)
		f.must(err)
		if got := keys(first); !slices.Equal(got, []string{"a/1", "a/2"}) {
			t.Fatalf("ListRates(\"\", 2) = %q, want a/1, a/2", got)
		}
		if first[0].Limit != 1 || first[0].Period != time.Second || first[0].Override != (driver.RateSpec{}) ||
			first[1].Override != (driver.RateSpec{Key: "a/2", Limit: 3, Period: time.Minute}) {
			t.Errorf("ListRates rows = %+v", first)
		}
		rest, err := f.ex().RateList(f.ctx, "a/2", 10)
		f.must(err)
		if got := keys(rest); !slices.Equal(got, []string{"b/1"}) {
			t.Errorf("ListRates(a/2, 10) = %q, want b/1", got)
		}
	}},
	test{"StrayLinesAndIdleRowsWithALine", func(t *testing.T, f *fixture) {
		// Rows counting no job waiting, rings long idle: one has a job in
		// its line (a drifted count), the other none.
		f.rateEnsure("r/stray", 1, time.Second)
		f.rateEnsure("r/idle", 1, time.Second)
		f.insert(T0, job("q", func(j *driver.NewJob) {
			j.State, j.Line = driver.StateBlocked, driver.RateLine("r/stray")
			j.Rate = driver.RateSpec{Key: "r/stray", Limit: 1, Period: time.Second}
		}))
		keys, err := f.ex().RateListStrayLines(f.ctx, 10)
		f.must(err)
		if !slices.Equal(keys, []string{"r/stray"}) {
			t.Errorf("StrayLines = %v, want [r/stray]", keys)
		}
		n, err := f.ex().RateDeleteIdle(f.ctx, T0.Add(time.Hour), 10)
		f.must(err)
		if _, _, ok, _ := f.ex().RateGet(f.ctx, "r/stray", T0); n != 1 || !ok {
			t.Errorf("DeleteIdleRates deleted %d rows (want 1, the idle one); the row with a line is kept: %v", n, ok)
		}
	}},
	test{"BlockedKeyAndHolders", func(t *testing.T, f *fixture) {
		line := func(j *driver.NewJob) {
			j.State, j.Line = driver.StateBlocked, driver.RateLine("r/x")
			j.Rate = driver.RateSpec{Key: "r/x", Limit: 1, Period: time.Minute}
		}
		k := keyed("g/k", 3)
		ids := f.insert(T0, job("q", k, line), job("q", k), job("q", k, blocked), job("q", line))
		for i, want := range []string{driver.RateLine("r/x"), "", "g/k", driver.RateLine("r/x")} {
			key, ok, err := f.ex().LineGetKey(f.ctx, ids[i])
			f.must(err)
			if key != want || ok != (want != "") {
				t.Errorf("BlockedKey(job %d) = %q, %v; want %q", i, key, ok, want)
			}
		}
		hc, err := f.ex().HolderCount(f.ctx, "g/k")
		holders, blockedN := hc.Holders, hc.Blocked
		f.must(err)
		if holders != 2 || blockedN != 1 {
			t.Errorf("CountHolders = %d holders, %d blocked; want 2 (ready + the one in a rate line), 1", holders, blockedN)
		}
	}},
)

// Far is later than any start a test writes, before Reserved.
var Far = T0.Add(1000 * time.Hour)

func (f *fixture) rateEnsure(key string, limit int, period time.Duration) {
	f.t.Helper()
	f.tx(func(ex driver.Executor) error {
		return ex.RateEnsure(f.ctx, driver.RateSpec{Key: key, Limit: limit, Period: period}, T0)
	})
}

// readRate reads key's row, which must exist, and its starts after since.
func (f *fixture) readRate(key string, since time.Time) (driver.Rate, int) {
	f.t.Helper()
	r, recent, ok, err := f.ex().RateGet(f.ctx, key, since)
	f.must(err)
	if !ok {
		f.t.Fatalf("rate %s does not exist", key)
	}
	return r, recent
}

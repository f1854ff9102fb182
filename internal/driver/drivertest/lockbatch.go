package drivertest

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// needBatchLock skips a test on a driver whose transactions lock keys
// one by one.
func (f *fixture) needBatchLock() {
	f.t.Helper()
	probe, err := f.d.Begin(f.ctx)
	f.must(err)
	_, ok := probe.(driver.BatchLocker)
	f.must(probe.Rollback(f.ctx))
	if !ok {
		f.t.Skipf("%s locks keys one by one: its transactions are no driver.BatchLocker", f.d.Dialect())
	}
}

// Set-wise admission across many keys: creating the missing semaphores,
// locking them all in key order, and saving them in one statement.
var _ = add("lockbatch",
	test{"SemaphoreLockManyCreatesLocksAndReads", func(t *testing.T, f *fixture) {
		f.needBatchLock()
		// g/a exists with an override; g/b is new, of queue q's policy; g/c
		// is new with To 0 (limit 1).
		f.semaphore("g/a", 1, 3, 2, T0.Add(time.Hour))
		f.must(f.ex().KeyLimitSet(f.ctx, "g/a", 7, T0))
		_, err := f.ex().PolicyInsert(f.ctx, driver.Policy{Queue: "q", Namespace: "ns", MaxActivePerKey: 4, MaxBlocked: 5,
			MaxWait: 250 * time.Millisecond, AdaptiveMin: 3, UpdatedAt: T0})
		f.must(err)
		limits := []driver.Limit{
			{Key: "g/a", To: 9, Duration: time.Second},
			{Key: "g/b", To: 2, Duration: 2 * time.Minute},
			{Key: "g/c", Duration: time.Minute},
		}
		f.tx(func(ex driver.Executor) error {
			got, err := ex.(driver.BatchLocker).SemaphoreLockMany(f.ctx, limits, []string{"", "q", "other"}, T0)
			if err != nil {
				return err
			}
			if len(got) != len(limits) {
				return fmt.Errorf("SemaphoreLockMany returned %d semaphores for %d keys", len(got), len(limits))
			}
			if a := got[0]; a.Key != "g/a" || a.Value != 1 || a.Limit != 3 || a.Blocked != 2 || a.Duration != time.Minute ||
				!a.ExpiresAt.Equal(T0.Add(time.Hour)) || a.Override != 7 || a.Policy != (driver.Policy{}) {
				t.Errorf("existing g/a = %+v; want the row as saved, override 7, no policy", a)
			}
			if b := got[1]; b.Key != "g/b" || b.Value != 2 || b.Limit != 2 || b.Blocked != 0 || b.Duration != 2*time.Minute ||
				b.Override != 0 || b.Policy.Queue != "q" || b.Policy.MaxActivePerKey != 4 || b.Policy.MaxBlocked != 5 ||
				b.Policy.MaxWait != 250*time.Millisecond || b.Policy.AdaptiveMin != 3 {
				t.Errorf("new g/b = %+v; want 2 of 2 free, Duration 2m, q's policy (MaxWait 250ms, AdaptiveMin 3 too)", b)
			} else {
				f.sameTime("g/b ExpiresAt", b.ExpiresAt, T0.Add(2*time.Minute))
			}
			if c := got[2]; c.Key != "g/c" || c.Value != 1 || c.Limit != 1 || c.Policy != (driver.Policy{}) {
				t.Errorf("new g/c of To 0 = %+v; want limit max(To, 1) = 1, no policy", c)
			}
			got[0].Value, got[0].Blocked = 0, 3
			got[1].Value, got[1].ExpiresAt = 1, T0.Add(time.Hour)
			got[2].Limit, got[2].Value, got[2].Duration = 4, 4, 5*time.Minute
			return ex.(driver.BatchLocker).SemaphoreSaveMany(f.ctx, got)
		})
		if a := f.sem("g/a"); a.Value != 0 || a.Blocked != 3 || a.Limit != 3 {
			t.Errorf("g/a after SemaphoreSaveMany = %+v, want 0 of 3 free, 3 blocked", a)
		}
		if b := f.sem("g/b"); b.Value != 1 || !b.ExpiresAt.Equal(T0.Add(time.Hour)) {
			t.Errorf("g/b after SemaphoreSaveMany = %+v, want 1 free, expiring in an hour", b)
		}
		if c := f.sem("g/c"); c.Value != 4 || c.Limit != 4 || c.Duration != 5*time.Minute {
			t.Errorf("g/c after SemaphoreSaveMany = %+v, want 4 of 4 free, Duration 5m", c)
		}
	}},
	test{"SemaphoreLockManyLocksInKeyOrder", func(t *testing.T, f *fixture) {
		f.needRowLocks()
		f.needBatchLock()
		const n = 20
		limits, queues := make([]driver.Limit, n), make([]string, n)
		for i := range limits {
			limits[i] = driver.Limit{Key: fmt.Sprintf("g/k%02d", i), To: 1, Duration: time.Minute}
			if i%2 == 0 { // every other key exists already
				f.semaphore(limits[i].Key, 1, 1, 0, T0.Add(time.Hour))
			}
		}
		const held = n / 2
		f.semaphore(limits[held].Key, 1, 1, 0, T0.Add(time.Hour))
		holder := f.begin()
		if _, ok, err := holder.SemaphoreLock(f.ctx, limits[held].Key, ""); !ok || err != nil {
			t.Fatalf("SemaphoreLock: %v, %v", ok, err)
		}
		// The save would wait on the held key too: locked tells the wait
		// in SemaphoreLockMany itself from the save's.
		var locked atomic.Bool
		waiting, wait := waits(func() error {
			return driver.InTx(f.ctx, f.d, func(ex driver.Executor) error {
				sems, err := ex.(driver.BatchLocker).SemaphoreLockMany(f.ctx, limits, queues, T0)
				if err != nil {
					return err
				}
				locked.Store(true)
				for i := range sems {
					sems[i].Value--
				}
				return ex.(driver.BatchLocker).SemaphoreSaveMany(f.ctx, sems)
			})
		})
		if !waiting || locked.Load() {
			t.Fatalf("SemaphoreLockMany returned while another transaction held %s: it must lock the keys, not only read them", limits[held].Key)
		}
		// Waiting on the held key, it holds every existing key before it
		// and none after.
		other := f.begin()
		for i, l := range limits {
			if i == held || i%2 != 0 {
				continue
			}
			free, err := other.SemaphoreTryLock(f.quick(), l.Key)
			f.must(err)
			if free != (i > held) {
				t.Errorf("while SemaphoreLockMany waits on %s, %s is free: %v; want keys locked in key order", limits[held].Key, l.Key, free)
			}
		}
		f.must(other.Rollback(f.ctx))
		f.must(holder.Commit(f.ctx))
		f.must(wait())
		for _, l := range limits {
			if s := f.sem(l.Key); s.Value != 0 || s.Limit != 1 {
				t.Errorf("%s = %d of %d free after the batch took its slot, want 0 of 1", l.Key, s.Value, s.Limit)
			}
		}
	}},
	test{"SemaphoreLockManyNeverFailsOnAConcurrentCreate", func(t *testing.T, f *fixture) {
		f.needRowLocks()
		f.needBatchLock()
		// Overlapping batches of new keys in open transactions, each
		// taking a slot of every key: a duplicate-key error or a deadlock
		// fails the test. Three: a PostgreSQL pool of a 2-core machine has
		// four connections.
		const n, txs = 30, 3
		f.must(together(txs, func(w int) error {
			return driver.InTx(f.ctx, f.d, func(ex driver.Executor) error {
				var limits []driver.Limit
				for i := w; i < n; i++ { // each starts further in
					limits = append(limits, driver.Limit{Key: fmt.Sprintf("g/r%02d", i), To: txs, Duration: time.Minute})
				}
				sems, err := ex.(driver.BatchLocker).SemaphoreLockMany(f.ctx, limits, make([]string, len(limits)), T0)
				if err != nil {
					return fmt.Errorf("transaction %d: SemaphoreLockMany: %w", w, err)
				}
				for i := range sems {
					sems[i].Value--
				}
				return ex.(driver.BatchLocker).SemaphoreSaveMany(f.ctx, sems)
			})
		}))
		for i := range n {
			want := txs - min(i+1, txs)
			if s := f.sem(fmt.Sprintf("g/r%02d", i)); s.Value != want || s.Limit != txs {
				t.Errorf("g/r%02d = %d of %d free, want %d", i, s.Value, s.Limit, want)
			}
		}
	}},
	test{"SemaphoreLockManyAcrossChunks", func(t *testing.T, f *fixture) {
		f.needBatchLock()
		// More keys than one statement's list: every third exists with 1
		// of 3 free, the others are new; each takes a slot and is saved.
		const n = 1100
		limits, queues := make([]driver.Limit, n), make([]string, n)
		for i := range limits {
			limits[i] = driver.Limit{Key: fmt.Sprintf("g/k%04d", i), To: 2, Duration: time.Minute}
			queues[i] = "q"
			if i%3 == 0 {
				f.semaphore(limits[i].Key, 1, 3, 0, T0.Add(time.Hour))
			}
		}
		f.tx(func(ex driver.Executor) error {
			sems, err := ex.(driver.BatchLocker).SemaphoreLockMany(f.ctx, limits, queues, T0)
			if err != nil {
				return err
			}
			if len(sems) != n {
				return fmt.Errorf("SemaphoreLockMany returned %d semaphores for %d keys", len(sems), n)
			}
			for i := range sems {
				want := driver.Semaphore{Key: limits[i].Key, Value: 2, Limit: 2}
				if i%3 == 0 {
					want.Value, want.Limit = 1, 3
				}
				if s := sems[i]; s.Key != want.Key || s.Value != want.Value || s.Limit != want.Limit {
					return fmt.Errorf("semaphore %d = %+v, want %d of %d free of %s", i, s, want.Value, want.Limit, want.Key)
				}
				sems[i].Value--
			}
			return ex.(driver.BatchLocker).SemaphoreSaveMany(f.ctx, sems)
		})
		for i, l := range limits {
			want := 1
			if i%3 == 0 {
				want = 0
			}
			if s := f.sem(l.Key); s.Value != want {
				t.Fatalf("%s has %d free after the batch, want %d", l.Key, s.Value, want)
			}
		}
	}},
)

// A lock that waited for another transaction reads the key as that one
// left it: the key's adaptive limit and override too, not as they were
// when the lock began to wait. (Read in the locking statement, they came
// from its snapshot: a recovery that raised a key to its own limit and
// deleted its adaptive row, committed while an admission waited, had
// the admission write the lowered limit back, for good.)
var _ = add("lockfresh",
	test{"SemaphoreLockReadsWhatItsHolderLeft", func(t *testing.T, f *fixture) {
		f.needRowLocks()
		f.semaphore("g/a", 3, 3, 0, T0.Add(time.Hour))
		f.must(f.ex().KeyAdaptSet(f.ctx, driver.KeyAdapt{Key: "g/a", Limit: 3, Min: 1, AdaptedAt: T0}))
		holder := f.begin()
		if _, ok, err := holder.SemaphoreLock(f.ctx, "g/a", ""); !ok || err != nil {
			t.Fatalf("SemaphoreLock: %v, %v", ok, err)
		}
		var got driver.Semaphore
		waiting, wait := waits(func() error {
			return driver.InTx(f.ctx, f.d, func(ex driver.Executor) (err error) {
				got, _, err = ex.SemaphoreLock(f.ctx, "g/a", "")
				return err
			})
		})
		if !waiting {
			t.Fatal("SemaphoreLock returned while another transaction held the key")
		}
		if _, err := holder.KeyAdaptDelete(f.ctx, "g/a"); err != nil {
			t.Fatal(err)
		}
		f.must(holder.KeyLimitSet(f.ctx, "g/a", 4, T0))
		f.must(holder.Commit(f.ctx))
		f.must(wait())
		if got.Adapt != 0 || got.Override != 4 {
			t.Errorf("SemaphoreLock after the holder deleted the adaptive limit and set an override of 4: adapt %d, override %d; want 0 and 4", got.Adapt, got.Override)
		}
	}}, test{"RateLockReadsWhatItsHolderLeft", func(t *testing.T, f *fixture) {
		f.needRowLocks()
		spec := driver.RateSpec{Key: "g/r", Limit: 3, Period: time.Second}
		f.must(f.ex().RateEnsure(f.ctx, spec, T0))
		f.must(f.ex().KeyAdaptSet(f.ctx, driver.KeyAdapt{Key: driver.RateLine("g/r"), Limit: 2, Min: 1, AdaptedAt: T0}))
		holder := f.begin()
		if _, ok, err := holder.RateLock(f.ctx, "g/r"); !ok || err != nil {
			t.Fatalf("RateLock: %v, %v", ok, err)
		}
		var got driver.Rate
		waiting, wait := waits(func() error {
			return driver.InTx(f.ctx, f.d, func(ex driver.Executor) (err error) {
				got, _, err = ex.RateLock(f.ctx, "g/r")
				return err
			})
		})
		if !waiting {
			t.Fatal("RateLock returned while another transaction held the key")
		}
		if _, err := holder.KeyAdaptDelete(f.ctx, driver.RateLine("g/r")); err != nil {
			t.Fatal(err)
		}
		f.must(holder.KeyRateSet(f.ctx, driver.RateSpec{Key: "g/r", Limit: 5, Period: time.Minute}, T0))
		f.must(holder.Commit(f.ctx))
		f.must(wait())
		if got.Adapt != 0 || got.Override.Limit != 5 {
			t.Errorf("RateLock after the holder deleted the adaptive limit and set an override of 5: adapt %d, override %+v; want 0 and 5", got.Adapt, got.Override)
		}
	}}, test{"SemaphoreLockManyReadsWhatItsHolderLeft", func(t *testing.T, f *fixture) {
		f.needRowLocks()
		f.needBatchLock()
		f.semaphore("g/a", 3, 3, 0, T0.Add(time.Hour))
		f.semaphore("g/b", 3, 3, 0, T0.Add(time.Hour))
		f.must(f.ex().KeyAdaptSet(f.ctx, driver.KeyAdapt{Key: "g/b", Limit: 3, Min: 1, AdaptedAt: T0}))
		holder := f.begin()
		if _, ok, err := holder.SemaphoreLock(f.ctx, "g/b", ""); !ok || err != nil {
			t.Fatalf("SemaphoreLock: %v, %v", ok, err)
		}
		limits := []driver.Limit{{Key: "g/a", To: 4, Duration: time.Minute}, {Key: "g/b", To: 4, Duration: time.Minute}}
		var got []driver.Semaphore
		waiting, wait := waits(func() error {
			return driver.InTx(f.ctx, f.d, func(ex driver.Executor) (err error) {
				got, err = ex.(driver.BatchLocker).SemaphoreLockMany(f.ctx, limits, []string{"", ""}, T0)
				return err
			})
		})
		if !waiting {
			t.Fatal("SemaphoreLockMany returned while another transaction held g/b")
		}
		if _, err := holder.KeyAdaptDelete(f.ctx, "g/b"); err != nil {
			t.Fatal(err)
		}
		f.must(holder.KeyLimitSet(f.ctx, "g/b", 4, T0))
		f.must(holder.Commit(f.ctx))
		f.must(wait())
		if len(got) != 2 || got[1].Adapt != 0 || got[1].Override != 4 {
			t.Errorf("SemaphoreLockMany after the holder of g/b deleted its adaptive limit and set an override of 4: %+v; want g/b's adapt 0 and override 4", got)
		}
	}},
)

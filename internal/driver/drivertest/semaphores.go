package drivertest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Semaphores: creating, locking and saving a key's slot count, and
// promoting its blocked jobs.
var _ = add("semaphores",
	test{"SemaphoreEnsureCreatesWithEverySlotFree", func(t *testing.T, f *fixture) {
		f.tx(func(ex driver.Executor) error {
			if err := ex.SemaphoreEnsure(f.ctx, driver.Limit{Key: "g/three", To: 3, Duration: 2 * time.Minute}, T0); err != nil {
				return err
			}
			return ex.SemaphoreEnsure(f.ctx, driver.Limit{Key: "g/default", Duration: time.Minute}, T0)
		})
		s := f.sem("g/three")
		if s.Value != 3 || s.Limit != 3 || s.Blocked != 0 || s.Duration != 2*time.Minute {
			t.Errorf("new semaphore = %+v, want 3 of 3 free, nothing blocked, Duration 2m", s)
		}
		f.sameTime("ExpiresAt", s.ExpiresAt, T0.Add(2*time.Minute))
		if d := f.sem("g/default"); d.Value != 1 || d.Limit != 1 {
			t.Errorf("semaphore of To 0 = %d of %d free, want limit max(To, 1) = 1", d.Value, d.Limit)
		}
	}},
	test{"SemaphoreEnsureLeavesAnExistingOneAlone", func(t *testing.T, f *fixture) {
		f.semaphore("g/k", 0, 2, 4, T0.Add(time.Hour))
		f.tx(func(ex driver.Executor) error {
			return ex.SemaphoreEnsure(f.ctx, driver.Limit{Key: "g/k", To: 9, Duration: time.Second}, T0.Add(time.Minute))
		})
		if s := f.sem("g/k"); s.Value != 0 || s.Limit != 2 || s.Blocked != 4 || !s.ExpiresAt.Equal(T0.Add(time.Hour)) {
			t.Errorf("semaphore after a second SemaphoreEnsure = %+v, want it as saved", s)
		}
	}},
	test{"SemaphoreEnsureNeverFailsOnAConcurrentCreate", func(t *testing.T, f *fixture) {
		const n = 12
		l := driver.Limit{Key: "g/race", To: 2, Duration: time.Minute}
		// Outside any transaction, each creator on its own.
		f.must(together(n, func(int) error { return f.ex().SemaphoreEnsure(f.ctx, l, T0) }))
		if s := f.sem(l.Key); s.Value != 2 || s.Limit != 2 {
			t.Errorf("after %d concurrent creates: %+v, want one semaphore, 2 of 2 free", n, s)
		}
		if !f.rowLocks() {
			return // a transaction of SQLite's starts only when the one before it ends
		}
		// Inside open transactions that then lock the row, as admission
		// does, with no retry: a duplicate-key error, or a lock it leaves
		// that deadlocks on the upgrade, fails the test.
		// Three: a PostgreSQL pool of a 2-core machine has four connections.
		l.Key = "g/race-tx"
		txs := make([]driver.Tx, 3)
		for i := range txs {
			txs[i] = f.begin()
		}
		f.must(together(len(txs), func(i int) error {
			if err := txs[i].SemaphoreEnsure(f.ctx, l, T0); err != nil {
				return fmt.Errorf("transaction %d: SemaphoreEnsure: %w", i, err)
			}
			s, ok, err := txs[i].SemaphoreLock(f.ctx, l.Key, "")
			if err != nil || !ok {
				return fmt.Errorf("transaction %d: SemaphoreLock after SemaphoreEnsure: %v, %w", i, ok, err)
			}
			s.Value--
			if err := txs[i].SemaphoreSave(f.ctx, s); err != nil {
				return fmt.Errorf("transaction %d: SemaphoreSave: %w", i, err)
			}
			return txs[i].Commit(f.ctx)
		}))
		if s := f.sem(l.Key); s.Value != 2-len(txs) || s.Limit != 2 {
			t.Errorf("after %d transactions took a slot each: %d of %d free, want %d", len(txs), s.Value, s.Limit, 2-len(txs))
		}
	}},
	test{"SemaphoreLockReadsTheRowItsOverrideAndPolicy", func(t *testing.T, f *fixture) {
		if _, ok, err := f.ex().SemaphoreLock(f.ctx, "g/missing", ""); ok || err != nil {
			t.Errorf("SemaphoreLock of a missing key = %v, %v; want false, nil", ok, err)
		}
		f.semaphore("g/k", 1, 3, 2, T0.Add(time.Hour))
		_, err := f.ex().PolicyInsert(f.ctx, driver.Policy{Queue: "q", Namespace: "ns", MaxActive: 9, MaxActivePerKey: 4, MaxBlocked: 5,
			MaxWait: 3 * time.Second, AdaptiveMin: 2, UpdatedAt: T0})
		f.must(err)
		f.tx(func(ex driver.Executor) error {
			s, ok, err := ex.SemaphoreLock(f.ctx, "g/k", "")
			if err != nil || !ok {
				return fmt.Errorf("SemaphoreLock: %v, %w", ok, err)
			}
			if s.Key != "g/k" || s.Value != 1 || s.Limit != 3 || s.Blocked != 2 || s.Duration != time.Minute ||
				!s.ExpiresAt.Equal(T0.Add(time.Hour)) || s.Override != 0 || s.Policy != (driver.Policy{}) {
				t.Errorf("SemaphoreLock(g/k, no queue) = %+v; want the row as saved, no override, no policy", s)
			}
			if err := ex.KeyLimitSet(f.ctx, "g/k", 7, T0); err != nil {
				return err
			}
			s, _, err = ex.SemaphoreLock(f.ctx, "g/k", "q")
			if err != nil {
				return err
			}
			if s.Override != 7 || s.Policy.Queue != "q" || s.Policy.MaxActivePerKey != 4 || s.Policy.MaxBlocked != 5 ||
				s.Policy.MaxWait != 3*time.Second || s.Policy.AdaptiveMin != 2 {
				t.Errorf("SemaphoreLock(g/k, q) = override %d, policy %+v; want 7 and q's policy (MaxWait 3s, AdaptiveMin 2 too)", s.Override, s.Policy)
			}
			return nil
		})
	}},
	test{"SemaphoreLockSerialisesTransactions", func(t *testing.T, f *fixture) {
		// Each transaction takes a slot from what it read under the lock:
		// a lock that let two read the same value would lose a decrement.
		const n = 8
		f.semaphore("g/k", n, n, 0, T0.Add(time.Hour))
		f.must(together(n, func(int) error {
			return driver.InTx(f.ctx, f.d, func(ex driver.Executor) error {
				s, ok, err := ex.SemaphoreLock(f.ctx, "g/k", "")
				if err != nil || !ok {
					return fmt.Errorf("SemaphoreLock: %v, %w", ok, err)
				}
				s.Value--
				return ex.SemaphoreSave(f.ctx, s)
			})
		}))
		if s := f.sem("g/k"); s.Value != 0 {
			t.Errorf("after %d transactions took a slot each, %d of %d are free, want 0", n, s.Value, n)
		}
	}},
	test{"SemaphoreLockWaitsForTheHolder", func(t *testing.T, f *fixture) {
		f.needRowLocks()
		f.semaphore("g/k", 2, 2, 0, T0.Add(time.Hour))
		tx := f.begin()
		s, _, err := tx.SemaphoreLock(f.ctx, "g/k", "")
		f.must(err)
		s.Value = 1
		f.must(tx.SemaphoreSave(f.ctx, s))
		var seen driver.Semaphore
		waiting, wait := waits(func() error {
			return driver.InTx(f.ctx, f.d, func(ex driver.Executor) (err error) {
				seen, _, err = ex.SemaphoreLock(f.ctx, "g/k", "")
				return err
			})
		})
		if !waiting {
			t.Errorf("a second SemaphoreLock returned while another transaction held the key")
		}
		f.must(tx.Commit(f.ctx))
		f.must(wait())
		if seen.Value != 1 {
			t.Errorf("the waiting SemaphoreLock read %d free, want the holder's saved 1", seen.Value)
		}
	}},
	test{"SemaphoreTryLock", func(t *testing.T, f *fixture) {
		f.semaphore("g/k", 1, 1, 0, T0.Add(time.Hour))
		f.tx(func(ex driver.Executor) error {
			if ok, err := ex.SemaphoreTryLock(f.ctx, "g/missing"); ok || err != nil {
				t.Errorf("SemaphoreTryLock of a missing key = %v, %v; want false", ok, err)
			}
			if ok, err := ex.SemaphoreTryLock(f.ctx, "g/k"); !ok || err != nil {
				t.Errorf("SemaphoreTryLock of a free key = %v, %v; want true", ok, err)
			}
			return nil
		})
		if !f.rowLocks() {
			return
		}
		holder := f.begin()
		if _, ok, err := holder.SemaphoreLock(f.ctx, "g/k", ""); !ok || err != nil {
			t.Fatalf("SemaphoreLock: %v, %v", ok, err)
		}
		other := f.begin()
		if ok, err := other.SemaphoreTryLock(f.quick(), "g/k"); ok || err != nil {
			t.Errorf("SemaphoreTryLock while another transaction holds the key = %v, %v; want false at once", ok, err)
		}
		f.must(other.Rollback(f.ctx))
		f.must(holder.Rollback(f.ctx))
		f.tx(func(ex driver.Executor) error {
			if ok, err := ex.SemaphoreTryLock(f.ctx, "g/k"); !ok || err != nil {
				t.Errorf("SemaphoreTryLock after the holder ended = %v, %v; want true", ok, err)
			}
			return nil
		})
	}},
	test{"SemaphoreSaveWritesEveryField", func(t *testing.T, f *fixture) {
		f.semaphore("g/k", 1, 1, 0, T0)
		f.semaphore("g/other", 1, 1, 0, T0)
		want := driver.Semaphore{Key: "g/k", Value: -2, Limit: 5, Blocked: 3, Duration: 90 * time.Second, ExpiresAt: T0.Add(7 * time.Minute)}
		f.tx(func(ex driver.Executor) error {
			if _, _, err := ex.SemaphoreLock(f.ctx, "g/k", ""); err != nil {
				return err
			}
			return ex.SemaphoreSave(f.ctx, want)
		})
		got := f.sem("g/k")
		if got.Value != want.Value || got.Limit != want.Limit || got.Blocked != want.Blocked || got.Duration != want.Duration {
			t.Errorf("saved %+v, read back %+v (a lowered limit leaves the value below zero)", want, got)
		}
		f.sameTime("ExpiresAt", got.ExpiresAt, want.ExpiresAt)
		if o := f.sem("g/other"); o.Value != 1 || o.Limit != 1 {
			t.Errorf("SemaphoreSave of g/k changed g/other: %+v", o)
		}
	}},
	test{"PromoteBlockedOrder", func(t *testing.T, f *fixture) {
		k := keyed("g/k", 1)
		ids := f.insert(T0, job("q1", k, blocked, prio(0)), job("q2", k, blocked, prio(5)), job("q1", k, blocked, prio(0)),
			job("q1", k, blocked, prio(5)), job("q1", keyed("g/other", 1), blocked, prio(9)))
		now := T0.Add(time.Minute)
		var first, rest driver.Promotion
		f.tx(func(ex driver.Executor) (err error) {
			if _, _, err = ex.SemaphoreLock(f.ctx, "g/k", ""); err != nil {
				return err
			}
			first, err = ex.LinePromote(f.ctx, "g/k", 3, now)
			return err
		})
		if first.Jobs != 3 || !sameSet(first.Queues, []string{"q1", "q2"}) {
			t.Errorf("PromoteBlocked(3) = %+v, want 3 jobs of queues q1 and q2, each named once", first)
		}
		f.wantState(driver.StateReady, ids[1], ids[3], ids[0])
		f.wantState(driver.StateBlocked, ids[2], ids[4])
		f.sameTime("ready since", f.execution(ids[1]).ReadySince, now)
		f.tx(func(ex driver.Executor) (err error) {
			rest, err = ex.LinePromote(f.ctx, "g/k", 10, now)
			return err
		})
		if rest.Jobs != 1 || !slices.Equal(rest.Queues, []string{"q1"}) {
			t.Errorf("PromoteBlocked(10) of the one left = %+v, want 1 job of q1", rest)
		}
		f.wantState(driver.StateBlocked, ids[4])
		var none driver.Promotion
		f.tx(func(ex driver.Executor) (err error) {
			none, err = ex.LinePromote(f.ctx, "g/k", 1, now)
			return err
		})
		if none.Jobs != 0 || len(none.Queues) != 0 {
			t.Errorf("PromoteBlocked of an empty line = %+v", none)
		}
	}},
	test{"CountHolders", func(t *testing.T, f *fixture) {
		k := keyed("g/k", 3)
		f.insert(T0, job("q", k), job("q", k), job("q", k, blocked), job("q", k, blocked), job("q", k, blocked),
			job("q", k, dueAt(T0.Add(time.Hour))), job("q", keyed("g/other", 1)), job("q"))
		f.claim(f.ex(), "q", 1, 1, T0) // one of g/k's ready jobs: claimed still holds
		hc, err := f.ex().HolderCount(f.ctx, "g/k")
		holders, blockedN := hc.Holders, hc.Blocked
		f.must(err)
		if holders != 2 || blockedN != 3 {
			t.Errorf("CountHolders = %d holders, %d blocked; want 2 (ready + claimed), 3", holders, blockedN)
		}
	}},
)

// sameSet reports whether a and b hold the same strings, each once.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

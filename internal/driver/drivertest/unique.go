package drivertest

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Unique keys (64 hex digits, as bq spells them): keyA and keyB fall in
// different MySQL lock stripes (their first two bytes differ).
var (
	keyA = strings.Repeat("a", 64)
	keyB = strings.Repeat("b", 64)
)

// Unique jobs: the lock that serialises the enqueuers of a key, and the
// look-up each makes under it.
var _ = add("unique",
	test{"FindUniqueReadsTheNewestJobInTheStates", func(t *testing.T, f *fixture) {
		later := func(j *driver.NewJob) { j.State = driver.StateScheduled; j.ScheduledAt = T0.Add(time.Hour) }
		ids := f.insert(T0, job("q"), job("q", later), job("q", dueAt(T0)), job("q"))
		f.tx(func(ex driver.Executor) error {
			for i, k := range []string{keyA, keyA, keyB} {
				if err := ex.UniqueSet(f.ctx, ids[i], k); err != nil {
					return err
				}
			}
			return nil
		})
		for i, want := range []string{keyA, keyA, keyB, ""} {
			if got, err := f.ex().UniqueGetKey(f.ctx, ids[i]); err != nil || got != want {
				t.Errorf("UniqueKeyOf(job %d) = %q, %v; want %q", ids[i], got, err, want)
			}
		}
		if got, err := f.ex().UniqueGetKey(f.ctx, ids[3]+100); err != nil || got != "" {
			t.Errorf("UniqueKeyOf(no such job) = %q, %v; want \"\"", got, err)
		}
		find := func(key string, states ...driver.JobState) (int64, driver.JobState) {
			t.Helper()
			id, state, ok, err := f.ex().UniqueGet(f.ctx, key, states)
			f.must(err)
			if !ok {
				return 0, ""
			}
			return id, state
		}
		if id, state := find(keyA, driver.StateReady, driver.StateScheduled); id != ids[1] || state != driver.StateScheduled {
			t.Errorf("FindUnique(ready, scheduled) = job %d %q, want the newest, job %d scheduled", id, state, ids[1])
		}
		if id, state := find(keyA, driver.StateReady); id != ids[0] || state != driver.StateReady {
			t.Errorf("FindUnique(ready) = job %d %q, want job %d ready (the scheduled one is not in the states)", id, state, ids[0])
		}
		if id, _ := find(keyA, driver.StateCompleted, driver.StateFailed); id != 0 {
			t.Errorf("FindUnique(completed, failed) = job %d, want none", id)
		}
		if id, _ := find(keyA); id != 0 {
			t.Errorf("FindUnique(no states) = job %d, want none", id)
		}
		if id, _ := find(strings.Repeat("c", 64), driver.StateReady); id != 0 {
			t.Errorf("FindUnique of a key no job has = job %d, want none (job %d has no unique key)", id, ids[3])
		}
		// Job 2, taken from the scheduled table, completes.
		f.tx(func(ex driver.Executor) error {
			if _, err := ex.ScheduledTakeDue(f.ctx, T0, 10); err != nil {
				return err
			}
			return ex.JobFinish(f.ctx, ids[2], T0, false)
		})
		if id, state := find(keyB, driver.StateCompleted); id != ids[2] || state != driver.StateCompleted {
			t.Errorf("FindUnique(completed) = job %d %q, want job %d completed", id, state, ids[2])
		}
	}},
	test{"LockUniqueSerialisesEnqueuersOfAKey", func(t *testing.T, f *fixture) {
		first := f.begin()
		f.must(first.UniqueLock(f.ctx, keyA))
		var committed atomic.Bool
		done := make(chan bool)
		go func() {
			// SQLite's second writer waits at BEGIN, the others at the lock.
			err := driver.InTx(f.ctx, f.d, func(ex driver.Executor) error { return ex.UniqueLock(f.ctx, keyA) })
			done <- err == nil && committed.Load()
		}()
		time.Sleep(200 * time.Millisecond)
		committed.Store(true)
		f.must(first.Commit(f.ctx))
		if ok := <-done; !ok {
			t.Error("a second transaction locked the unique key while the first held it (or failed)")
		}
	}},
	test{"LockUniqueOfAnotherKeyDoesNotWait", func(t *testing.T, f *fixture) {
		f.needRowLocks()
		first := f.begin()
		f.must(first.UniqueLock(f.ctx, keyA))
		second := f.begin()
		if err := second.UniqueLock(f.quick(), keyB); err != nil {
			t.Fatalf("LockUnique of another key, beside a holder of the first: %v", err)
		}
		f.must(second.Commit(f.ctx))
		f.must(first.Commit(f.ctx))
	}},
)

package drivertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Set-wise release across many keys: the keys' semaphores are locked in
// key order, as admission locks them, and a batch larger than one
// statement's list still promotes each key's line in priority, then
// FIFO order.
var _ = add("releasebatch",
	test{"ReleaseManyLocksInKeyOrder", func(t *testing.T, f *fixture) {
		f.needRowLocks()
		const n = 20
		keys, counts := make([]string, n), make([]int, n)
		for i := range keys {
			keys[i], counts[i] = fmt.Sprintf("g/k%02d", i), 1
			f.semaphore(keys[i], 0, 1, 0, T0.Add(time.Hour))
		}
		holder := f.begin()
		const held = n / 2
		if _, ok, err := holder.SemaphoreLock(f.ctx, keys[held], ""); !ok || err != nil {
			t.Fatalf("SemaphoreLock: %v, %v", ok, err)
		}
		waiting, wait := waits(func() error {
			return driver.InTx(f.ctx, f.d, func(ex driver.Executor) error {
				_, err := ex.SemaphoreReleaseMany(f.ctx, keys, counts, T0)
				return err
			})
		})
		if !waiting {
			t.Fatalf("ReleaseMany returned while another transaction held %s", keys[held])
		}
		// Waiting on keys[held], it holds every key before it and none after.
		other := f.begin()
		for i, k := range keys {
			if i == held {
				continue
			}
			free, err := other.SemaphoreTryLock(f.quick(), k)
			f.must(err)
			if free != (i > held) {
				t.Errorf("while ReleaseMany waits on %s, %s is free: %v; want keys locked in key order", keys[held], k, free)
			}
		}
		f.must(other.Rollback(f.ctx))
		f.must(holder.Commit(f.ctx))
		f.must(wait())
		for _, k := range keys {
			if s := f.sem(k); s.Value != 1 {
				t.Errorf("%s has %d free after the release, want 1", k, s.Value)
			}
		}
	}},
	test{"ReleaseManySeesALineJoinedWhileItWaited", func(t *testing.T, f *fixture) {
		// An admission holds g/a and blocks a job on it; a release of
		// g/a's one slot, waiting on that lock meanwhile, must see the
		// job once the admission commits and promote it. A release that
		// read the line before it had the lock would leave a free slot
		// beside a blocked job until the dispatcher's sweep.
		f.needRowLocks()
		f.semaphore("g/a", 0, 1, 0, T0.Add(time.Hour))
		f.semaphore("g/b", 0, 1, 0, T0.Add(time.Hour))
		holder := f.begin()
		if _, ok, err := holder.SemaphoreLock(f.ctx, "g/a", ""); !ok || err != nil {
			t.Fatalf("SemaphoreLock: %v, %v", ok, err)
		}
		j := job("q", keyed("g/a", 1), blocked)
		f.must(holder.JobInsertMany(f.ctx, T0, []*driver.NewJob{j}))
		f.must(holder.SemaphoreSave(f.ctx, driver.Semaphore{Key: "g/a", Value: 0, Limit: 1, Blocked: 1,
			Duration: time.Minute, ExpiresAt: T0.Add(time.Hour)}))
		waiting, wait := waits(func() error {
			return driver.InTx(f.ctx, f.d, func(ex driver.Executor) error {
				_, err := ex.SemaphoreReleaseMany(f.ctx, []string{"g/a", "g/b"}, []int{1, 1}, T0)
				return err
			})
		})
		if !waiting {
			t.Fatal("ReleaseMany returned while another transaction held g/a")
		}
		f.must(holder.Commit(f.ctx))
		f.must(wait())
		f.wantState(driver.StateReady, j.ID)
		if a := f.sem("g/a"); a.Value != 0 || a.Blocked != 0 {
			t.Errorf("g/a after the release = %d free, %d blocked; want the freed slot taken by the job blocked while the release waited", a.Value, a.Blocked)
		}
		if b := f.sem("g/b"); b.Value != 1 {
			t.Errorf("g/b after the release = %d free, want 1", b.Value)
		}
	}},
	test{"ReleaseManyAcrossChunks", func(t *testing.T, f *fixture) {
		// Each key: limit 2, none free, two blocked jobs. Releasing one
		// slot promotes the first in line: on odd keys the later job with
		// the higher priority, on even keys the older of two equals. Every
		// fifth key gives back two slots, so both go; every seventh key has
		// no semaphore.
		const n = 1100
		var keys []string
		var counts []int
		var jobs []*driver.NewJob
		for i := range n {
			k, count := fmt.Sprintf("g/%04d", i), 1
			if i%5 == 0 {
				count = 2
			}
			keys, counts = append(keys, k), append(counts, count)
			jobs = append(jobs,
				job(fmt.Sprintf("q%d", i%3), keyed(k, 2), blocked, named(k+"/first")),
				job(fmt.Sprintf("q%d", i%3), keyed(k, 2), blocked, named(k+"/second"), prio(i%2)))
		}
		ids := f.insert(T0.Add(-time.Hour), jobs...)
		for i, k := range keys {
			if i%7 != 0 {
				f.semaphore(k, 0, 2, 2, T0.Add(20*time.Second)) // under half its Duration left: renewed
			}
		}
		var got []driver.Promotion
		f.tx(func(ex driver.Executor) (err error) {
			got, err = ex.SemaphoreReleaseMany(f.ctx, keys, counts, T0)
			return err
		})
		if len(got) != n {
			t.Fatalf("ReleaseMany returned %d promotions for %d keys", len(got), n)
		}
		for i, k := range keys {
			first, second := ids[2*i], ids[2*i+1]
			wantFirst, wantSecond, moved := driver.StateBlocked, driver.StateBlocked, counts[i]
			switch {
			case i%7 == 0:
				moved = 0
			case counts[i] == 2:
				wantFirst, wantSecond = driver.StateReady, driver.StateReady
			case i%2 == 1:
				wantSecond = driver.StateReady
			default:
				wantFirst = driver.StateReady
			}
			queue := fmt.Sprintf("q%d", i%3)
			if got[i].Jobs != moved || (moved > 0 && !sameSet(got[i].Queues, []string{queue})) {
				t.Fatalf("%s: ReleaseMany promoted %+v, want %d jobs into %s", k, got[i], moved, queue)
			}
			if s1, s2 := f.state(first), f.state(second); s1 != wantFirst || s2 != wantSecond {
				t.Fatalf("%s: its jobs are %q, %q after the release; want %q, %q", k, s1, s2, wantFirst, wantSecond)
			}
			if i%7 == 0 {
				continue
			}
			s := f.sem(k)
			if s.Value != 0 || s.Blocked != 2-moved || !s.ExpiresAt.Equal(T0.Add(time.Minute)) {
				t.Fatalf("%s: semaphore %+v after the release; want 0 free, %d blocked, expiry renewed to %v", k, s, 2-moved, T0.Add(time.Minute))
			}
		}
	}},
)

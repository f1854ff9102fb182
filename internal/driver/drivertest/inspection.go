package drivertest

import (
	"slices"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Inspection: read-only statements, each bounded by its max.
var _ = add("inspection",
	test{"ReadyAges", func(t *testing.T, f *fixture) {
		f.insert(T0.Add(2*time.Minute), job("b"))
		f.insert(T0, job("b"), job("a"))
		f.insert(T0.Add(time.Minute), job("a"), job("c", dueAt(T0)))
		ages, err := f.ex().ReadyListAges(f.ctx)
		f.must(err)
		if len(ages) != 2 || ages[0].Queue != "a" || ages[1].Queue != "b" {
			t.Fatalf("ReadyAges = %+v, want queues a and b (c has no ready job)", ages)
		}
		f.sameTime("a's oldest ready", ages[0].OldestReady, T0)
		f.sameTime("b's oldest ready", ages[1].OldestReady, T0)
	}},
	test{"GroupStats", func(t *testing.T, f *fixture) {
		f.semaphore("b/1", 0, 2, 3, T0)
		f.semaphore("b/2", 1, 4, 0, T0)
		f.semaphore("a/x/y", 1, 1, 0, T0)
		f.semaphore("c/1", -1, 1, 1, T0)
		got, err := f.ex().GroupListStats(f.ctx, 10)
		f.must(err)
		want := []driver.GroupStats{
			{Group: "a", Keys: 1, MinLimit: 1, MaxLimit: 1},
			{Group: "b", Keys: 2, MinLimit: 2, MaxLimit: 4, Active: 5, Blocked: 3, Saturated: 1},
			{Group: "c", Keys: 1, MinLimit: 1, MaxLimit: 1, Active: 2, Blocked: 1, Saturated: 1},
		}
		if !slices.Equal(got, want) {
			t.Errorf("GroupStats = %+v, want %+v", got, want)
		}
		if two, err := f.ex().GroupListStats(f.ctx, 2); err != nil || !slices.Equal(two, want[:2]) {
			t.Errorf("GroupStats(max 2) = %+v, %v; want the first two groups", two, err)
		}
	}},
	test{"TopBlockedKeys", func(t *testing.T, f *fixture) {
		f.semaphore("g/b", 0, 1, 2, T0)
		f.semaphore("g/a", 0, 1, 2, T0)
		f.semaphore("g/c", 0, 1, 5, T0)
		f.semaphore("g/none", 0, 1, 0, T0)
		top, err := f.ex().SemaphoreListMostBlocked(f.ctx, 2)
		f.must(err)
		var keys []string
		for _, s := range top {
			keys = append(keys, s.Key)
		}
		if !slices.Equal(keys, []string{"g/c", "g/a"}) || top[0].Blocked != 5 || top[0].Limit != 1 {
			t.Errorf("TopBlockedKeys(max 2) = %+v; want g/c (5 blocked) then g/a: most blocked first, then by key", top)
		}
	}},
	test{"ReadSemaphoreTakesNoLock", func(t *testing.T, f *fixture) {
		if _, ok, err := f.ex().SemaphoreGet(f.ctx, "g/missing"); ok || err != nil {
			t.Errorf("ReadSemaphore of a missing key = %v, %v; want false", ok, err)
		}
		f.semaphore("g/k", 1, 2, 0, T0)
		if !f.rowLocks() {
			return
		}
		holder := f.begin()
		_, _, err := holder.SemaphoreLock(f.ctx, "g/k", "")
		f.must(err)
		s, ok, err := f.ex().SemaphoreGet(f.quick(), "g/k")
		if err != nil || !ok || s.Value != 1 || s.Limit != 2 {
			t.Errorf("ReadSemaphore while another transaction holds the key = %+v, %v, %v; want it read at once", s, ok, err)
		}
	}},
	test{"KeyHolders", func(t *testing.T, f *fixture) {
		pid := f.process("w1", T0, time.Second, time.Minute)
		gone := f.process("w2", T0, time.Second, time.Minute)
		f.beat(pid, T0.Add(5*time.Second), T0)
		k := keyed("g/k", 3)
		ids := f.insert(T0, job("q", k), job("r", k), job("q", k), job("q", k, blocked), job("q", keyed("g/other", 1)))
		f.claim(f.ex(), "r", 1, pid, T0.Add(time.Second))
		f.claim(f.ex(), "q", 1, gone, T0.Add(2*time.Second))
		f.must(f.ex().ProcessDeregister(f.ctx, gone))
		holders, err := f.ex().HolderList(f.ctx, "g/k", 10)
		f.must(err)
		if len(holders) != 3 || holders[0].JobID != ids[0] || holders[1].JobID != ids[1] || holders[2].JobID != ids[2] {
			t.Fatalf("KeyHolders = %+v, want jobs %v (ready and claimed, by id; not the blocked one)", holders, ids[:3])
		}
		byJob := func(h driver.Holder) string { return h.Kind + "/" + h.Queue }
		if h := holders[1]; !h.Running || h.ProcessID != pid || h.ProcessName != "w1" || byJob(h) != "drivertest.job/r" {
			t.Errorf("running holder = %+v, want claimed by w1", h)
		} else {
			f.sameTime("ProcessBeat", h.ProcessBeat, T0.Add(5*time.Second))
			f.sameTime("ClaimedAt", h.ClaimedAt, T0.Add(time.Second))
		}
		if h := holders[0]; !h.Running || h.ProcessID != gone || !h.ProcessBeat.IsZero() {
			t.Errorf("holder claimed by a process whose row is gone = %+v, want running, its process id, no beat", h)
		}
		if h := holders[2]; h.Running || h.ProcessID != 0 {
			t.Errorf("ready holder = %+v, want not running, no process", h)
		}
		if two, err := f.ex().HolderList(f.ctx, "g/k", 2); err != nil || len(two) != 2 || two[1].JobID != ids[1] {
			t.Errorf("KeyHolders(max 2) = %+v, %v; want the first two", two, err)
		}
	}},
	test{"BlockedLineAndAhead", func(t *testing.T, f *fixture) {
		k := keyed("g/k", 1)
		ids := f.insert(T0, job("q", k, blocked, prio(0)), job("r", k, blocked, prio(5)), job("q", k, blocked, prio(0)),
			job("q", k, blocked, prio(5)), job("q", keyed("g/other", 1), blocked, prio(9)))
		line, err := f.ex().LineList(f.ctx, "g/k", 3)
		f.must(err)
		var got []int64
		for _, b := range line {
			got = append(got, b.JobID)
		}
		if want := []int64{ids[1], ids[3], ids[0]}; !slices.Equal(got, want) {
			t.Errorf("BlockedLine(max 3) = %v, want %v: promotion order, priority then id", got, want)
		}
		if b := line[0]; b.Queue != "r" || b.Priority != 5 || b.Kind != "drivertest.job" || !b.Since.Equal(T0) {
			t.Errorf("BlockedLine[0] = %+v, want job of r, priority 5, blocked since %v", b, T0)
		}
		for _, c := range []struct {
			prio  int
			id    int64
			max   int
			ahead int
		}{{0, ids[2], 10, 3}, {5, ids[3], 10, 1}, {5, ids[1], 10, 0}, {0, ids[2], 2, 2}, {9, 0, 10, 0}} {
			if n, err := f.ex().LineCountAhead(f.ctx, driver.LineAheadParams{Key: "g/k", Priority: c.prio, JobID: c.id, Max: c.max}); n != c.ahead || err != nil {
				t.Errorf("BlockedAhead(priority %d, job %d, max %d) = %d, %v; want %d", c.prio, c.id, c.max, n, err, c.ahead)
			}
		}
	}},
	test{"ClockNowReadsTheServersClock", func(t *testing.T, f *fixture) {
		before := time.Now()
		got, err := f.ex().ClockNow(f.ctx)
		after := time.Now()
		f.must(err)
		if f.d.Dialect() == driver.SQLite {
			if !got.IsZero() {
				t.Errorf("ClockNow on SQLite = %v, want the zero time (its clock is its host's)", got)
			}
			return
		}
		// The server runs on this host in the tests: its clock is ours.
		if got.Before(before.Add(-time.Second)) || got.After(after.Add(time.Second)) {
			t.Errorf("ClockNow = %v, want within a second of [%v, %v]", got, before, after)
		}
	}},
	test{"JobExecution", func(t *testing.T, f *fixture) {
		pid := f.process("w", T0, time.Second, time.Minute)
		ids := f.insert(T0, job("q"), job("r"), job("q", dueAt(T0.Add(time.Hour))), job("q", keyed("g/k", 1), blocked), job("f"))
		f.claim(f.ex(), "r", 1, pid, T0.Add(time.Second))
		c := f.claim(f.ex(), "f", 1, pid, T0)[0]
		f.tx(func(ex driver.Executor) error {
			if _, err := ex.ClaimDelete(f.ctx, c.ID, c.Fence); err != nil {
				return err
			}
			return ex.FailedInsert(f.ctx, c.ID, "x", T0.Add(time.Minute))
		})
		ready, running, sched, blockedX, failed := f.execution(ids[0]), f.execution(ids[1]), f.execution(ids[2]), f.execution(ids[3]), f.execution(ids[4])
		f.sameTime("ready: ReadySince", ready.ReadySince, T0)
		f.sameTime("running: ClaimedAt", running.ClaimedAt, T0.Add(time.Second))
		f.sameTime("running: ProcessBeat", running.ProcessBeat, T0)
		f.sameTime("scheduled: DueAt", sched.DueAt, T0.Add(time.Hour))
		f.sameTime("blocked: BlockedSince", blockedX.BlockedSince, T0)
		f.sameTime("failed: FailedAt", failed.FailedAt, T0.Add(time.Minute))
		if running.Fence == 0 || running.Fence == c.Fence || ready.Fence != 0 || failed.Fence != 0 {
			t.Errorf("fences: running %d (the failed job's claim had %d), ready %d, failed %d; want the running claim's own, 0 for the others",
				running.Fence, c.Fence, ready.Fence, failed.Fence)
		}
		if running.ProcessID != pid || running.ProcessName != "w" || !ready.ClaimedAt.IsZero() || !ready.DueAt.IsZero() || ready.ProcessID != 0 {
			t.Errorf("executions: ready %+v, running %+v; want the claim's process on the running one only", ready, running)
		}
		if _, ok, err := f.ex().ExecutionGet(f.ctx, 99999); ok || err != nil {
			t.Errorf("JobExecution of a missing job = %v, %v; want false", ok, err)
		}
	}},
	test{"ListFailedPagesNewestFirst", func(t *testing.T, f *fixture) {
		ids := f.insert(T0, jobs(5, "q")...)
		f.tx(func(ex driver.Executor) error {
			for _, c := range f.claim(ex, "q", 5, 1, T0) {
				if _, err := ex.ClaimDelete(f.ctx, c.ID, c.Fence); err != nil {
					return err
				}
				if err := ex.FailedInsert(f.ctx, c.ID, "x", T0); err != nil {
					return err
				}
			}
			return nil
		})
		var pages [][]int64
		for before := int64(0); ; {
			page, err := f.ex().FailedList(f.ctx, before, 2)
			f.must(err)
			if len(page) == 0 {
				break
			}
			var got []int64
			for _, j := range page {
				got = append(got, j.JobID)
			}
			pages = append(pages, got)
			before = got[len(got)-1]
		}
		want := [][]int64{{ids[4], ids[3]}, {ids[2], ids[1]}, {ids[0]}}
		if !slices.EqualFunc(pages, want, slices.Equal) {
			t.Errorf("ListFailed pages = %v, want %v", pages, want)
		}
	}},
)

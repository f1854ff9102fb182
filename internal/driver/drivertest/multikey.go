package drivertest

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// also gives the job further concurrency keys (Job.More), each with limit
// to and a one-minute Duration; give it a key first (keyed).
func also(to int, keys ...string) func(*driver.NewJob) {
	return func(j *driver.NewJob) {
		for _, k := range keys {
			j.More = append(j.More, driver.Limit{Key: k, To: to, Duration: time.Minute})
		}
	}
}

// inLine stores a blocked job in the line of key, not its first key's.
func inLine(key string) func(*driver.NewJob) { return func(j *driver.NewJob) { j.Line = key } }

// multiSemaphore is semaphore with Multi set: multi of its blocked jobs
// are multi-key jobs.
func (f *fixture) multiSemaphore(key string, value, limit, blocked, multi int, expires time.Time) {
	f.t.Helper()
	f.tx(func(ex driver.Executor) error {
		if err := ex.SemaphoreEnsure(f.ctx, driver.Limit{Key: key, To: limit, Duration: time.Minute}, T0); err != nil {
			return err
		}
		return ex.SemaphoreSave(f.ctx, driver.Semaphore{Key: key, Value: value, Limit: limit, Blocked: blocked,
			Multi: multi, Duration: time.Minute, ExpiresAt: expires})
	})
}

// count is HolderCount of key, failing the test on an error.
func (f *fixture) count(key string) driver.HolderCount {
	f.t.Helper()
	n, err := f.ex().HolderCount(f.ctx, key)
	f.must(err)
	return n
}

// heads is LineListHeads of key in a transaction, as package semaphore calls it.
func (f *fixture) heads(key string, n int) []driver.LineHead {
	f.t.Helper()
	var out []driver.LineHead
	f.tx(func(ex driver.Executor) (err error) {
		out, err = ex.LineListHeads(f.ctx, key, n)
		return err
	})
	return out
}

func headIDs(heads []driver.LineHead) []int64 {
	ids := make([]int64, len(heads))
	for i, h := range heads {
		ids[i] = h.JobID
	}
	return ids
}

// Several concurrency keys per job: a multi-key job's further keys are
// stored with it and named in job_keys, so it holds a slot of each while
// ready, claimed or in a rate line, and waits in the line of one key.
var _ = add("multikey",
	test{"InsertJobsStoresMoreKeys", func(t *testing.T, f *fixture) {
		more := []driver.Limit{
			{Key: "g/b", To: 3, Duration: 2 * time.Minute, OnConflict: driver.Discard, MaxBlocked: 5},
			{Key: "g/c", To: 1, Duration: time.Second},
		}
		multi := job("q", keyed("g/a", 2), func(j *driver.NewJob) { j.More = more })
		ids := f.insert(T0, multi, job("q", keyed("g/x", 1)), job("r", keyed("g/b", 1)))
		if got := f.get(ids[0]).More; !reflect.DeepEqual(got, more) {
			t.Errorf("GetJob(multi-key job).More = %+v, want %+v", got, more)
		}
		if got := f.get(ids[1]).More; got != nil {
			t.Errorf("GetJob(single-key job).More = %+v, want nil", got)
		}
		claims := f.claim(f.ex(), "q", 2, 1, T0)
		if len(claims) != 2 || claims[0].ID != ids[0] {
			t.Fatalf("claimed jobs %v, want %v", claimIDs(claims), ids[:2])
		}
		if !reflect.DeepEqual(claims[0].More, more) || claims[1].More != nil {
			t.Errorf("claims' More = %+v, %+v; want %+v, nil", claims[0].More, claims[1].More, more)
		}
		if want := multi.Keys(); !reflect.DeepEqual(claims[0].Keys(), want) {
			t.Errorf("claimed job's Keys = %+v, want %+v", claims[0].Keys(), want)
		}
		for key, want := range map[string][]int64{"g/a": {ids[0]}, "g/b": {ids[2], ids[0]}, "g/c": {ids[0]}, "g/x": {ids[1]}} {
			listed, err := f.ex().JobList(f.ctx, driver.JobFilter{Key: key, Max: 10})
			f.must(err)
			var got []int64
			for _, j := range listed {
				got = append(got, j.ID)
			}
			if !slices.Equal(got, want) {
				t.Errorf("ListJobs(Key %s) = jobs %v, want %v (newest first, a multi-key job under each of its keys)", key, got, want)
			}
		}
	}},
	test{"CountHoldersCountsEveryKeyOfAMultiKeyJob", func(t *testing.T, f *fixture) {
		ids := f.insert(T0,
			job("q", keyed("g/a", 5), also(5, "g/b")),                                        // ready: holds g/a and g/b
			job("c", keyed("g/c", 5), also(5, "g/a")),                                        // claimed below: holds g/c and g/a
			job("q", keyed("g/a", 5), also(5, "g/b"), blocked, inLine("g/b")),                // in g/b's line: holds nothing
			job("q", keyed("g/b", 5), blocked),                                               // in g/b's line
			job("q", keyed("g/d", 5), also(5, "g/a"), blocked, inLine(driver.RateLine("r"))), // in a rate line: holds g/d and g/a
			job("q", keyed("g/a", 5), also(5, "g/b"), dueAt(T0.Add(time.Hour))),              // scheduled: holds nothing
		)
		if c := f.claim(f.ex(), "c", 1, 1, T0); len(c) != 1 || c[0].ID != ids[1] {
			t.Fatalf("claimed %v, want job %d", claimIDs(c), ids[1])
		}
		for key, want := range map[string]driver.HolderCount{
			"g/a":                {Holders: 3},
			"g/b":                {Holders: 1, Blocked: 2, Multi: 1},
			"g/c":                {Holders: 1},
			"g/d":                {Holders: 1},
			driver.RateLine("r"): {Blocked: 1, Multi: 1},
		} {
			if got := f.count(key); got != want {
				t.Errorf("CountHolders(%s) = %+v, want %+v", key, got, want)
			}
		}
		// Finished, the claimed job holds nothing.
		f.must(f.ex().JobFinish(f.ctx, ids[1], T0, false))
		if got := f.count("g/a"); got.Holders != 2 {
			t.Errorf("CountHolders(g/a) after a holder finished = %+v, want 2 holders", got)
		}
	}},
	test{"LineHeadsInPromotionOrderWithKeys", func(t *testing.T, f *fixture) {
		ids := f.insert(T0,
			job("q", keyed("g/l", 1), blocked, prio(0)),
			job("r", keyed("g/x", 2), also(3, "g/l", "g/y"), blocked, inLine("g/l"), prio(5)),
			job("q", keyed("g/l", 1), blocked, prio(5)),
			job("q", keyed("g/l", 1), blocked, prio(0)),
			job("q", keyed("g/x", 2), blocked, prio(9)), // another line
		)
		heads := f.heads("g/l", 3)
		if got, want := headIDs(heads), []int64{ids[1], ids[2], ids[0]}; !slices.Equal(got, want) {
			t.Fatalf("LineHeads(g/l, 3) = jobs %v, want %v (priority, then id)", got, want)
		}
		multi := heads[0]
		wantKeys := []driver.Limit{{Key: "g/x", To: 2, Duration: time.Minute},
			{Key: "g/l", To: 3, Duration: time.Minute}, {Key: "g/y", To: 3, Duration: time.Minute}}
		if multi.Queue != "r" || multi.Priority != 5 || !reflect.DeepEqual(multi.Keys, wantKeys) {
			t.Errorf("multi-key head = %+v, want queue r, priority 5, keys %+v", multi, wantKeys)
		}
		if single := heads[1]; single.Queue != "q" || !reflect.DeepEqual(single.Keys, []driver.Limit{{Key: "g/l", To: 1, Duration: time.Minute}}) {
			t.Errorf("single-key head = %+v, want queue q, its one key", single)
		}
		if all := f.heads("g/l", 10); len(all) != 4 {
			t.Errorf("LineHeads(g/l, 10) = jobs %v, want the line's 4", headIDs(all))
		}
		if none := f.heads("g/none", 5); len(none) != 0 {
			t.Errorf("LineHeads of an empty line = %v, want none", headIDs(none))
		}
	}},
	test{"MoveToLineMovesABlockedJob", func(t *testing.T, f *fixture) {
		ids := f.insert(T0,
			job("q", keyed("g/a", 1), also(1, "g/b"), blocked, prio(3)),
			job("q", keyed("g/b", 1), blocked, prio(1)),
			job("q", keyed("g/a", 1), also(1, "g/b")), // ready
		)
		f.tx(func(ex driver.Executor) error { return ex.LineMove(f.ctx, ids[0], "g/a", "g/b") })
		if got := headIDs(f.heads("g/b", 5)); !slices.Equal(got, []int64{ids[0], ids[1]}) {
			t.Errorf("g/b's line after the move = jobs %v, want %v (by priority)", got, []int64{ids[0], ids[1]})
		}
		if got := f.heads("g/a", 5); len(got) != 0 {
			t.Errorf("g/a's line after the move = jobs %v, want none", headIDs(got))
		}
		if got := f.count("g/b"); got.Blocked != 2 || got.Multi != 1 {
			t.Errorf("CountHolders(g/b) after the move = %+v, want 2 blocked, 1 multi-key", got)
		}
		if line, err := f.ex().LineList(f.ctx, "g/b", 5); err != nil || len(line) != 2 {
			t.Errorf("BlockedLine(g/b) after the move = %+v, %v; want both jobs", line, err)
		}
		for _, c := range []struct {
			id       int64
			from, to string
		}{
			{ids[0], "g/a", "g/b"}, // no longer in g/a's line
			{ids[2], "g/a", "g/b"}, // ready, in no line
			{ids[1], "g/a", "g/b"}, // in g/b's line, not g/a's
		} {
			err := driver.InTx(f.ctx, f.d, func(ex driver.Executor) error { return ex.LineMove(f.ctx, c.id, c.from, c.to) })
			if err == nil {
				t.Errorf("MoveToLine(job %d, %s, %s) = nil, want an error: the job is not in %s's line", c.id, c.from, c.to, c.from)
			}
		}
		f.wantState(driver.StateBlocked, ids[0], ids[1])
	}},
	test{"ReleaseManyLeavesALineWithMultiKeyJobs", func(t *testing.T, f *fixture) {
		ids := f.insert(T0.Add(-time.Hour),
			job("q", keyed("g/m", 1), also(1, "g/o"), blocked), // g/m's line: a multi-key job
			job("q", keyed("g/m", 1), blocked),
			job("r", keyed("g/s", 1), blocked), // g/s's line: single-key jobs only
		)
		f.multiSemaphore("g/m", 0, 1, 2, 1, T0.Add(30*time.Second))
		f.multiSemaphore("g/s", 0, 1, 1, 0, T0.Add(30*time.Second))
		var got []driver.Promotion
		f.tx(func(ex driver.Executor) (err error) {
			got, err = ex.SemaphoreReleaseMany(f.ctx, []string{"g/m", "g/s"}, []int{1, 1}, T0)
			return err
		})
		if len(got) != 2 {
			t.Fatalf("ReleaseMany returned %d promotions for 2 keys", len(got))
		}
		if p := got[0]; !p.LineLeft || p.Jobs != 0 {
			t.Errorf("g/m (multi 1) promoted %+v, want its line left (LineLeft) and no job moved", p)
		}
		if p := got[1]; p.LineLeft || p.Jobs != 1 || !sameSet(p.Queues, []string{"r"}) {
			t.Errorf("g/s (multi 0) promoted %+v, want its one job into r", p)
		}
		f.wantState(driver.StateBlocked, ids[0], ids[1])
		f.wantState(driver.StateReady, ids[2])
		if s := f.sem("g/m"); s.Value != 1 || s.Blocked != 2 || s.Multi != 1 || !s.ExpiresAt.Equal(T0.Add(30*time.Second)) {
			t.Errorf("g/m after the release = %+v, want its slot back (1 free), 2 blocked, multi 1, expiry kept", s)
		}
		if s := f.sem("g/s"); s.Value != 0 || s.Blocked != 0 || s.Multi != 0 {
			t.Errorf("g/s after the release = %+v, want 0 free, 0 blocked", s)
		}
	}},
	test{"DeleteIdleSemaphoresKeepsTheKeysOfBlockedMultiKeyJobs", func(t *testing.T, f *fixture) {
		// g/w's blocked job, in g/w's line, also needs g/named.
		f.insert(T0, job("q", keyed("g/w", 1), also(1, "g/named"), blocked))
		expired := T0.Add(-time.Minute)
		f.semaphore("g/w", 0, 1, 1, expired)
		f.semaphore("g/named", 1, 1, 0, expired)         // idle, but named by a blocked multi-key job
		f.multiSemaphore("g/multi", 1, 1, 0, 1, expired) // idle, but its Multi says otherwise
		f.semaphore("g/idle", 1, 1, 0, expired)
		n, err := f.ex().SemaphoreDeleteIdle(f.ctx, T0, 10)
		f.must(err)
		if n != 1 {
			t.Errorf("DeleteIdleSemaphores = %d, want 1 (g/idle)", n)
		}
		for key, want := range map[string]bool{"g/w": true, "g/named": true, "g/multi": true, "g/idle": false} {
			if _, ok, err := f.ex().SemaphoreGet(f.ctx, key); err != nil || ok != want {
				t.Errorf("semaphore %s exists: %v, %v; want %v", key, ok, err, want)
			}
		}
	}},
	test{"SemaphoreMultiRoundTrips", func(t *testing.T, f *fixture) {
		f.multiSemaphore("g/a", 0, 2, 3, 2, T0.Add(time.Hour))
		if s := f.sem("g/a"); s.Multi != 2 || s.Blocked != 3 {
			t.Errorf("ReadSemaphore after SemaphoreSave = %+v, want 3 blocked, multi 2", s)
		}
		f.tx(func(ex driver.Executor) error {
			s, ok, err := ex.SemaphoreLock(f.ctx, "g/a", "q")
			if err != nil || !ok || s.Multi != 2 {
				t.Errorf("SemaphoreLock = %+v, %v, %v; want multi 2", s, ok, err)
			}
			return err
		})
		if top, err := f.ex().SemaphoreListMostBlocked(f.ctx, 5); err != nil || len(top) != 1 || top[0].Multi != 2 {
			t.Errorf("TopBlockedKeys = %+v, %v; want g/a with multi 2", top, err)
		}
		if ks, ok := f.d.Exec().(driver.KeySearcher); ok {
			if found, err := ks.KeySearch(f.ctx, "g/", "", 5); err != nil || len(found) != 1 || found[0].Multi != 2 {
				t.Errorf("SearchKeys = %+v, %v; want g/a with multi 2", found, err)
			}
		}
		limits := []driver.Limit{{Key: "g/a", To: 2, Duration: time.Minute}, {Key: "g/b", To: 1, Duration: time.Minute}}
		f.tx(func(ex driver.Executor) error {
			sems, err := ex.(driver.BatchLocker).SemaphoreLockMany(f.ctx, limits, []string{"q", "q"}, T0)
			if err != nil {
				return err
			}
			if len(sems) != 2 || sems[0].Multi != 2 || sems[1].Multi != 0 {
				t.Errorf("SemaphoreLockMany = %+v, want g/a multi 2, g/b (new) multi 0", sems)
				return nil
			}
			sems[0].Multi, sems[1].Multi, sems[1].Blocked = 1, 1, 1
			return ex.(driver.BatchLocker).SemaphoreSaveMany(f.ctx, sems)
		})
		if a, b := f.sem("g/a"), f.sem("g/b"); a.Multi != 1 || b.Multi != 1 || b.Blocked != 1 {
			t.Errorf("after SemaphoreSaveMany: g/a %+v, g/b %+v; want multi 1 each", a, b)
		}
	}},
	test{"HoldersOfAMultiKeyJobsOtherKey", func(t *testing.T, f *fixture) {
		pid := f.process("w1", T0, time.Second, time.Minute)
		ids := f.insert(T0,
			job("q", keyed("g/a", 2), also(2, "g/b")),                         // ready: holds g/b
			job("c", keyed("g/c", 2), also(2, "g/b")),                         // claimed: holds g/b
			job("q", keyed("g/b", 2)),                                         // ready: holds g/b by its first key
			job("q", keyed("g/d", 2), also(2, "g/b"), blocked, inLine("g/d")), // waiting: holds nothing
		)
		f.claim(f.ex(), "c", 1, pid, T0)
		holders, err := f.ex().HolderList(f.ctx, "g/b", 10)
		f.must(err)
		var got []int64
		for _, h := range holders {
			got = append(got, h.JobID)
		}
		if want := ids[:3]; !slices.Equal(got, want) {
			t.Fatalf("KeyHolders(g/b) = jobs %v, want %v (by id, a multi-key job under its second key)", got, want)
		}
		if h := holders[1]; !h.Running || h.ProcessID != pid || h.ProcessName != "w1" {
			t.Errorf("claimed multi-key holder = %+v, want running, claimed by w1", h)
		}
		// Its process deregistered, the claim is lost under each key.
		f.must(f.ex().ProcessDeregister(f.ctx, pid))
		for _, key := range []string{"g/c", "g/b"} {
			lost, err := f.ex().ClaimListReapableOfKey(f.ctx, key, T0.Add(time.Minute), 10*time.Second)
			f.must(err)
			if got := claimIDs(lost); !slices.Equal(got, []int64{ids[1]}) {
				t.Errorf("LostClaimsOfKey(%s) = jobs %v, want %v", key, got, ids[1:2])
			}
		}
	}},
	test{"PolicyKeysAndLatestLimitSeeFurtherKeys", func(t *testing.T, f *fixture) {
		more := func(keys ...driver.Limit) func(*driver.NewJob) {
			return func(j *driver.NewJob) { j.More = keys }
		}
		lim := func(key string, to int) driver.Limit { return driver.Limit{Key: key, To: to, Duration: time.Minute} }
		d7 := driver.Limit{Key: "g/d", To: 7, Duration: time.Second, MaxBlocked: 2}
		f.insert(T0,
			job("q", keyed("g/a", 0), more(lim("g/b", 3), lim("g/c", 0))),
			job("q", keyed("g/d", 2)),
			job("q", keyed("g/b", 4), more(d7)),
		)
		keys, err := f.ex().PolicyListKeys(f.ctx, "q")
		f.must(err)
		if want := []string{"g/a", "g/c"}; !slices.Equal(keys, want) {
			t.Errorf("PolicyKeys = %v, want %v (a further key without a limit too)", keys, want)
		}
		for key, want := range map[string]driver.Limit{"g/c": lim("g/c", 0), "g/d": d7, "g/b": lim("g/b", 4)} {
			l, q, ok, err := f.ex().JobLimitGetLatest(f.ctx, key)
			f.must(err)
			if !ok || q != "q" || l != want {
				t.Errorf("LatestJobLimit(%s) = %+v, %q, %v; want %+v (the newest job naming it, first or further)", key, l, q, ok, want)
			}
		}
		if _, _, ok, err := f.ex().JobLimitGetLatest(f.ctx, "g/none"); ok || err != nil {
			t.Errorf("LatestJobLimit of a key no job names: ok %v, %v", ok, err)
		}
	}},
	test{"RenewHeldRenewsEveryKeyOfAClaim", func(t *testing.T, f *fixture) {
		pid := f.process("w1", T0, time.Second, time.Minute)
		f.insert(T0, job("q", keyed("g/a", 1), also(1, "g/b")))
		f.claim(f.ex(), "q", 1, pid, T0)
		soon := T0.Add(10 * time.Second) // within half its one-minute Duration of the beat
		f.semaphore("g/a", 0, 1, 0, soon)
		f.semaphore("g/b", 0, 1, 0, soon)
		f.beat(pid, T0, T0)
		for _, key := range []string{"g/a", "g/b"} {
			f.sameTime(key+" expiry after the beat", f.sem(key).ExpiresAt, T0.Add(time.Minute))
		}
	}},
)

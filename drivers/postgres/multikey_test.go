package postgres

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// The PostgreSQL side of several concurrency keys per job, checked on
// the driver's own statements (the shared contract suite checks them on
// every driver).

var mkT0 = time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)

type mkFixture struct {
	t   *testing.T
	ctx context.Context
	d   *engine
}

func newMK(t *testing.T) *mkFixture {
	t.Helper()
	ctx := context.Background()
	d, err := Open(ctx, testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return &mkFixture{t: t, ctx: ctx, d: d.e()}
}

func (f *mkFixture) must(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *mkFixture) tx(fn func(ex driver.Executor) error) {
	f.t.Helper()
	f.must(driver.InTx(f.ctx, f.d, fn))
}

func lim(key string, to int) driver.Limit {
	return driver.Limit{Key: key, To: to, Duration: time.Minute}
}

// mkJob is a job of queue q keyed by keys (the first its Limit), in state.
func mkJob(state driver.JobState, prio int, keys ...driver.Limit) *driver.NewJob {
	j := &driver.NewJob{Kind: "mk", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1, ScheduledAt: mkT0, State: state, Priority: prio}
	if len(keys) > 0 {
		j.Limit, j.More = keys[0], keys[1:]
	}
	if len(j.More) == 0 {
		j.More = nil
	}
	return j
}

// inLine blocks j in the line of key.
func inLine(j *driver.NewJob, key string) *driver.NewJob {
	j.State, j.Line = driver.StateBlocked, key
	return j
}

func (f *mkFixture) insert(jobs ...*driver.NewJob) []int64 {
	f.t.Helper()
	f.tx(func(ex driver.Executor) error { return ex.JobInsertMany(f.ctx, mkT0, jobs) })
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

func (f *mkFixture) count(key string) driver.HolderCount {
	f.t.Helper()
	n, err := f.d.Exec().HolderCount(f.ctx, key)
	f.must(err)
	return n
}

func (f *mkFixture) semaphore(s driver.Semaphore) {
	f.t.Helper()
	f.tx(func(ex driver.Executor) error {
		if err := ex.SemaphoreEnsure(f.ctx, driver.Limit{Key: s.Key, To: s.Limit, Duration: s.Duration}, mkT0); err != nil {
			return err
		}
		return ex.SemaphoreSave(f.ctx, s)
	})
}

func (f *mkFixture) read(key string) driver.Semaphore {
	f.t.Helper()
	s, ok, err := f.d.Exec().SemaphoreGet(f.ctx, key)
	f.must(err)
	if !ok {
		f.t.Fatalf("no semaphore %q", key)
	}
	return s
}

func TestMultiKeyInsertWritesKeys(t *testing.T) {
	f := newMK(t)
	a, b, c := lim("g/a", 2), driver.Limit{Key: "g/b", To: 3, Duration: time.Second, OnConflict: driver.Discard, MaxBlocked: 7}, lim("h/c", 1)
	ids := f.insert(mkJob(driver.StateReady, 0, a, b, c), mkJob(driver.StateReady, 0, a), inLine(mkJob(driver.StateReady, 0, b, a), "g/a"))
	for i, want := range [][]driver.Limit{{b, c}, nil, {a}} {
		info, ok, err := f.d.Exec().JobGet(f.ctx, ids[i])
		f.must(err)
		if !ok || !reflect.DeepEqual(info.More, want) {
			t.Errorf("job %d: More %+v, want %+v", i, info.More, want)
		}
	}
	var rows [][2]any
	r, err := f.d.pool.Query(f.ctx, `SELECT job_id, key FROM bq_job_keys ORDER BY job_id, key`)
	f.must(err)
	for r.Next() {
		var id int64
		var k string
		f.must(r.Scan(&id, &k))
		rows = append(rows, [2]any{id, k})
	}
	f.must(r.Err())
	want := [][2]any{{ids[0], "g/a"}, {ids[0], "g/b"}, {ids[0], "h/c"}, {ids[2], "g/a"}, {ids[2], "g/b"}}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("job_keys %v, want %v", rows, want)
	}
	if s, _, err := f.d.Exec().LineGetKey(f.ctx, ids[2]); err != nil || s != "g/a" {
		t.Errorf("blocked row of the third job in %q, %v; want the line it was given, g/a", s, err)
	}

	var claims []*driver.Claim
	f.tx(func(ex driver.Executor) error {
		claims, err = ex.ReadyClaim(f.ctx, driver.ClaimParams{Queue: "q", Max: 10, ProcessID: 1, Now: mkT0})
		return err
	})
	if len(claims) != 2 || claims[0].ID != ids[0] || !reflect.DeepEqual(claims[0].More, []driver.Limit{b, c}) {
		t.Errorf("claims %+v; want the two ready jobs, the first with its More", claims)
	}

	// ListJobs by exact key finds a job that names the key second.
	list := func(key string) []int64 {
		got, err := f.d.Exec().JobList(f.ctx, driver.JobFilter{Key: key, Max: 10})
		f.must(err)
		var out []int64
		for _, j := range got {
			out = append(out, j.ID)
		}
		slices.Sort(out)
		return out
	}
	if got := list("g/b"); !reflect.DeepEqual(got, []int64{ids[0], ids[2]}) {
		t.Errorf("ListJobs(key g/b) = %v, want %v", got, []int64{ids[0], ids[2]})
	}
	if got := list("h/c"); !reflect.DeepEqual(got, []int64{ids[0]}) {
		t.Errorf("ListJobs(key h/c) = %v, want %v", got, []int64{ids[0]})
	}
}

func TestMultiKeyCountHolders(t *testing.T) {
	f := newMK(t)
	a, b, c := lim("g/a", 5), lim("g/b", 5), lim("g/c", 5)
	ids := f.insert(
		mkJob(driver.StateReady, 0, a, b),                               // holds a and b
		mkJob(driver.StateReady, 0, c, a),                               // claimed below: holds c and a
		inLine(mkJob(driver.StateReady, 0, a, b, c), "g/b"),             // waits in b's line: holds none
		inLine(mkJob(driver.StateReady, 0, b, c), driver.RateLine("r")), // in a rate line: holds b and c
		inLine(mkJob(driver.StateReady, 0, b), "g/b"),                   // single-key, in b's line
	)
	f.tx(func(ex driver.Executor) error {
		_, err := ex.ReadyClaim(f.ctx, driver.ClaimParams{Queue: "q", Max: 1, ProcessID: 1, Now: mkT0})
		return err
	})
	for key, want := range map[string]driver.HolderCount{
		"g/a": {Holders: 2},
		"g/b": {Holders: 2, Blocked: 2, Multi: 1},
		"g/c": {Holders: 2},
	} {
		if got := f.count(key); got != want {
			t.Errorf("CountHolders(%s) = %+v, want %+v", key, got, want)
		}
	}
	if got := f.count(driver.RateLine("r")); got != (driver.HolderCount{Blocked: 1, Multi: 1}) {
		t.Errorf("CountHolders(rate line) = %+v, want 1 blocked, 1 multi", got)
	}
	// Finished (its claim not yet deleted), the claimed job holds nothing.
	f.tx(func(ex driver.Executor) error { return ex.JobFinish(f.ctx, ids[1], mkT0, false) })
	if got := f.count("g/c"); got.Holders != 1 {
		t.Errorf("CountHolders(g/c) after its claimed holder finished = %+v, want 1 holder (the rate line's)", got)
	}
}

func TestMultiKeyLineHeadsAndMove(t *testing.T) {
	f := newMK(t)
	a, b := lim("g/a", 1), driver.Limit{Key: "g/b", To: 2, Duration: 3 * time.Second, OnConflict: driver.Discard, MaxBlocked: 4}
	ids := f.insert(
		inLine(mkJob(driver.StateReady, 0, a, b), "g/b"),
		inLine(mkJob(driver.StateReady, 5, b), "g/b"),
		inLine(mkJob(driver.StateReady, 0, b, a), "g/b"),
		inLine(mkJob(driver.StateReady, 9, a), "g/a"),
	)
	heads, err := f.d.Exec().LineListHeads(f.ctx, "g/b", 2)
	f.must(err)
	want := []driver.LineHead{
		{JobID: ids[1], Queue: "q", Priority: 5, Keys: []driver.Limit{b}, Slots: 1},
		{JobID: ids[0], Queue: "q", Priority: 0, Keys: []driver.Limit{a, b}, Slots: 1},
	}
	if !reflect.DeepEqual(heads, want) {
		t.Errorf("LineHeads(g/b, 2) = %+v, want %+v", heads, want)
	}
	heads, err = f.d.Exec().LineListHeads(f.ctx, "g/b", 10)
	f.must(err)
	if len(heads) != 3 || heads[2].JobID != ids[2] || !reflect.DeepEqual(heads[2].Keys, []driver.Limit{b, a}) {
		t.Errorf("LineHeads(g/b, 10) = %+v; want the three, the last with keys b, a", heads)
	}

	f.tx(func(ex driver.Executor) error { return ex.LineMove(f.ctx, ids[0], "g/b", "g/a") })
	heads, err = f.d.Exec().LineListHeads(f.ctx, "g/a", 10)
	f.must(err)
	if len(heads) != 2 || heads[0].JobID != ids[3] || heads[1].JobID != ids[0] {
		t.Errorf("after the move, LineHeads(g/a) = %+v; want jobs %d, %d", heads, ids[3], ids[0])
	}
	if n := f.count("g/b"); n.Blocked != 2 || n.Multi != 1 {
		t.Errorf("after the move, CountHolders(g/b) = %+v; want 2 blocked, 1 multi", n)
	}
	err = driver.InTx(f.ctx, f.d, func(ex driver.Executor) error { return ex.LineMove(f.ctx, ids[0], "g/b", "g/a") })
	if err == nil {
		t.Errorf("MoveToLine from a line the job is not in: no error")
	}
	err = driver.InTx(f.ctx, f.d, func(ex driver.Executor) error { return ex.LineMove(f.ctx, 99999, "g/a", "g/b") })
	if err == nil {
		t.Errorf("MoveToLine of a missing job: no error")
	}
}

func TestMultiKeyReleaseManyLeavesLine(t *testing.T) {
	f := newMK(t)
	a, b := lim("g/a", 2), lim("g/b", 2)
	ids := f.insert(
		inLine(mkJob(driver.StateReady, 0, a, b), "g/a"),
		inLine(mkJob(driver.StateReady, 0, a), "g/a"),
		inLine(mkJob(driver.StateReady, 0, b), "g/b"),
	)
	f.semaphore(driver.Semaphore{Key: "g/a", Value: 0, Limit: 2, Blocked: 2, Multi: 1, Duration: time.Minute, ExpiresAt: mkT0})
	f.semaphore(driver.Semaphore{Key: "g/b", Value: 0, Limit: 2, Blocked: 1, Duration: time.Minute, ExpiresAt: mkT0})
	var got []driver.Promotion
	f.tx(func(ex driver.Executor) (err error) {
		got, err = ex.SemaphoreReleaseMany(f.ctx, []string{"g/a", "g/b"}, []int{1, 1}, mkT0)
		return err
	})
	if len(got) != 2 || !got[0].LineLeft || got[0].Jobs != 0 || got[1].LineLeft || got[1].Jobs != 1 {
		t.Fatalf("ReleaseMany = %+v; want g/a's line left, one job of g/b promoted", got)
	}
	if s := f.read("g/a"); s.Value != 1 || s.Blocked != 2 || s.Multi != 1 {
		t.Errorf("g/a after release: %+v; want 1 free, 2 blocked, 1 multi", s)
	}
	if s := f.read("g/b"); s.Value != 0 || s.Blocked != 0 {
		t.Errorf("g/b after release: %+v; want 0 free, 0 blocked", s)
	}
	for i, want := range []driver.JobState{driver.StateBlocked, driver.StateBlocked, driver.StateReady} {
		info, _, err := f.d.Exec().JobGet(f.ctx, ids[i])
		f.must(err)
		if info.State != want {
			t.Errorf("job %d is %s, want %s", i, info.State, want)
		}
	}
}

func TestMultiKeyDeleteIdleKeepsNamedSemaphores(t *testing.T) {
	f := newMK(t)
	a, b := lim("g/a", 1), lim("g/b", 1)
	f.insert(inLine(mkJob(driver.StateReady, 0, a, b), "g/a"))
	past := mkT0.Add(-time.Hour)
	// Each idle and expired; g/b only a waiting multi-key job names, g/m
	// counts a multi-key job in its line, g/x nothing.
	f.semaphore(driver.Semaphore{Key: "g/b", Value: 1, Limit: 1, Duration: time.Minute, ExpiresAt: past})
	f.semaphore(driver.Semaphore{Key: "g/m", Value: 1, Limit: 1, Multi: 1, Duration: time.Minute, ExpiresAt: past})
	f.semaphore(driver.Semaphore{Key: "g/x", Value: 1, Limit: 1, Duration: time.Minute, ExpiresAt: past})
	var n int
	f.tx(func(ex driver.Executor) (err error) {
		n, err = ex.SemaphoreDeleteIdle(f.ctx, mkT0, 10)
		return err
	})
	if n != 1 {
		t.Errorf("DeleteIdleSemaphores = %d, want 1 (g/x)", n)
	}
	for key, want := range map[string]bool{"g/b": true, "g/m": true, "g/x": false} {
		if _, ok, err := f.d.Exec().SemaphoreGet(f.ctx, key); err != nil || ok != want {
			t.Errorf("semaphore %s exists %v, %v; want %v", key, ok, err, want)
		}
	}
}

func TestMultiKeySemaphoreMultiRoundTrips(t *testing.T) {
	f := newMK(t)
	f.semaphore(driver.Semaphore{Key: "g/a", Value: 0, Limit: 1, Blocked: 3, Multi: 2, Duration: time.Minute, ExpiresAt: mkT0})
	f.tx(func(ex driver.Executor) error {
		s, ok, err := ex.SemaphoreLock(f.ctx, "g/a", "q")
		if err != nil {
			return err
		}
		if !ok || s.Multi != 2 {
			t.Errorf("SemaphoreLock: %+v, %v; want Multi 2", s, ok)
		}
		sems, err := ex.(driver.BatchLocker).SemaphoreLockMany(f.ctx, []driver.Limit{lim("g/a", 1), lim("g/b", 1)}, []string{"q", "q"}, mkT0)
		if err != nil {
			return err
		}
		if len(sems) != 2 || sems[0].Multi != 2 || sems[1].Multi != 0 {
			t.Errorf("SemaphoreLockMany: %+v; want Multi 2, 0", sems)
		}
		sems[0].Multi, sems[1].Multi, sems[1].Blocked = 1, 4, 4
		return ex.(driver.BatchLocker).SemaphoreSaveMany(f.ctx, sems)
	})
	if s := f.read("g/a"); s.Multi != 1 {
		t.Errorf("g/a after SaveMany: Multi %d, want 1", s.Multi)
	}
	if s := f.read("g/b"); s.Multi != 4 {
		t.Errorf("g/b after SaveMany: Multi %d, want 4", s.Multi)
	}
	top, err := f.d.Exec().SemaphoreListMostBlocked(f.ctx, 10)
	f.must(err)
	if len(top) != 2 || top[0].Key != "g/b" || top[0].Multi != 4 || top[1].Multi != 1 {
		t.Errorf("TopBlockedKeys: %+v; want g/b (Multi 4), g/a (Multi 1)", top)
	}
	found, err := f.d.Exec().(driver.KeySearcher).KeySearch(f.ctx, "g/", "", 10)
	f.must(err)
	if len(found) != 2 || found[0].Multi != 1 || found[1].Multi != 4 {
		t.Errorf("SearchKeys: %+v; want Multi 1, 4", found)
	}
}

func TestMultiKeyHoldersOfSecondKey(t *testing.T) {
	f := newMK(t)
	a, b := lim("g/a", 2), lim("g/b", 2)
	ids := f.insert(mkJob(driver.StateReady, 0, a, b), mkJob(driver.StateReady, 0, b), inLine(mkJob(driver.StateReady, 0, a, b), "g/a"))
	// Claimed by process 7, which never registered: its claim is lost.
	f.tx(func(ex driver.Executor) error {
		_, err := ex.ReadyClaim(f.ctx, driver.ClaimParams{Queue: "q", Max: 1, ProcessID: 7, Now: mkT0})
		return err
	})
	holders, err := f.d.Exec().HolderList(f.ctx, "g/b", 10)
	f.must(err)
	if len(holders) != 2 || holders[0].JobID != ids[0] || !holders[0].Running || holders[1].JobID != ids[1] || holders[1].Running {
		t.Errorf("KeyHolders(g/b) = %+v; want the claimed multi-key job, then the ready one", holders)
	}
	if holders, err := f.d.Exec().HolderList(f.ctx, "g/b", 1); err != nil || len(holders) != 1 || holders[0].JobID != ids[0] {
		t.Errorf("KeyHolders(g/b, 1) = %+v, %v; want the first only", holders, err)
	}
	f.tx(func(ex driver.Executor) error {
		lost, err := ex.ClaimListReapableOfKey(f.ctx, "g/b", mkT0, time.Minute)
		if err != nil {
			return err
		}
		if len(lost) != 1 || lost[0].ID != ids[0] {
			t.Errorf("LostClaimsOfKey(g/b) = %+v; want the multi-key job's claim", lost)
		}
		return nil
	})
}

func TestMultiKeyRenewsEveryKey(t *testing.T) {
	f := newMK(t)
	pid, err := f.d.Exec().ProcessRegister(f.ctx, driver.Process{Kind: "worker", Name: "w", Hostname: "h", PID: 1, Queues: "q",
		HeartbeatInterval: time.Second, DeadAfter: time.Minute, StartedAt: mkT0})
	f.must(err)
	a, b := lim("g/a", 2), lim("g/b", 2)
	f.insert(mkJob(driver.StateReady, 0, a, b))
	for _, k := range []string{"g/a", "g/b"} {
		f.semaphore(driver.Semaphore{Key: k, Value: 1, Limit: 2, Duration: time.Minute, ExpiresAt: mkT0})
	}
	f.tx(func(ex driver.Executor) error {
		_, err := ex.ReadyClaim(f.ctx, driver.ClaimParams{Queue: "q", Max: 1, ProcessID: pid, Now: mkT0})
		return err
	})
	at := mkT0.Add(50 * time.Second)
	f.must(f.d.Exec().SemaphoreRenewHeld(f.ctx, pid, at, 0.5))
	for _, k := range []string{"g/a", "g/b"} {
		if s := f.read(k); !s.ExpiresAt.Equal(at.Add(time.Minute)) {
			t.Errorf("%s expires at %v, want %v (renewed)", k, s.ExpiresAt, at.Add(time.Minute))
		}
	}
}

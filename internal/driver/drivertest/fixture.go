package drivertest

// The fixture: one test's database, and the helpers its tests fill and
// read it with.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
)

// fixture is one test's database and the helpers that fill and read it.
type fixture struct {
	t    *testing.T
	d    driver.Driver
	ctx  context.Context
	open func(t *testing.T) driver.Driver
}

func newFixture(t *testing.T, open func(t *testing.T) driver.Driver) *fixture {
	return &fixture{t: t, d: open(t), ctx: context.Background(), open: open}
}

// other is a second fixture on a fresh database of the same driver.
func (f *fixture) other() *fixture { return newFixture(f.t, f.open) }

// ex runs statements outside any transaction, each method as the engine
// would (see autoTx).
func (f *fixture) ex() driver.Executor { return autoTx{Executor: f.d.Exec(), d: f.d} }

// rowLocks reports whether the database locks rows, so a second open
// transaction can run beside the first (PostgreSQL, MySQL).
func (f *fixture) rowLocks() bool { return f.d.Dialect() != driver.SQLite }

// needRowLocks skips a test of one transaction beside another.
func (f *fixture) needRowLocks() {
	f.t.Helper()
	if !f.rowLocks() {
		f.t.Skip("SQLite has no row locks: a second write transaction waits at BEGIN for the first to end")
	}
}

// must fails the test on err.
func (f *fixture) must(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

// tx runs fn in a transaction bq owns, as the engine does (driver.InTx).
func (f *fixture) tx(fn func(ex driver.Executor) error) {
	f.t.Helper()
	f.must(driver.InTx(f.ctx, f.d, fn))
}

// begin opens a transaction the test ends; one it leaves open is rolled
// back when the test ends.
func (f *fixture) begin() driver.Tx {
	f.t.Helper()
	tx, err := f.d.Begin(f.ctx)
	f.must(err)
	own := &openTx{Tx: tx}
	f.t.Cleanup(func() {
		if !own.ended {
			_ = tx.Rollback(context.Background())
		}
	})
	return own
}

// openTx is a transaction a test began: ended once it is committed or
// rolled back, so the cleanup leaves it alone (the contract says nothing
// of ending a transaction twice).
type openTx struct {
	driver.Tx
	ended bool
}

func (t *openTx) Commit(ctx context.Context) error {
	t.ended = true
	return t.Tx.Commit(ctx)
}

func (t *openTx) Rollback(ctx context.Context) error {
	t.ended = true
	return t.Tx.Rollback(ctx)
}

// quick is a context for a call that must not wait on another
// transaction's locks: it gives up long before any lock wait would.
func (f *fixture) quick() context.Context {
	ctx, cancel := context.WithTimeout(f.ctx, 5*time.Second)
	f.t.Cleanup(cancel)
	return ctx
}

// waits reports whether call is still waiting after a while, and returns
// a function that waits for it to end and gives its error. Correct
// drivers never make it report false; a driver that does not wait is
// caught.
func waits(call func() error) (bool, func() error) {
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		return false, func() error { return err }
	case <-time.After(300 * time.Millisecond):
		return true, func() error { return <-done }
	}
}

// together runs fn n times at once, each started as close to the others
// as goroutines allow, and returns the errors.
func together(n int, fn func(i int) error) error {
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = fn(i)
		}()
	}
	close(start)
	wg.Wait()
	return errors.Join(errs...)
}

// job is a fixture job: ready in queue q at priority 0, due at T0, one
// attempt; opts change it.
func job(q string, opts ...func(*driver.NewJob)) *driver.NewJob {
	j := &driver.NewJob{Kind: "drivertest.job", Queue: q, Args: []byte(`{}`), MaxAttempts: 1, ScheduledAt: T0, State: driver.StateReady}
	for _, o := range opts {
		o(j)
	}
	return j
}

func prio(p int) func(*driver.NewJob) { return func(j *driver.NewJob) { j.Priority = p } }

// keyed gives the job a key with limit to and a one-minute Duration.
func keyed(key string, to int) func(*driver.NewJob) {
	return func(j *driver.NewJob) { j.Limit = driver.Limit{Key: key, To: to, Duration: time.Minute} }
}

// blocked stores the job blocked (give it a key too).
func blocked(j *driver.NewJob) { j.State = driver.StateBlocked }

// dueAt stores the job scheduled, due at at.
func dueAt(at time.Time) func(*driver.NewJob) {
	return func(j *driver.NewJob) { j.State, j.ScheduledAt = driver.StateScheduled, at }
}

// named sets the job's args to {"n":"name"}, to tell it apart.
func named(name string) func(*driver.NewJob) {
	return func(j *driver.NewJob) { j.Args = fmt.Appendf(nil, `{"n":%q}`, name) }
}

// jobs is n fixture jobs alike.
func jobs(n int, q string, opts ...func(*driver.NewJob)) []*driver.NewJob {
	out := make([]*driver.NewJob, n)
	for i := range out {
		out[i] = job(q, opts...)
	}
	return out
}

// insert inserts jobs at now in one transaction and returns their ids.
func (f *fixture) insert(now time.Time, jobs ...*driver.NewJob) []int64 {
	f.t.Helper()
	f.tx(func(ex driver.Executor) error { return ex.JobInsertMany(f.ctx, now, jobs) })
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

// found is a read of something that must exist: a value, whether it
// does, and the error.
type found[T any] struct {
	v   T
	ok  bool
	err error
}

func find[T any](v T, ok bool, err error) found[T] { return found[T]{v, ok, err} }

// of returns the value, failing the test unless what was found.
func (r found[T]) of(f *fixture, what string) T {
	f.t.Helper()
	f.must(r.err)
	if !r.ok {
		f.t.Fatalf("%s does not exist", what)
	}
	return r.v
}

// get reads a job that must exist.
func (f *fixture) get(id int64) *driver.JobInfo {
	f.t.Helper()
	return find(f.ex().JobGet(f.ctx, id)).of(f, fmt.Sprintf("job %d", id))
}

// state is where job id is.
func (f *fixture) state(id int64) driver.JobState {
	f.t.Helper()
	return f.get(id).State
}

// wantState fails unless each job is in state want.
func (f *fixture) wantState(want driver.JobState, ids ...int64) {
	f.t.Helper()
	for _, id := range ids {
		if got := f.state(id); got != want {
			f.t.Errorf("job %d is %q, want %q", id, got, want)
		}
	}
}

// claim claims up to max ready jobs of q for process pid at now.
func (f *fixture) claim(ex driver.Executor, q string, max int, pid int64, now time.Time) []*driver.Claim {
	f.t.Helper()
	claims, err := ex.ReadyClaim(f.ctx, driver.ClaimParams{Queue: q, Max: max, ProcessID: pid, Now: now})
	f.must(err)
	return claims
}

// engineClaim claims as a worker does, through the engine's claim rule.
func (f *fixture) engineClaim(q string, max int, pid int64, now time.Time) []*driver.Claim {
	f.t.Helper()
	claims, err := lifecycle.Claim(f.ctx, f.d, driver.ClaimParams{Queue: q, Max: max, ProcessID: pid, Now: now})
	f.must(err)
	return claims
}

// claimIDs are the claimed jobs' ids, in the order returned.
func claimIDs(claims []*driver.Claim) []int64 {
	ids := make([]int64, len(claims))
	for i, c := range claims {
		ids[i] = c.ID
	}
	return ids
}

// sorted returns ids in ascending order.
func sorted(ids []int64) []int64 { return slices.Sorted(slices.Values(ids)) }

// sem reads key's semaphore, which must exist.
func (f *fixture) sem(key string) driver.Semaphore {
	f.t.Helper()
	return find(f.ex().SemaphoreGet(f.ctx, key)).of(f, "semaphore "+key)
}

// semaphore creates key's semaphore and saves it with value free slots
// of limit, blocked waiting, a one-minute Duration, expiring at expires.
func (f *fixture) semaphore(key string, value, limit, blocked int, expires time.Time) {
	f.t.Helper()
	f.tx(func(ex driver.Executor) error {
		if err := ex.SemaphoreEnsure(f.ctx, driver.Limit{Key: key, To: limit, Duration: time.Minute}, T0); err != nil {
			return err
		}
		return ex.SemaphoreSave(f.ctx, driver.Semaphore{Key: key, Value: value, Limit: limit, Blocked: blocked,
			Duration: time.Minute, ExpiresAt: expires})
	})
}

// process registers a worker that started at started, beating every hb,
// expecting to be declared dead after deadAfter of silence.
func (f *fixture) process(name string, started time.Time, hb, deadAfter time.Duration) int64 {
	f.t.Helper()
	id, err := f.ex().ProcessRegister(f.ctx, driver.Process{Kind: "worker", Name: name, Hostname: "drivertest",
		PID: 4242, Queues: "q", HeartbeatInterval: hb, DeadAfter: deadAfter, StartedAt: started})
	f.must(err)
	return id
}

// beat records a heartbeat of pid at at, in a run of beats since since.
func (f *fixture) beat(pid int64, at, since time.Time) {
	f.t.Helper()
	landed, err := f.ex().ProcessHeartbeat(f.ctx, driver.Beat{ProcessID: pid, At: at, BeatingSince: since})
	f.must(err)
	if !landed {
		f.t.Fatalf("heartbeat of process %d did not land", pid)
	}
	f.must(f.ex().SemaphoreRenewHeld(f.ctx, pid, at, RenewBelow))
}

// RenewBelow is the engine's renewal threshold (process.go's renewBelow).
const RenewBelow = 0.5

// sameTime fails unless got and want are the same instant.
func (f *fixture) sameTime(what string, got, want time.Time) {
	f.t.Helper()
	if !got.Equal(want) {
		f.t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// sameJSON reports whether a and b are the same JSON value (PostgreSQL
// stores args as jsonb, which respaces them).
func sameJSON(a, b []byte) bool {
	var va, vb any
	return json.Unmarshal(a, &va) == nil && json.Unmarshal(b, &vb) == nil && reflect.DeepEqual(va, vb)
}

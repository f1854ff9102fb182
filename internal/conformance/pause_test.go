package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
)

// Pauses are not crashes (DESIGN.md): a process frozen by SIGSTOP — a GC
// pause, a frozen VM, a suspended laptop — must stop its own runs before
// any other process may take their claims or slots, even when frozen
// inside one of bq's own transactions. pause_report_test.go measures the
// runs.
var _ = register(
	scenario{"PausedHolderDurationPath", testPausedHolderDurationPath},
	scenario{"PausedBeyondDeadAfter", testPausedBeyondDeadAfter},
	scenario{"FrozenInsideTransaction", testFrozenInsideTransaction},
	scenario{"HeartbeatNotStarved", testHeartbeatNotStarved},
	scenario{"ResumedRunSeesCtxAtNextCheck", testResumedRunSeesCtxAtNextCheck},
)

var (
	// pauseHolderJob's slot is reclaimed by the Duration failsafe once its
	// holder's process has been silent for 3 s, long before ProcessDeadAfter.
	pauseHolderJob = bq.Define("c.pause.holder", behave, bq.JobOptions[Args]{
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 1, Duration: 3 * time.Second}})
	pause3Job = bq.Define("c.pause.three", behave, bq.JobOptions[Args]{
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 3}})
)

// fleet stops the given helper processes once, resuming any that is
// stopped first; it also runs when the test ends.
func (h *harness) fleet(cmds ...*exec.Cmd) (stop func()) {
	var once sync.Once
	stop = func() {
		once.Do(func() {
			for _, c := range cmds {
				_ = c.Process.Signal(syscall.SIGCONT)
			}
			h.stop(cmds...)
		})
	}
	h.t.Cleanup(stop)
	return stop
}

// resume sends SIGCONT and returns when it was sent.
func (h *harness) resume(cmd *exec.Cmd) time.Time {
	h.t.Helper()
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		h.t.Fatal(err)
	}
	return time.Now()
}

// waitProcesses waits until n processes are registered.
func (h *harness) waitProcesses(n int) {
	h.t.Helper()
	h.eventually(20*time.Second, fmt.Sprintf("%d processes to register", n), func() bool {
		return h.count(`SELECT count(*) FROM bq_processes`) >= n
	})
}

// waitFinished waits until n jobs are finished, logging the state if not.
func (h *harness) waitFinished(n int, timeout time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for h.count(`SELECT count(*) FROM bq_jobs WHERE finished_at IS NOT NULL`) < n {
		if time.Now().After(deadline) {
			h.dumpState()
			h.t.Fatalf("timed out after %s waiting for %d jobs to finish", timeout, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkDrained asserts that every job ended completed exactly once in
// the database's eyes, that nothing is left in any state, and that every
// semaphore is whole.
func (h *harness) checkDrained(ids []int64) {
	h.t.Helper()
	for _, id := range ids {
		if st := h.state(id); st != bq.StateCompleted {
			h.t.Errorf("job %d is %s, want completed", id, st)
		}
	}
	for _, table := range []string{"bq_ready_executions", "bq_blocked_executions", "bq_claimed_executions",
		"bq_scheduled_executions", "bq_failed_executions"} {
		if n := h.count(`SELECT count(*) FROM ` + table); n != 0 {
			h.t.Errorf("%d rows left in %s after the drain", n, table)
		}
	}
	if n := h.count(`SELECT count(*) FROM bq_semaphores WHERE value <> lim OR blocked <> 0`); n != 0 {
		h.t.Errorf("%d semaphores not whole after the drain", n)
	}
	h.checkSemaphores()
}

// endRunsAfter ends the poll-ctx runs waiting for file (Args.Until)
// after d: a run the pause caught that went on past the resume has run d
// beside its re-run by then, which the overlap checks catch.
func endRunsAfter(t *testing.T, file string, d time.Duration) {
	t.Helper()
	time.Sleep(d)
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// testPausedHolderDurationPath: job A of a To=1 key with Duration 3 s
// runs in W1; B of the same key waits behind it; W2 runs workers and a
// dispatcher. ProcessDeadAfter is 60 s, so only the Duration failsafe can
// take A's slot. W1 is paused for 7.5 s: the key's expiry is renewed at
// half its Duration and a dispatcher that finds it expired while its
// holder has been silent for less than Duration extends it, so the slot
// is reclaimed at the first expiry after 3 s of silence, up to 6 s into
// the pause. W1's runs must stop before that: on resume A's run sees ctx
// end at once, so A's re-run and B never run beside it. A completes
// exactly once.
func testPausedHolderDurationPath(t *testing.T, h *harness) {
	env := []string{"BQ_HEARTBEAT=500ms", "BQ_DEAD_AFTER=60s"}
	w1 := h.spawn("workers", 1, env...)
	// Still running when W1 resumes, and its re-run too, until the test
	// has watched a second past the resume.
	enough := filepath.Join(t.TempDir(), "enough")
	a := enqueue(t, h, pauseHolderJob, Args{Key: "ph", Mode: "poll-ctx", SleepMS: 30000, Until: enough})
	h.waitState(a.ID, bq.StateRunning)
	b := enqueue(t, h, pauseHolderJob, Args{Key: "ph", Mode: "poll-ctx", SleepMS: 500})
	if b.State != bq.StateBlocked {
		t.Fatalf("B was not blocked behind A: %+v", b)
	}
	w2 := h.spawn("worker", 1, env...)
	stop := h.fleet(w1, w2)
	h.waitProcesses(2)
	time.Sleep(time.Second) // A runs a while; W2's dispatcher is up

	w := window{pid: w1.Process.Pid, stop: h.pause(w1)}
	time.Sleep(7500 * time.Millisecond)
	w.cont = h.resume(w1)
	endRunsAfter(t, enough, time.Second)
	h.waitFinished(2, 60*time.Second)
	stop()

	limits := map[string]int{"ph": 1}
	rep := analysePause(h.outcomeRuns(t), w)
	rep.log(t, h.db, limits)
	rep.check(t, limits)
	h.checkDrained([]int64{a.ID, b.ID})
}

// testPausedBeyondDeadAfter: three jobs of a To=3 key run in W1, three
// more wait; W2 runs workers and a dispatcher. W1 is paused for 5 s,
// beyond ProcessDeadAfter (3 s): its claims are reaped and run again on
// W2, and once resumed its own runs must stop at their next check of ctx.
// At most 3 runs of the key at once (the pause excluded), every job
// completed exactly once.
func testPausedBeyondDeadAfter(t *testing.T, h *harness) {
	env := chaosEnv() // heartbeat 250ms, dead after 3s
	w1 := h.spawn("workers", 3, env...)
	var ids []int64
	enough := filepath.Join(t.TempDir(), "enough")
	for range 3 {
		// Still running when W1 resumes, and their re-runs too, until the
		// test has watched a second past the resume.
		res := enqueue(t, h, pause3Job, Args{Key: "p3", Mode: "poll-ctx", SleepMS: 30000, Until: enough})
		ids = append(ids, res.ID)
	}
	for _, id := range ids {
		h.waitState(id, bq.StateRunning)
	}
	for range 3 {
		res := enqueue(t, h, pause3Job, Args{Key: "p3", Mode: "poll-ctx", SleepMS: 1000})
		if res.State != bq.StateBlocked {
			t.Fatalf("job %d was not blocked behind the three running: %+v", res.ID, res)
		}
		ids = append(ids, res.ID)
	}
	w2 := h.spawn("worker", 3, env...)
	stop := h.fleet(w1, w2)
	h.waitProcesses(2)
	time.Sleep(500 * time.Millisecond)

	w := window{pid: w1.Process.Pid, stop: h.pause(w1)}
	time.Sleep(5 * time.Second)
	w.cont = h.resume(w1)
	endRunsAfter(t, enough, time.Second)
	h.waitFinished(len(ids), 60*time.Second)
	stop()

	limits := map[string]int{"p3": 3}
	rep := analysePause(h.outcomeRuns(t), w)
	rep.log(t, h.db, limits)
	rep.check(t, limits)
	h.checkDrained(ids)
}

// testFrozenInsideTransaction: three worker processes (workers and
// dispatcher, 2 slots each) drain 150 short jobs over To=1 and To=2 keys
// and unkeyed ones. W1 is frozen inside one of bq's own transactions (the
// driver.BeforeCommit hook) for 15 s, beyond ProcessDeadAfter (10 s). On
// SQLite it holds the file's write lock meanwhile, so the fleet cannot
// write (inherent); on PostgreSQL and MariaDB it holds row locks until it
// resumes or the server rolls its transaction back. A job completed by a
// live worker never runs again, no key exceeds its limit (the freeze
// excluded), nothing is lost.
func testFrozenInsideTransaction(t *testing.T, h *harness) {
	ctx := context.Background()
	limits := map[string]int{"f1": 1, "f2": 1, "f3": 2, "f4": 2}
	byJob := map[*bq.Job[Args]][]Args{}
	for i := range 150 {
		a := Args{Test: h.test, Seq: i, Mode: "poll-ctx", SleepMS: 20 + rand.IntN(41)}
		job := unkeyedJob
		if k := i % 5; k < 4 {
			a.Key = fmt.Sprintf("f%d", k+1)
			job = limit1Job
			if limits[a.Key] == 2 {
				job = limit2Job
			}
		}
		byJob[job] = append(byJob[job], a)
	}
	var ids []int64
	for job, args := range byJob {
		res, err := job.EnqueueMany(ctx, h.client, args)
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		for _, r := range res {
			ids = append(ids, r.ID)
		}
	}

	env := []string{"BQ_HEARTBEAT=500ms", "BQ_DEAD_AFTER=10s"}
	freeze := filepath.Join(t.TempDir(), "freeze")
	w1 := h.spawn("worker", 2, append(env, "BQ_FREEZE_FILE="+freeze)...)
	w2 := h.spawn("worker", 2, env...)
	w3 := h.spawn("worker", 2, env...)
	stop := h.fleet(w1, w2, w3)
	h.eventually(30*time.Second, "20 runs", func() bool { return h.count(`SELECT count(*) FROM test_runs`) >= 20 })
	if err := os.WriteFile(freeze, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h.eventually(20*time.Second, "W1 to reach a commit", func() bool {
		_, err := os.Stat(freeze + ".frozen")
		return err == nil
	})
	if err := w1.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	w := window{pid: w1.Process.Pid, stop: time.Now()}
	if stack, err := os.ReadFile(freeze + ".frozen"); err == nil {
		t.Logf("%s: W1 frozen committing: %s", h.db, bqFrames(string(stack)))
	}
	time.Sleep(15 * time.Second)
	w.cont = h.resume(w1)
	h.waitFinished(len(ids), 90*time.Second)
	drained := time.Since(w.cont)
	stop()

	runs := h.outcomeRuns(t)
	rep := analysePause(slices.Clone(runs), w)
	rep.log(t, h.db, limits)
	first := logFlow(t, h.db, runs, w, limits)
	t.Logf("%s: drained %s after the resume", h.db, drained.Round(time.Millisecond))
	rep.check(t, limits)
	h.checkDrained(ids)
	if h.db == "sqlite" {
		return // the frozen writer holds the file's lock until it resumes
	}
	// The server rolls the frozen transaction back after TxIdleTimeout
	// (10 s): every key flows again, and the frozen worker's jobs run
	// elsewhere (it is dead after 10 s of silence), well before it
	// resumes at 15 s.
	bound := driver.TxIdleTimeout + 3*time.Second
	for key := range limits {
		if f, ok := first[key]; !ok || f.Sub(w.stop) > bound {
			t.Errorf("key %s: no job started within %s of the freeze (first %v after): blocked work must flow once the server rolls the frozen transaction back", key, bound, f.Sub(w.stop))
		}
	}
	for _, d := range rep.rerunAfter {
		if d > bound {
			t.Errorf("a job of the frozen worker ran again only %s after the freeze, want within %s: the reaper must get past its locks", d, bound)
		}
	}
}

// bqFrames picks the bq functions out of a goroutine stack, innermost
// first, the test's own hook left out.
func bqFrames(stack string) string {
	var out []string
	for _, line := range strings.Split(stack, "\n") {
		if strings.HasPrefix(line, "github.com/bqueue/bq") && !strings.Contains(line, "conformance") {
			fn := strings.TrimPrefix(line, "github.com/bqueue/")
			if i := strings.LastIndex(fn, "("); i > 0 {
				fn = fn[:i] // the arguments
			}
			out = append(out, fn)
		}
	}
	return strings.Join(out, " < ")
}

// logFlow logs when work ran again on the live processes after the
// freeze began: any job, and each key's.
func logFlow(t *testing.T, db string, runs []outcomeRun, w window, limits map[string]int) map[string]time.Time {
	t.Helper()
	first := map[string]time.Time{}
	var firstAny time.Time
	for _, r := range runs {
		if r.PID == w.pid || r.Start.Before(w.stop) {
			continue
		}
		if firstAny.IsZero() || r.Start.Before(firstAny) {
			firstAny = r.Start
		}
		if f, ok := first[r.Key]; r.Key != "" && (!ok || r.Start.Before(f)) {
			first[r.Key] = r.Start
		}
	}
	var keys []string
	for k := range limits {
		if f, ok := first[k]; ok {
			keys = append(keys, fmt.Sprintf("%s %s", k, fmtDur(f.Sub(w.stop))))
		} else {
			keys = append(keys, k+" none")
		}
	}
	slices.Sort(keys)
	since := "never"
	if !firstAny.IsZero() {
		since = fmtDur(firstAny.Sub(w.stop))
	}
	t.Logf("%s: after the stop, the live processes started a job after %s; each key's first job after: %s",
		db, since, strings.Join(keys, ", "))
	return first
}

// testHeartbeatNotStarved: three worker processes x 4 slots drain 300
// jobs of 5-20 ms back to back, twice over, with a 250 ms heartbeat
// and ProcessDeadAfter 2 s. However heavy the other processes' writes, a
// live process's heartbeat lands: no job runs twice and none is reaped as
// "process lost".
func testHeartbeatNotStarved(t *testing.T, h *harness) {
	ctx := context.Background()
	env := []string{"BQ_HEARTBEAT=250ms", "BQ_DEAD_AFTER=2s"}
	var cmds []*exec.Cmd
	for range 3 {
		cmds = append(cmds, h.spawn("worker", 4, env...))
	}
	stop := h.fleet(cmds...)
	h.waitProcesses(3)

	// Watch the heartbeats' age as the test process sees it.
	watchedAge := h.watchBeatAge(func(bq.ProcessHealth) bool { return true })

	var ids []int64
	var drains []string
	for round := range 2 {
		var unkeyed, keyed []Args
		for i := range 300 {
			a := Args{Test: h.test, Seq: round*300 + i, SleepMS: 5 + rand.IntN(16)}
			if i%2 == 0 {
				unkeyed = append(unkeyed, a)
			} else {
				a.Key = fmt.Sprintf("hb%d", i%10)
				keyed = append(keyed, a)
			}
		}
		began := time.Now()
		for job, args := range map[*bq.Job[Args]][]Args{unkeyedJob: unkeyed, limit2Job: keyed} {
			res, err := job.EnqueueMany(ctx, h.client, args)
			if err != nil {
				t.Fatalf("enqueue: %v", err)
			}
			for _, r := range res {
				ids = append(ids, r.ID)
			}
		}
		h.waitFinished(len(ids), 90*time.Second)
		drains = append(drains, time.Since(began).Round(time.Millisecond).String())
	}
	oldest := watchedAge()
	stop()

	perJob := map[int64][]outcomeRun{}
	runs := h.outcomeRuns(t)
	for _, r := range runs {
		perJob[r.JobID] = append(perJob[r.JobID], r)
	}
	twice := 0
	for _, id := range ids {
		if rs := perJob[id]; len(rs) != 1 {
			twice++
			if twice <= 10 {
				var desc []string
				for _, r := range rs {
					desc = append(desc, fmt.Sprintf("pid %d %s %s", r.PID, r.End.Sub(r.Start).Round(time.Millisecond), r.Outcome))
				}
				t.Errorf("job %d ran %d times, want once: %s", id, len(rs), strings.Join(desc, "; "))
			}
		}
	}
	lost := h.count(`SELECT count(*) FROM bq_jobs WHERE last_error LIKE 'process lost%'`)
	if lost != 0 {
		t.Errorf("%d jobs were reaped as \"process lost\" though every process was alive", lost)
	}
	var retried int
	if err := h.raw.QueryRowContext(ctx, `SELECT COALESCE(SUM(retried), 0) FROM test_conflicts`).Scan(&retried); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d jobs, %d runs, %d ran more than once, %d reaped as process lost; drains %s; oldest heartbeat seen %s (dead after 2s); %d conflicting transactions retried",
		h.db, len(ids), len(runs), twice, lost, strings.Join(drains, ", "), oldest.Round(time.Millisecond), retried)
	h.checkDrained(ids)
}

// testResumedRunSeesCtxAtNextCheck: two runs of W1 check ctx in a busy
// loop when W1 is paused past its lease (ProcessDeadAfter 3 s, paused
// 5 s). Their first check after the resume, made before any timer or
// heartbeat goroutine of W1 can run, already sees ctx cancelled with the
// lease lost; the jobs then run again on W2, and each completes once.
func testResumedRunSeesCtxAtNextCheck(t *testing.T, h *harness) {
	w1 := h.spawn("workers", 2, chaosEnv()...)
	var ids []int64
	for i := range 2 {
		res := enqueue(t, h, pause3Job, Args{Key: "spin", Seq: i, Mode: "spin-ctx", SleepMS: 15000})
		ids = append(ids, res.ID)
	}
	for _, id := range ids {
		h.waitState(id, bq.StateRunning)
	}
	w2 := h.spawn("worker", 2, chaosEnv()...)
	stop := h.fleet(w1, w2)
	h.waitProcesses(2)
	time.Sleep(500 * time.Millisecond)
	w := window{pid: w1.Process.Pid, stop: h.pause(w1)}
	time.Sleep(5 * time.Second)
	w.cont = h.resume(w1)
	h.waitFinished(len(ids), 60*time.Second)
	stop()

	caught := 0
	for _, r := range h.outcomeRuns(t) {
		switch {
		case r.PID != w.pid:
		case strings.Contains(r.Outcome, "stale check"):
			t.Errorf("job %d: %s", r.JobID, r.Outcome)
		case strings.Contains(r.Outcome, "lease lost"):
			caught++
			t.Logf("%s: job %d's run in the paused process ended %s after the resume: %s",
				h.db, r.JobID, fmtDur(r.End.Sub(w.cont)), r.Outcome)
		default:
			t.Errorf("job %d: the paused run ended %q, want its ctx cancelled with the lease lost", r.JobID, r.Outcome)
		}
	}
	if caught != len(ids) {
		t.Errorf("%d runs in the paused process ended with the lease lost, want %d", caught, len(ids))
	}
	h.checkDrained(ids)
}

// watchBeatAge samples, every 100 ms until the returned function is
// called, the age of the heartbeats of the processes keep selects, as the
// database has them (Health); that function returns the oldest seen.
func (h *harness) watchBeatAge(keep func(bq.ProcessHealth) bool) func() time.Duration {
	var oldest time.Duration
	ctx, stop := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ctx.Err() == nil {
			if hl, err := h.client.Health(ctx, bq.HealthOptions{}); err == nil {
				for _, p := range hl.Processes {
					if keep(p) {
						oldest = max(oldest, hl.At.Sub(p.LastHeartbeat))
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return func() time.Duration {
		stop()
		<-watched
		return oldest
	}
}

package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/dispatcher"
)

var _ = register(
	scenario{"ChaosKill9", testChaos},
	scenario{"StaleCompletionAfterPause", testStaleAfterPause},
	scenario{"SecondSignalStopsAtOnce", testSecondSignal},
)

// Chaos timings: processes are declared dead after chaosDeadAfter of
// silence; BQ_CHAOS_DURATION (default 12s: about six kills) sets how long the killing
// goes on; `make soak` runs it for ten minutes.
const (
	chaosHeartbeat = 250 * time.Millisecond
	chaosDeadAfter = 3 * time.Second
)

func chaosEnv() []string {
	return []string{"BQ_HEARTBEAT=" + chaosHeartbeat.String(), "BQ_DEAD_AFTER=" + chaosDeadAfter.String()}
}

// testChaos: three worker processes and a dispatcher process drain jobs
// over To=1 and To=2 keys while a supervisor kills a random worker with
// SIGKILL every ~2s and starts a replacement. Afterwards every job is
// completed exactly once, runs of a key never overlapped beyond its limit
// (a killed run ends at its kill), nothing is left blocked or claimed and
// every semaphore is whole again.
func testChaos(t *testing.T, h *harness) {
	duration := 12 * time.Second
	if d, err := time.ParseDuration(os.Getenv("BQ_CHAOS_DURATION")); err == nil {
		duration = d
	}
	ctx := context.Background()
	limits := map[string]int{}
	for i := range 12 {
		limits[fmt.Sprintf("c%d", i)] = 1 + i%2
	}
	f := h.chaosFleet(3, 4)
	// Kills land on workers with a run in progress when there are: six
	// random kills of mostly idle workers caught no run once in a loaded
	// CI run (SQLite), which tests nothing of a lost claim.
	f.busyFirst = true

	// Enqueue steadily while the supervisor kills.
	var ids []int64
	enqueued := make(chan struct{})
	go func() {
		defer close(enqueued)
		for start := time.Now(); time.Since(start) < duration; time.Sleep(100 * time.Millisecond) {
			for range 3 {
				key := fmt.Sprintf("c%d", rand.IntN(12))
				job := limit1Job
				if limits[key] == 2 {
					job = limit2Job
				}
				res, err := job.Enqueue(ctx, h.client, Args{Test: h.test, Key: key, SleepMS: 10 + rand.IntN(190)})
				if err != nil {
					t.Errorf("enqueue: %v", err)
					return
				}
				ids = append(ids, res.ID)
			}
		}
	}()
	f.killFor(duration, func() time.Duration { return 1500*time.Millisecond + rand.N(time.Second) })
	<-enqueued
	h.eventually(3*time.Minute, fmt.Sprintf("%d jobs to complete", len(ids)), func() bool {
		done := h.count(`SELECT count(*) FROM bq_jobs WHERE finished_at IS NOT NULL`) == len(ids)
		if !done && time.Since(f.lastKill) > 20*time.Second && time.Since(f.lastKill) < 20*time.Second+50*time.Millisecond {
			h.dumpState()
		}
		return done
	})
	drain := time.Since(f.lastKill)

	for _, id := range ids {
		if st := h.state(id); st != bq.StateCompleted {
			t.Errorf("job %d is %s, want completed", id, st)
		}
	}
	runs := h.dbRuns(t)
	alive := f.endAtKill(t, runs, 0)
	overlap := maxOverlap(alive)
	for key, n := range overlap {
		if n > limits[key] {
			t.Errorf("key %s: %d runs overlapped, limit %d", key, n, limits[key])
		}
	}
	for _, table := range []string{"bq_ready_executions", "bq_blocked_executions", "bq_claimed_executions", "bq_scheduled_executions", "bq_failed_executions"} {
		if n := h.count(`SELECT count(*) FROM ` + table); n != 0 {
			t.Errorf("%d rows left in %s after the drain", n, table)
		}
	}
	if n := h.count(`SELECT count(*) FROM bq_semaphores WHERE value <> lim OR blocked <> 0`); n != 0 {
		t.Errorf("%d semaphores not whole after the drain", n)
	}
	h.checkSemaphores()
	reaped := h.count(`SELECT count(*) FROM bq_jobs WHERE last_error LIKE 'process lost%'`)
	if reaped == 0 {
		t.Errorf("no job was reaped: the %d kills caught no run, so the scenario tested nothing of a lost claim", f.kills)
	}
	t.Logf("chaos on %s: %d jobs, %d runs, %d kills, %d jobs reaped, max overlap per key %v, drain %s after the last kill",
		h.db, len(ids), len(runs), f.kills, reaped, overlap, drain.Round(time.Millisecond))
}

// pause stops a process with SIGSTOP at a moment it holds no write lock,
// and returns when the SIGSTOP that held was sent.
// On SQLite a process stopped inside a write transaction freezes the
// whole database until it resumes or dies; that is SQLite's nature, not
// what this test is about, so such a pause is undone and tried again.
func (h *harness) pause(cmd *exec.Cmd) time.Time {
	h.t.Helper()
	for range 20 {
		if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			h.t.Fatal(err)
		}
		at := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := h.raw.ExecContext(ctx, `UPDATE bq_processes SET name = name WHERE id = -1`)
		cancel()
		if err == nil {
			return at
		}
		_ = cmd.Process.Signal(syscall.SIGCONT)
		time.Sleep(time.Duration(20+rand.IntN(80)) * time.Millisecond)
	}
	h.t.Fatal("could not pause the worker outside a write transaction in 20 tries")
	return time.Time{}
}

func values(m map[int]*exec.Cmd) []*exec.Cmd {
	out := make([]*exec.Cmd, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	return out
}

// testStaleAfterPause: a worker paused (SIGSTOP) past its lease has its
// claim reaped and run again elsewhere; when it resumes, its completion
// matches no claim and changes nothing.
func testStaleAfterPause(t *testing.T, h *harness) {
	ctx := context.Background()
	res := enqueue(t, h, limit1Job, Args{Key: "st", SleepMS: 1500})
	paused := h.spawn("workers", 1, chaosEnv()...)
	defer func() { _ = paused.Process.Kill(); _ = paused.Wait() }()
	h.waitState(res.ID, bq.StateRunning)
	h.pause(paused)
	reaper, stopReaper := context.WithCancel(ctx)
	defer stopReaper()
	go func() {
		_ = dispatcher.New(h.driver(), dispatcher.Config{Interval: 100 * time.Millisecond, ProcessDeadAfter: chaosDeadAfter}).Run(reaper)
	}()
	second := h.spawn("workers", 1, chaosEnv()...)
	defer func() { _ = second.Process.Signal(syscall.SIGTERM); _ = second.Wait() }()
	h.waitState(res.ID, bq.StateCompleted)
	before := jobInfo(t, h, res.ID)
	if err := paused.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // the resumed run ends and tries to complete
	after := jobInfo(t, h, res.ID)
	if after.State != bq.StateCompleted || after.Attempts != before.Attempts || !after.FinishedAt.Equal(*before.FinishedAt) {
		t.Errorf("the paused worker's late completion changed the job: before %+v, after %+v", before, after)
	}
	if before.Attempts != 2 {
		t.Errorf("attempts %d, want 2 (one lost to the pause, one completed)", before.Attempts)
	}
	h.checkSemaphores()
}

// testSecondSignalStopsAtOnce: SIGTERM starts a graceful stop; a second
// one exits at once, and the dispatcher later reaps the claim.
func testSecondSignal(t *testing.T, h *harness) {
	res := enqueue(t, h, limit1Job, Args{Key: "sig", Mode: "ignore-ctx", SleepMS: 20000})
	w := h.spawn("workers", 1, chaosEnv()...)
	h.waitState(res.ID, bq.StateRunning)
	_ = w.Process.Signal(syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond)
	_ = w.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- w.Wait() }()
	select {
	case err := <-exited:
		if err == nil {
			t.Errorf("the process exited cleanly; want status 1 after the second signal")
		}
	case <-time.After(5 * time.Second):
		_ = w.Process.Kill()
		t.Fatal("the process did not exit within 5s of the second signal")
	}
	if st := h.state(res.ID); st != bq.StateRunning {
		t.Fatalf("after the hard stop: %s, want still claimed until reaped", st)
	}
	// The dispatcher waits for the process's own bound (its row says
	// chaosDeadAfter), over which another process's beats landed.
	time.Sleep(chaosDeadAfter + 500*time.Millisecond)
	witness(t, h)
	pass(t, h, dispatcher.Config{ProcessDeadAfter: time.Nanosecond})
	if info := jobInfo(t, h, res.ID); info.State != bq.StateReady || info.Attempts != 1 {
		t.Errorf("after reaping: %s with %d attempts, want ready with 1", info.State, info.Attempts)
	}
	h.checkSemaphores()
}

package conformance

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"ClockSkewNeitherReapsNorSpares", testClockSkew},
)

// skewed is the env of a helper process whose host clock is off by d,
// with the chaos timings (ProcessDeadAfter 3 s, beats every 250 ms).
func skewed(d time.Duration) []string { return append(chaosEnv(), "BQ_SKEW="+d.String()) }

// testClockSkew: processes whose hosts' clocks are 30 s off (ten times
// ProcessDeadAfter) follow the database's clock, both ways.
//
//   - A worker whose clock lags by 30 s, watched by a dispatcher whose
//     clock runs 30 s ahead: by their own clocks its beats look a minute
//     old, and it would be reaped while alive, its jobs run twice. Its
//     runs of 4.5 s (longer than ProcessDeadAfter) each run once, and end
//     as they chose.
//   - A producer whose clock runs 30 s ahead schedules a job 3 s ahead
//     by the database's clock (skewProducer).
//   - A worker whose clock runs 30 s ahead is killed (SIGKILL) mid-run,
//     watched by a dispatcher whose clock lags by 30 s: by their own
//     clocks its last beat lies a minute ahead, and its claim would wait
//     that long. Its job runs again within ProcessDeadAfter and a few
//     seconds of the kill.
//
// SQLite is one host with one clock: nothing to skew.
func testClockSkew(t *testing.T, h *harness) {
	if h.db == "sqlite" {
		t.Skip("SQLite: every process reads its one host's clock; clock skew is between hosts (PostgreSQL, MySQL)")
	}
	skewLagging(t, h)
	skewAheadDies(t, h)
	skewProducer(t, h)
}

// skewProducer: a process whose clock runs 30 s ahead opens a client and
// at once enqueues a job to run in 3 s: it comes due 3 s after the
// enqueue by the database's clock, not 33 s (the first enqueue of a
// client bq.Open returned already follows the database's clock).
func skewProducer(t *testing.T, h *harness) {
	var out bytes.Buffer
	started := time.Now()
	cmd := h.spawnTo(&out, "enqueue-in", 0, "BQ_SKEW=30s")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("producer: %v\n%s", err, out.String())
	}
	exited := time.Now()
	m := regexp.MustCompile(`enqueued id=(\d+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("producer printed no job id:\n%s", out.String())
	}
	id, _ := strconv.ParseInt(m[1], 10, 64)
	info := jobInfo(t, h, id)
	// Enqueued between the process's start and its exit, by this host's
	// clock (the database's, give or take a millisecond).
	const slack = 500 * time.Millisecond
	if due := info.ScheduledAt; due.Before(started.Add(3*time.Second-slack)) || due.After(exited.Add(3*time.Second+slack)) {
		t.Errorf("a job enqueued to run in 3 s by a host 30 s ahead is due %s after the producer started (it exited %s after), want 3 s after its enqueue by the database's clock",
			due.Sub(started).Round(time.Millisecond), exited.Sub(started).Round(time.Millisecond))
	}
}

// enqueueInMain is the helper process "enqueue-in": it enqueues one job
// to run in 3 s, as soon as its client is open, and prints its id.
func enqueueInMain(ctx context.Context, client *bq.Client) int {
	res, err := unkeyedJob.Enqueue(ctx, client, Args{SleepMS: 1}, bq.In(3*time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper: enqueue:", err)
		return 1
	}
	fmt.Printf("enqueued id=%d\n", res.ID)
	return 0
}

// skewLagging: a worker whose clock lags, watched by a dispatcher whose
// clock runs ahead, is not reaped while alive.
func skewLagging(t *testing.T, h *harness) {
	{
		disp := h.spawn("dispatcher", 0, skewed(30*time.Second)...)
		w := h.spawn("workers", 3, skewed(-30*time.Second)...)
		defer h.stop(disp, w)
		var ids []int64
		for i := range 3 {
			ids = append(ids, enqueue(t, h, limit1Job, Args{Key: fmt.Sprintf("skew%d", i), SleepMS: 4500}).ID)
		}
		h.waitFinished(len(ids), 30*time.Second)
		for _, id := range ids {
			if info := jobInfo(t, h, id); info.State != bq.StateCompleted || info.Attempts != 1 {
				t.Errorf("job %d: %s after %d attempts, want completed at its first (a live process was reaped)", id, info.State, info.Attempts)
			}
		}
		runs := h.outcomeRuns(t)
		for _, r := range runs {
			if r.Outcome != "ok" {
				t.Errorf("job %d's run on process %d ended %q, want ok (its lease was taken from a live process)", r.JobID, r.PID, r.Outcome)
			}
		}
		if len(runs) != len(ids) {
			t.Errorf("%d runs of %d jobs, want one each", len(runs), len(ids))
		}
		h.checkSemaphores()
	}
}

// skewAheadDies: a worker whose clock runs ahead, killed mid-run, is
// reaped in time by a dispatcher whose clock lags.
func skewAheadDies(t *testing.T, h *harness) {
	{
		id := enqueue(t, h, limit1Job, Args{Key: "skew-dead", SleepMS: 8000}).ID
		ahead := h.spawn("workers", 1, skewed(30*time.Second)...)
		h.waitRun(id, 1, 15*time.Second)
		disp := h.spawn("dispatcher", 0, skewed(-30*time.Second)...)
		other := h.spawn("workers", 1, chaosEnv()...)
		defer h.stop(disp, other)
		h.waitProcesses(3)
		if err := ahead.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		_ = ahead.Wait()
		// Reaped after ProcessDeadAfter of silence, plus a dispatcher
		// pass and a poll; by the skewed clocks, a minute later.
		bound := chaosDeadAfter + 7*time.Second
		start, ok := h.runStart(id, 2, killed.Add(bound))
		if !ok {
			t.Fatalf("job %d did not run again within %s of its process's kill (its claim was spared by a clock)", id, bound)
		}
		t.Logf("run again %s after the kill", start.Sub(killed).Round(time.Millisecond))
		h.waitState(id, bq.StateCompleted)
		h.checkSemaphores()
	}
}

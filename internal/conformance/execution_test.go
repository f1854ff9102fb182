package conformance

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"RetryThenFail", testRetryThenFail},
	scenario{"PanicIsAFailureWithStack", testPanic},
	scenario{"TimeoutCancelsTheRun", testTimeout},
	scenario{"PermanentErrorSkipsRetries", testPermanent},
	scenario{"GracefulStopReturnsClaims", testGracefulStop},
	scenario{"StopAbandonsJobsIgnoringCancel", testAbandon},
	scenario{"NoRetentionDeletesAtCompletion", testNoRetention},
	scenario{"OtherProcessesWakeWithoutPolling", testCrossProcessWake},
)

// testCrossProcessWake: a worker process that polls once a minute still
// starts a job another process enqueues within seconds (PostgreSQL:
// LISTEN/NOTIFY; SQLite: the file's data_version).
func testCrossProcessWake(t *testing.T, h *harness) {
	w := h.spawn("workers", 2, "BQ_POLL=1m")
	defer h.stop(w)
	h.eventually(20*time.Second, "the worker to register", func() bool {
		return h.count(`SELECT count(*) FROM bq_processes`) == 1
	})
	time.Sleep(500 * time.Millisecond) // its first poll has come and gone
	for i := range 3 {
		res := enqueue(t, h, limit1Job, Args{Key: "wake", Seq: i})
		h.eventually(10*time.Second, "the job to run without waiting for a poll", func() bool {
			return h.state(res.ID) == bq.StateCompleted
		})
	}
}

func jobInfo(t *testing.T, h *harness, id int64) *bq.JobInfo {
	t.Helper()
	info, err := h.client.Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// testRetryThenFail: a failing job is retried up to MaxAttempts, then
// failed with its error kept.
func testRetryThenFail(t *testing.T, h *harness) {
	res := enqueue(t, h, retryJob, Args{Mode: "fail"})
	worker(h, 2)
	h.waitState(res.ID, bq.StateFailed)
	info := jobInfo(t, h, res.ID)
	if info.Attempts != 2 || info.LastError != "boom" {
		t.Errorf("attempts %d, error %q; want 2 attempts and error \"boom\"", info.Attempts, info.LastError)
	}
	if n := len(h.recorder().all()); n != 2 {
		t.Errorf("%d runs, want 2", n)
	}
}

func testPanic(t *testing.T, h *harness) {
	res := enqueue(t, h, onceJob, Args{Mode: "panic"})
	worker(h, 1)
	h.waitState(res.ID, bq.StateFailed)
	info := jobInfo(t, h, res.ID)
	if !strings.Contains(info.LastError, "panic: job exploded") || !strings.Contains(info.LastError, "goroutine") {
		t.Errorf("error %q: want the panic value and its stack", info.LastError)
	}
}

func testTimeout(t *testing.T, h *harness) {
	res := enqueue(t, h, timeoutJob, Args{Mode: "wait-ctx"})
	worker(h, 1)
	h.waitState(res.ID, bq.StateFailed)
	if info := jobInfo(t, h, res.ID); !strings.Contains(info.LastError, "deadline exceeded") {
		t.Errorf("error %q: want the run's deadline to have cancelled it", info.LastError)
	}
}

func testPermanent(t *testing.T, h *harness) {
	res := enqueue(t, h, retryJob, Args{Mode: "permanent"})
	worker(h, 1)
	h.waitState(res.ID, bq.StateFailed)
	if info := jobInfo(t, h, res.ID); info.Attempts != 1 {
		t.Errorf("attempts %d: a permanent error must not be retried", info.Attempts)
	}
}

// testGracefulStop: a job still running when the shutdown timeout ends is
// cancelled and goes back to ready, keeping its slot, attempt uncounted.
func testGracefulStop(t *testing.T, h *harness) {
	res := enqueue(t, h, limit1Job, Args{Key: "gs", Mode: "wait-ctx"})
	blocked := enqueue(t, h, limit1Job, Args{Key: "gs"})
	cfg := testConfig()
	cfg.Queues = map[string]int{"default": 1}
	cfg.ShutdownTimeout = 100 * time.Millisecond
	c := h.clientWith(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	h.waitState(res.ID, bq.StateRunning)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	info := jobInfo(t, h, res.ID)
	if info.State != bq.StateReady || info.Attempts != 0 {
		t.Errorf("after stop: %s with %d attempts, want ready with 0", info.State, info.Attempts)
	}
	if st := h.state(blocked.ID); st != bq.StateBlocked {
		t.Errorf("the job behind it is %s, want blocked (the returned job keeps its slot)", st)
	}
	h.checkSemaphores()
}

// testAbandon: a job that ignores cancellation is given up on; its claim
// goes back to ready and its late completion records nothing.
func testAbandon(t *testing.T, h *harness) {
	res := enqueue(t, h, limit1Job, Args{Key: "ab", Mode: "ignore-ctx", SleepMS: 1500})
	cfg := testConfig()
	cfg.Queues = map[string]int{"default": 1}
	cfg.ShutdownTimeout = 50 * time.Millisecond
	c := h.clientWith(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	h.waitState(res.ID, bq.StateRunning)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if st := h.state(res.ID); st != bq.StateReady {
		t.Fatalf("after stop: %s, want ready", st)
	}
	time.Sleep(1600 * time.Millisecond) // the abandoned run ends and tries to complete
	if st := h.state(res.ID); st != bq.StateReady {
		t.Errorf("the abandoned run's late completion changed the job to %s", st)
	}
	h.checkSemaphores()
}

func testNoRetention(t *testing.T, h *harness) {
	res := enqueue(t, h, unkeyedJob, Args{})
	cfg := testConfig()
	cfg.Queues = map[string]int{"default": 1}
	cfg.Retention = bq.NoRetention
	h.run(h.clientWith(cfg))
	h.eventually(10*time.Second, "the job to be deleted", func() bool {
		_, err := h.client.Job(context.Background(), res.ID)
		return err != nil && strings.Contains(err.Error(), "not found")
	})
}

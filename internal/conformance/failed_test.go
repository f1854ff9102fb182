package conformance

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"RetryFailedGoesThroughAdmission", testRetryFailed},
	scenario{"RetryFailedDiscardsOnFullKey", testRetryFailedDiscards},
	scenario{"RetryFailedOnce", testRetryFailedOnce},
	scenario{"DiscardFailed", testDiscardFailed},
	scenario{"FailedJobsPages", testFailedJobsPages},
)

// testRetryFailed: a retried failed job of a saturated key comes back
// blocked, never ready beside the holder; it takes the slot when the
// holder finishes. On a free key it comes back ready.
func testRetryFailed(t *testing.T, h *harness) {
	ctx := context.Background()
	proc := registerProcess(t, h, time.Now())
	failed := failedJob(t, h, limit1Job, "rf", proc)
	enqueue(t, h, limit1Job, Args{Key: "rf"})
	holder := claimOne(t, h, proc)

	if got, err := h.client.RetryFailed(ctx, failed); err != nil || got != bq.StateBlocked {
		t.Fatalf("retry: %q %v, want blocked", got, err)
	}
	if st := h.state(failed); st != bq.StateBlocked {
		t.Fatalf("retried job of a full key is %s, want blocked", st)
	}
	h.checkSemaphores()
	if q := health(t, h, bq.HealthOptions{}).Queues[1]; q.Queue != "failing" || q.Failed != 0 || q.Blocked != 1 {
		t.Errorf("queue after retry: %+v, want failing with 0 failed, 1 blocked", q)
	}
	if ok, err := complete(ctx, h, holder); err != nil || !ok {
		t.Fatalf("complete the holder: %v %v", ok, err)
	}
	if st := h.state(failed); st != bq.StateReady {
		t.Errorf("retried job is %s once the holder completed, want ready", st)
	}
	if info := jobInfo(t, h, failed); info.Attempts != 1 {
		t.Errorf("attempts %d after a retry by hand, want 1 kept", info.Attempts)
	}
	h.checkSemaphores()
	if ok, err := complete(ctx, h, claimFrom(t, h, "failing", proc)); err != nil || !ok {
		t.Fatalf("complete the retried job: %v %v", ok, err)
	}

	free := failedJob(t, h, limit1Job, "rf-free", proc)
	if got, err := h.client.RetryFailed(ctx, free); err != nil || got != bq.StateReady {
		t.Fatalf("retry of a free key: %q %v, want ready", got, err)
	}
	if st := h.state(free); st != bq.StateReady {
		t.Errorf("retried job of a free key is %s, want ready", st)
	}
	h.checkSemaphores()

	if got, err := h.client.RetryFailed(ctx, free); !errors.Is(err, bq.ErrJobNotFailed) || got != "" {
		t.Errorf("retry a ready job: %q %v, want no state and ErrJobNotFailed", got, err)
	}
	if got, err := h.client.RetryFailed(ctx, 1<<40); !errors.Is(err, bq.ErrJobNotFound) || got != "" {
		t.Errorf("retry a missing job: %q %v, want no state and ErrJobNotFound", got, err)
	}
}

// testRetryFailedDiscards: a retried job whose kind discards on conflict
// is discarded, not stored beside the key's holder.
func testRetryFailedDiscards(t *testing.T, h *harness) {
	proc := registerProcess(t, h, time.Now())
	failed := failedJob(t, h, discard1Job, "rd", proc)
	enqueue(t, h, discard1Job, Args{Key: "rd"})
	if got, err := h.client.RetryFailed(context.Background(), failed); err != nil || got != bq.StateDiscarded {
		t.Fatalf("retry: %q %v, want discarded", got, err)
	}
	if st := h.state(failed); st != bq.StateDiscarded {
		t.Errorf("retried job of a full discarding key is %s, want discarded", st)
	}
	h.checkSemaphores()
}

// testRetryFailedOnce: concurrent retries of one job admit it once.
func testRetryFailedOnce(t *testing.T, h *harness) {
	proc := registerProcess(t, h, time.Now())
	failed := failedJob(t, h, limit2Job, "ro", proc)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			_, err := h.client.RetryFailed(context.Background(), failed)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	ok := 0
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, bq.ErrJobNotFailed):
			t.Errorf("concurrent retry: %v", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d retries succeeded, want exactly 1", ok)
	}
	if n := h.count(`SELECT count(*) FROM bq_ready_executions`); n != 1 {
		t.Errorf("%d ready rows, want 1", n)
	}
	h.checkSemaphores()
}

// testDiscardFailed: a discarded failed job is finished, its key untouched.
func testDiscardFailed(t *testing.T, h *harness) {
	ctx := context.Background()
	proc := registerProcess(t, h, time.Now())
	failed := failedJob(t, h, limit1Job, "df", proc)
	if err := h.client.DiscardFailed(ctx, failed); err != nil {
		t.Fatal(err)
	}
	info := jobInfo(t, h, failed)
	if info.State != bq.StateDiscarded || info.FinishedAt == nil || info.Attempts != 1 {
		t.Errorf("discarded job: %s, finished %v, %d attempts; want discarded, finished, 1 attempt", info.State, info.FinishedAt, info.Attempts)
	}
	if next := enqueue(t, h, limit1Job, Args{Key: "df"}); next.State == bq.StateBlocked {
		t.Error("the key is full after discarding a failed job: it held no slot")
	}
	h.checkSemaphores()
	if err := h.client.DiscardFailed(ctx, failed); !errors.Is(err, bq.ErrJobNotFailed) {
		t.Errorf("discard twice: %v, want ErrJobNotFailed", err)
	}
}

func testFailedJobsPages(t *testing.T, h *harness) {
	ctx := context.Background()
	proc := registerProcess(t, h, time.Now())
	var ids []int64
	for range 5 {
		ids = append(ids, failedJob(t, h, onceJob, "", proc))
	}
	page, err := h.client.FailedJobs(ctx, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 3 || page[0].JobID != ids[4] || page[0].Error != "boom: the job gave up" || page[0].Kind != "c.once" {
		t.Fatalf("first page %+v, want the 3 newest, newest first", page)
	}
	rest, err := h.client.FailedJobs(ctx, page[2].JobID, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != 2 || rest[0].JobID != ids[1] || rest[1].JobID != ids[0] {
		t.Errorf("second page %+v, want the 2 oldest", rest)
	}
}

package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// RetryFailed takes a failed job out of the failed table, re-arms the
// jobs its failure cancelled (Rearm), and admits it
// again exactly as a scheduled job coming due: ready with a slot of its
// key, blocked behind the key's holders, or (a key that discards on
// conflict) finished as discarded. Its attempts are not reset, so it gets
// one more run. It returns the job, its outcome and what its admission
// promoted of the jobs already blocked, or a nil job, having changed
// nothing, when the job is not failed.
//
// A failed job of a sequence that halts (Limit.SequenceHalt) still holds
// its key's slot: it becomes ready at once, taking none again.
func RetryFailed(ctx context.Context, ex Store, id int64, now time.Time) (*driver.Job, driver.JobState, driver.Promotion, error) {
	job, err := takeFailed(ctx, ex, id)
	if job == nil || err != nil {
		return nil, "", driver.Promotion{}, err
	}
	// The jobs its failure cancelled wait for it again.
	if _, err := Rearm(ctx, ex, id, now); err != nil {
		return nil, "", driver.Promotion{}, err
	}
	if job.SlotHeld {
		if err := ex.JobHoldSlot(ctx, id, false); err != nil {
			return nil, "", driver.Promotion{}, err
		}
		row := driver.Execution{JobID: id, Queue: job.Queue, Priority: job.Priority, At: now}
		return job, driver.StateReady, driver.Promotion{}, ex.ExecutionInsertMany(ctx, driver.StateReady, []driver.Execution{row})
	}
	outcomes, promoted, err := admitExisting(ctx, ex, []*driver.Job{job}, now)
	if err != nil {
		return nil, "", promoted, err
	}
	return job, outcomes[0], promoted, nil
}

// DiscardFailed takes a failed job out of the failed table and finishes
// it as discarded. A failed job holds no slot, so nothing is released,
// but for one of a sequence that halts (Limit.SequenceHalt): its slot
// goes to the next job of the sequence, which the promotion says. It
// returns the job, or nil, having changed nothing, when it is not failed.
func DiscardFailed(ctx context.Context, ex Store, id int64, now time.Time) (*driver.Job, driver.Promotion, error) {
	job, err := takeFailed(ctx, ex, id)
	if job == nil || err != nil {
		return nil, driver.Promotion{}, err
	}
	if err := ex.JobFinish(ctx, id, now, true); err != nil || !job.SlotHeld {
		return job, driver.Promotion{}, err
	}
	promoted, err := releaseJob(ctx, ex, job, now)
	return job, promoted, err
}

// takeFailed deletes job id's failed row and reads the job; nil when the
// job is not failed. Concurrent retries or discards of the same job race
// on that delete: one matches, the others change nothing.
func takeFailed(ctx context.Context, ex Store, id int64) (*driver.Job, error) {
	if ok, err := ex.FailedDelete(ctx, id); !ok || err != nil {
		return nil, err
	}
	info, ok, err := ex.JobGet(ctx, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("job %d vanished while it was failed", id)
	}
	return &info.Job, nil
}

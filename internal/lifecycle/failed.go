package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// RetryFailed takes a failed job out of the failed table and admits it
// again exactly as a scheduled job coming due: ready with a slot of its
// key, blocked behind the key's holders, or (a key that discards on
// conflict) finished as discarded. Its attempts are not reset, so it gets
// one more run. It returns the job, its outcome and what its admission
// promoted of the jobs already blocked, or a nil job, having changed
// nothing, when the job is not failed.
func RetryFailed(ctx context.Context, ex Store, id int64, now time.Time) (*driver.Job, driver.JobState, driver.Promotion, error) {
	job, err := takeFailed(ctx, ex, id)
	if job == nil || err != nil {
		return nil, "", driver.Promotion{}, err
	}
	outcomes, promoted, err := admitExisting(ctx, ex, []*driver.Job{job}, now)
	if err != nil {
		return nil, "", promoted, err
	}
	return job, outcomes[0], promoted, nil
}

// DiscardFailed takes a failed job out of the failed table and finishes
// it as discarded. A failed job holds no slot, so nothing is released. It
// returns the job, or nil, having changed nothing, when it is not failed.
func DiscardFailed(ctx context.Context, ex Store, id int64, now time.Time) (*driver.Job, error) {
	job, err := takeFailed(ctx, ex, id)
	if job == nil || err != nil {
		return nil, err
	}
	return job, ex.JobFinish(ctx, id, now, true)
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

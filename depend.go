package bq

import (
	"errors"
	"fmt"
	"slices"
)

// MaxDependencies is the most jobs one job may wait for (DependsOn).
const MaxDependencies = 10_000

// DependsOn makes the job wait for jobs ids, already enqueued (in this
// transaction or before), to finish. It is stored waiting (StateWaiting):
// it holds no slot of its keys, no rate start and no place in a line.
// When the last of them completes, the transaction that completes it
// admits this job like a new one: its keys' limits, fair share and rate
// apply then, and a job enqueued for later (At, In) is scheduled for
// then. If one of them fails for good, or is cancelled or discarded,
// this job is cancelled with it (and so are the jobs waiting for it in
// turn), unless EvenIfDependenciesFail. A dependency that already
// completed counts as done; one that already failed cancels the job at
// once. An id that names no job refuses the enqueue, storing nothing.
// See docs/workflows.md.
func DependsOn(ids ...int64) EnqueueOption {
	return func(o *enqueueOptions) { o.dependsOn = append(o.dependsOn, ids...) }
}

// EvenIfDependenciesFail lets a job with DependsOn run once every job it
// waits for has ended, however each ended (completed, failed for good,
// cancelled, discarded), rather than be cancelled when one fails: a
// clean-up or a report that must run in any case.
func EvenIfDependenciesFail() EnqueueOption {
	return func(o *enqueueOptions) { o.evenIfFailed = true }
}

// dependencies checks the job's DependsOn options and returns its
// dependencies, each once, in order.
func (o *enqueueOptions) dependencies(debounce, replace bool) ([]int64, error) {
	if len(o.dependsOn) == 0 {
		if o.evenIfFailed {
			return nil, fmt.Errorf("%w: bq.EvenIfDependenciesFail without bq.DependsOn: name the jobs it waits for", ErrInvalidJob)
		}
		return nil, nil
	}
	ids := slices.Clone(o.dependsOn)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var errs []error
	if ids[0] <= 0 {
		errs = append(errs, fmt.Errorf("bq.DependsOn names job id %d: job ids are positive (an EnqueueResult's ID; 0 is a job that was not stored)", ids[0]))
	}
	if len(ids) > MaxDependencies {
		errs = append(errs, fmt.Errorf("bq.DependsOn names %d jobs, above MaxDependencies (%d): wait for a batch's callback job, or split the work", len(ids), MaxDependencies))
	}
	if debounce {
		errs = append(errs, errors.New("bq.DependsOn on a debounced job (Concurrency.Debounce): a debounced job comes due after its quiet period; enqueue a job without Debounce to wait for others"))
	}
	if replace {
		errs = append(errs, errors.New("bq.DependsOn with OnConflict Replace or CancelRunning: a waiting job holds no place in its key's line to replace; use Block or Discard"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidJob, err)
	}
	return ids, nil
}

package bq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/worker"
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

// MaxOutputBytes bounds a job's output (SetOutput) as JSON: a result
// for the jobs after it to read (an id, a count, a URL), not a payload.
const MaxOutputBytes = 64 << 10

// ErrNoOutput: the job stored no output (SetOutput), or not yet.
var ErrNoOutput = errors.New("the job stored no output")

// SetOutput stores v, encoded as JSON (at most MaxOutputBytes), as the
// output of the job whose run ctx is (the context bq passed the job's
// function): the jobs that wait for it read it (DependencyOutput,
// Client.JobOutput). It is written at once, and only while the run's
// claim holds: a run whose claim was taken (its process paused or cut
// off past its lease) stores nothing and gets an error. A later
// SetOutput, or a later attempt's, replaces it; an attempt that fails
// after storing it leaves it stored.
func SetOutput(ctx context.Context, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: bq.SetOutput: encode as JSON: %w", ErrInvalidArgument, err)
	}
	if len(raw) > MaxOutputBytes {
		return fmt.Errorf("%w: bq.SetOutput: the output is %d bytes as JSON, above MaxOutputBytes (%d): store large results elsewhere and output a reference",
			ErrInvalidArgument, len(raw), MaxOutputBytes)
	}
	if err := worker.SetOutput(ctx, raw); err != nil {
		return fmt.Errorf("bq.SetOutput: %w", err)
	}
	return nil
}

// JobOutput reads job id's output (SetOutput) into v, as
// json.Unmarshal does; ErrJobNotFound for no such job, ErrNoOutput when
// it stored none.
func (c *Client) JobOutput(ctx context.Context, id int64, v any) error {
	raw, ok, err := c.drv.Exec().JobGetOutput(ctx, id)
	switch {
	case err != nil:
		return fmt.Errorf("job %d's output: %w", id, c.explainErr(ctx, err))
	case !ok:
		return fmt.Errorf("job %d's output: %w", id, ErrJobNotFound)
	}
	return decodeOutput(id, raw, v)
}

// DependencyOutput reads, inside a workflow's task (ctx is its run's),
// the output of task of the same workflow (one it runs after, so it
// completed) into v. ErrNoOutput when that task stored none.
func DependencyOutput(ctx context.Context, task string, v any) error {
	meta, ok := JobFromContext(ctx)
	drv, inRun := worker.RunDriver(ctx)
	if !ok || !inRun {
		return errors.New("bq.DependencyOutput: not in a job's run: call it with the context bq passed the task's function")
	}
	wf := meta.Metadata[MetaWorkflow]
	if wf == "" {
		return fmt.Errorf("bq.DependencyOutput: job %d is no workflow's task: read a job's output by id with Client.JobOutput", meta.ID)
	}
	id, found, err := drv.Exec().JobFindTask(ctx, wf, task)
	switch {
	case err != nil:
		return fmt.Errorf("bq.DependencyOutput(%q): %w", task, err)
	case !found:
		return fmt.Errorf("bq.DependencyOutput(%q): workflow %s has no such task (or it was deleted after its retention): %w", task, wf, ErrJobNotFound)
	}
	raw, _, err := drv.Exec().JobGetOutput(ctx, id)
	if err != nil {
		return fmt.Errorf("bq.DependencyOutput(%q): %w", task, err)
	}
	return decodeOutput(id, raw, v)
}

// decodeOutput decodes job id's stored output into v.
func decodeOutput(id int64, raw []byte, v any) error {
	if raw == nil {
		return fmt.Errorf("job %d: %w", id, ErrNoOutput)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("job %d's output into %T: %w", id, v, err)
	}
	return nil
}

// CancelWorkflow cancels every job of workflow id (WorkflowResult.ID)
// that has not finished, as Cancel does each: waiting and queued tasks
// end cancelled, running ones are asked to stop. It returns how many
// jobs it cancelled or asked to stop.
func (c *Client) CancelWorkflow(ctx context.Context, id string) (int, error) {
	return c.cancelGroup(ctx, MetaWorkflow, id)
}

// CancelBatch cancels every job of batch id (BatchResult.ID) that has
// not finished, its callbacks included, as CancelWorkflow does.
func (c *Client) CancelBatch(ctx context.Context, id string) (int, error) {
	return c.cancelGroup(ctx, MetaBatch, id)
}

// unfinishedStates are the states a cancel takes a job out of.
var unfinishedStates = []JobState{StateWaiting, StateScheduled, StateBlocked, StateReady, StateRunning, StateFailed}

func (c *Client) cancelGroup(ctx context.Context, key, id string) (int, error) {
	if id == "" {
		return 0, fmt.Errorf("cancel %s: the id is empty: pass the ID its Enqueue returned", key)
	}
	f := JobFilter{Metadata: map[string]string{key: id}, States: unfinishedStates, Limit: 500}
	var ids []int64
	for {
		page, err := c.ListJobs(ctx, f)
		if err != nil {
			return 0, fmt.Errorf("cancel %s %s: %w", key, id, err)
		}
		for _, j := range page.Jobs {
			ids = append(ids, j.ID)
		}
		if page.Next == "" {
			break
		}
		f.After = page.Next
	}
	// The tasks after others first: each is cancelled by hand, not as
	// the end of the one it waits for.
	slices.Sort(ids)
	slices.Reverse(ids)
	n := 0
	for _, jid := range ids {
		switch _, err := c.Cancel(ctx, jid); {
		case err == nil:
			n++
		case errors.Is(err, ErrJobFinished), errors.Is(err, ErrJobNotFound):
		default:
			return n, fmt.Errorf("cancel %s %s: %w", key, id, err)
		}
	}
	return n, nil
}

// waitingSummary says what a waiting job waits for.
func waitingSummary(w driver.Waiting, open []int64, now time.Time) string {
	what := "the jobs it depends on"
	if len(open) > 0 {
		what = jobList(open)
	}
	return fmt.Sprintf("Waiting since %s for %s (%d of %d done): it holds no slot until the last of them completes, "+
		"then it is admitted like a new job; if one fails for good or is cancelled, it is cancelled too unless it was enqueued with EvenIfDependenciesFail.",
		when(w.At, now), what, w.Total-len(open), w.Total)
}

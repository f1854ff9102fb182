package bq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/bqueue/bq/internal/worker"
)

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

package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/bqueue/bq"
)

// runCancel cancels one job, in whatever state it is.
func runCancel(ctx context.Context, e *env, args []string) error {
	f := newFlagSet(e, "cancel", "cancel --dsn DSN [--prefix bq_] JOB_ID",
		`Cancels a job. A ready, blocked, scheduled or failed job is cancelled at
once: a ready job's slot passes to the next blocked job of its key, a
blocked job leaves the line. A running job's run is asked to stop: its
context is cancelled with cause bq.ErrCancelled in whichever process runs
it, and the job ends cancelled (or completed, if the run returns no
error) when the run ends, which is when its slot frees. A finished job
is refused, and nothing changes.`)
	var db dbFlags
	db.register(f)
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	id, err := jobIDArg(f, pos)
	if err != nil {
		return err
	}
	client, err := db.inspect(ctx, f)
	if err != nil {
		return err
	}
	defer client.Close()
	state, err := client.Cancel(ctx, id)
	if err != nil {
		return err
	}
	if state == bq.StateRunning {
		fmt.Fprintf(e.stdout, "job %d cancel requested: its run is being stopped; it ends, and frees its slot, when the run returns (see bq explain)\n", id)
		return nil
	}
	fmt.Fprintf(e.stdout, "job %d cancelled\n", id)
	return nil
}

// jobIDArg reads the one positional argument of a command that takes a
// job id.
func jobIDArg(f *flagSet, pos []string) (int64, error) {
	if len(pos) != 1 {
		return 0, f.fail("give one job id, e.g. bq %s --dsn DSN 42", f.name)
	}
	id, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil || id <= 0 {
		return 0, f.fail("job id %q: use a positive whole number", pos[0])
	}
	return id, nil
}

// runRetry retries one failed job.
func runRetry(ctx context.Context, e *env, args []string) error {
	f := newFlagSet(e, "retry", "retry --dsn DSN [--prefix bq_] JOB_ID",
		`Retries a failed job: it goes through admission again like a new job,
with its attempts counted afresh: ready if its key has a free slot,
else blocked in its key's line (or discarded, if its key discards).`)
	var db dbFlags
	db.register(f)
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	id, err := jobIDArg(f, pos)
	if err != nil {
		return err
	}
	client, err := db.inspect(ctx, f)
	if err != nil {
		return err
	}
	defer client.Close()
	state, err := client.RetryFailed(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "job %d retried: it is now %s\n", id, state)
	return nil
}

// runDiscard discards one failed job.
func runDiscard(ctx context.Context, e *env, args []string) error {
	f := newFlagSet(e, "discard", "discard --dsn DSN [--prefix bq_] JOB_ID",
		`Discards a failed job: it ends discarded and is never run again.`)
	var db dbFlags
	db.register(f)
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	id, err := jobIDArg(f, pos)
	if err != nil {
		return err
	}
	client, err := db.inspect(ctx, f)
	if err != nil {
		return err
	}
	defer client.Close()
	if err := client.DiscardFailed(ctx, id); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "job %d discarded\n", id)
	return nil
}

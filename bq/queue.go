package main

import (
	"context"
	"fmt"
)

// runQueue pauses or resumes a queue in every process at once.
func runQueue(ctx context.Context, e *env, args []string) error {
	f := newFlagSet(e, "queue", "queue pause|resume --dsn DSN [--prefix bq_] QUEUE",
		`"pause" stops every process from claiming the queue's jobs, within one poll,
until "resume"; enqueues still succeed and running jobs finish. The pause
is stored in the database: it needs no deploy and survives restarts.
"resume" lets the queue's jobs run again and wakes its workers at once.
Pausing a paused queue, or resuming one that is not paused, changes
nothing. A queue no job uses yet may be paused ahead of its first job.`)
	var db dbFlags
	db.register(f)
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 2 || (pos[0] != "pause" && pos[0] != "resume") {
		return f.fail("want an action (pause or resume) and a queue, e.g. bq queue pause --dsn DSN mail")
	}
	client, err := db.inspect(ctx, f)
	if err != nil {
		return err
	}
	defer client.Close()
	action, queue := pos[0], pos[1]
	op, done := client.PauseQueue, "paused: its jobs are not claimed until 'bq queue resume'"
	if action == "resume" {
		op, done = client.ResumeQueue, "resumed: its workers are woken"
	}
	if err := op(ctx, queue); err != nil {
		return fmt.Errorf("%s queue: %w", action, err)
	}
	fmt.Fprintf(e.stdout, "queue %s %s\n", term(queue), done)
	return nil
}

package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/bqueue/bq"
)

// runWorkflow shows or cancels a workflow, and cancels a batch.
func runWorkflow(ctx context.Context, e *env, args []string) error {
	f := newFlagSet(e, "workflow", "workflow show|cancel|cancel-batch --dsn DSN [--prefix bq_] [--json] ID\n\n"+
		"\tbq workflow show [--json] ID\n"+
		"\tbq workflow cancel ID\n"+
		"\tbq workflow cancel-batch ID",
		`ID is a workflow's id (WorkflowResult.ID, the bq.workflow metadata of its
jobs) or, for cancel-batch, a batch's (BatchResult.ID, bq.batch).
"show" prints the workflow's tasks in the order they may run, each with
its job, its state and the tasks it runs after. "cancel" cancels every
task that has not finished (a running one is asked to stop), and
"cancel-batch" every job of a batch, its callbacks included.`)
	var db dbFlags
	db.register(f)
	asJSON := f.Bool("json", false, "print as JSON (show)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return f.fail("want an action and an id: show ID, cancel ID or cancel-batch ID, e.g. bq workflow show --dsn DSN 3f2a…")
	}
	action, id := pos[0], pos[1]
	switch action {
	case "show":
	case "cancel", "cancel-batch":
		if *asJSON {
			return f.fail("--json is a flag of bq workflow show, not of %s", action)
		}
	default:
		return f.fail("unknown action %q: use show, cancel or cancel-batch", action)
	}
	client, err := db.inspect(ctx, f)
	if err != nil {
		return err
	}
	defer client.Close()
	switch action {
	case "show":
		w, err := client.Workflow(ctx, id)
		switch {
		case err != nil:
			return err
		case *asJSON:
			return writeJSON(e.stdout, w)
		}
		return printWorkflow(e.stdout, w)
	case "cancel":
		n, err := client.CancelWorkflow(ctx, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "workflow %s: %d unfinished tasks cancelled (running ones end as their runs return)\n", term(id), n)
	default:
		n, err := client.CancelBatch(ctx, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "batch %s: %d unfinished jobs cancelled (running ones end as their runs return)\n", term(id), n)
	}
	return nil
}

// printWorkflow writes bq workflow show's table.
func printWorkflow(w io.Writer, wf *bq.WorkflowState) error {
	var counts []string
	for _, s := range []bq.JobState{bq.StateWaiting, bq.StateScheduled, bq.StateBlocked, bq.StateReady, bq.StateRunning,
		bq.StateFailed, bq.StateCompleted, bq.StateCancelled, bq.StateDiscarded} {
		if n := wf.States[s]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, s))
		}
	}
	fmt.Fprintf(w, "workflow %s (%s): %s\n", term(wf.Name), term(wf.ID), strings.Join(counts, ", "))
	return printTable(w, len(wf.Tasks), "no task", "workflow", func(tw io.Writer) {
		fmt.Fprintln(tw, "LEVEL\tTASK\tJOB\tKIND\tSTATE\tAFTER")
		for _, t := range wf.Tasks {
			after := "-"
			if len(t.After) > 0 {
				after = strings.Join(t.After, ", ")
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\n", t.Level, term(t.Name), t.JobID, term(t.Kind), t.State, term(after))
		}
	})
}

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"text/tabwriter"

	"github.com/bqueue/bq"
)

// runExplain prints what a job waits for, and why.
func runExplain(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return explain(ctx, os.Stdout, args)
}

func explain(ctx context.Context, w io.Writer, args []string) error {
	fs, db := newInspectFlagSet("explain", "explain --dsn DSN [--prefix bq_] [--json] JOB_ID")
	asJSON := fs.Bool("json", false, "print the explanation as JSON")
	// Flags may follow the job id: bq explain 42 --dsn ...
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	if len(pos) != 1 {
		return fmt.Errorf("bq explain: give one job id, e.g. bq explain --dsn DSN 42")
	}
	id, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil || id <= 0 {
		return fmt.Errorf("bq explain: %q is not a job id (a positive integer)", pos[0])
	}
	client, err := db.open(ctx)
	if err != nil {
		return fmt.Errorf("bq explain: %w", err)
	}
	defer client.Close()
	e, err := client.Explain(ctx, id)
	if err != nil {
		return fmt.Errorf("bq explain: %w", err)
	}
	if *asJSON {
		return writeJSON(w, e)
	}
	return printExplanation(w, e)
}

func printExplanation(w io.Writer, e *bq.Explanation) error {
	j := e.Job
	fmt.Fprintf(w, "Job %d (%s, queue %s): %s\n", j.ID, j.Kind, j.Queue, j.State)
	fmt.Fprintf(w, "%s\n", e.Summary)
	if e.Key == nil {
		return nil
	}
	k := e.Key
	fmt.Fprintf(w, "\nKey %s: limit %d, free %d, %d blocked; this job is number %d in line\n",
		k.Key, k.Limit, k.Free, k.Blocked, e.Position)
	if len(k.Holders) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOLDER\tKIND\tSTATE\tPROCESS\tRUNNING SINCE")
	for _, h := range k.Holders {
		proc, since := "-", "-"
		if h.State == bq.StateRunning {
			proc = fmt.Sprintf("%s (#%d)", h.ProcessName, h.ProcessID)
			if !h.ProcessAlive {
				proc += " not heartbeating"
			}
			since = h.RunningSince.UTC().Format("2006-01-02 15:04:05Z")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", h.JobID, h.Kind, h.State, proc, since)
	}
	return tw.Flush()
}

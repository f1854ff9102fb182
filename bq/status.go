package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/bqueue/bq"
)

// queueStatus is one queue's line of `bq status`, and its JSON shape.
type queueStatus struct {
	Queue     string `json:"queue"`
	Ready     int    `json:"ready"`
	Running   int    `json:"running"`
	Scheduled int    `json:"scheduled"`
	Blocked   int    `json:"blocked"`
	Failed    int    `json:"failed"`
}

// statusReport is the whole of `bq status --json`: an object, so that
// more sections can be added beside "queues".
type statusReport struct {
	Queues []queueStatus `json:"queues"`
}

func runStatus(ctx context.Context, e *env, args []string) error {
	f := newFlagSet(e, "status", "status --dsn DSN [--prefix bq_] [--json]",
		`Shows how many jobs each queue has ready, running, scheduled, blocked
(waiting for a concurrency slot) and failed.`)
	var db dbFlags
	db.register(f)
	asJSON := f.Bool("json", false, "print JSON instead of a table")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if err := f.noArgs(pos); err != nil {
		return err
	}
	if err := db.validate(f); err != nil {
		return err
	}
	client, err := db.open(ctx, bq.Config{})
	if err != nil {
		return err
	}
	defer client.Close()
	stats, err := client.QueueStats(ctx)
	if err != nil {
		return err
	}
	report := statusReport{Queues: make([]queueStatus, 0, len(stats))}
	for _, s := range stats {
		report.Queues = append(report.Queues, queueStatus{Queue: s.Queue, Ready: s.Ready,
			Running: s.Running, Scheduled: s.Scheduled, Blocked: s.Blocked, Failed: s.Failed})
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	return printStatus(e, report)
}

func printStatus(e *env, r statusReport) error {
	if len(r.Queues) == 0 {
		fmt.Fprintln(e.stdout, "No jobs: no queue has ready, running, scheduled, blocked or failed jobs.")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tREADY\tRUNNING\tSCHEDULED\tBLOCKED\tFAILED")
	for _, q := range r.Queues {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\n", q.Queue, q.Ready, q.Running, q.Scheduled, q.Blocked, q.Failed)
	}
	return tw.Flush()
}

package main

import (
	"fmt"
	"io"

	"github.com/bqueue/bq"
)

// printPeriodic writes the PERIODIC JOBS section of bq status: the
// schedules the fleet runs, their next and last tick and its job.
func printPeriodic(w io.Writer, h *bq.Health) {
	fmt.Fprintf(w, "\nPERIODIC JOBS\n")
	if len(h.Periodic) == 0 {
		fmt.Fprintln(w, "  none: no process lists periodic jobs in Config.Periodic")
		return
	}
	fmt.Fprintln(w, "NAME\tKIND\tSCHEDULE\tNEXT RUN\tLAST RUN\tLAST JOB")
	for _, p := range h.Periodic {
		last, job := "never", "-"
		if p.LastRunAt != nil {
			last = ago(*p.LastRunAt, h.At)
			job = lastJob(p)
		}
		next := ago(p.NextRunAt, h.At)
		if p.Stale {
			next = "- (no live process has it: removed from code?)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", term(p.Name), term(p.Kind), term(p.Schedule), next, last, job)
	}
}

// lastJob is a schedule's last job as it is now: its id and current
// state (the state at enqueue, ready say, would read as stuck long after
// the job ran), "deleted" once retention took it, or what admission made
// of a tick that stored no job (discarded).
func lastJob(p bq.PeriodicStatus) string {
	switch {
	case p.LastJobID == 0:
		return string(p.LastState)
	case p.LastJobState == "":
		return fmt.Sprintf("%d (deleted)", p.LastJobID)
	default:
		return fmt.Sprintf("%d (%s)", p.LastJobID, p.LastJobState)
	}
}

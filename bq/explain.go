package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/humanize"
)

// runExplain prints what a job waits for, and why.
func runExplain(ctx context.Context, e *env, args []string) error {
	f := newFlagSet(e, "explain", "explain --dsn DSN [--prefix bq_] [--json] JOB_ID",
		`Shows a job's state and what it waits for: for a blocked job, its key's
limit, the jobs holding the key's slots, and its place in line; for one
waiting for a start, its rate key's rate, recent starts and line.`)
	var db dbFlags
	db.register(f)
	asJSON := f.Bool("json", false, "print the explanation as JSON")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	id, err := jobIDArg(f, pos)
	if err != nil {
		return err
	}
	w := e.stdout
	client, err := db.inspect(ctx, f)
	if err != nil {
		return err
	}
	defer client.Close()
	ex, err := client.Explain(ctx, id)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(w, ex)
	}
	return printExplanation(w, ex)
}

func printExplanation(w io.Writer, e *bq.Explanation) error {
	j := e.Job
	fmt.Fprintf(w, "Job %d (%s, queue %s): %s\n", j.ID, term(j.Kind), term(j.Queue), j.State)
	fmt.Fprintf(w, "%s\n", term(e.Summary))
	if e.UniqueKey != "" {
		fmt.Fprintf(w, "Unique: key %s\n", e.UniqueKey)
	}
	if labels := labelsText(j.Metadata, j.Tags); labels != "" {
		fmt.Fprintf(w, "%s\n", labels)
	}
	if len(j.Keys) > 0 {
		keys := make([]string, len(j.Keys))
		for i, k := range j.Keys {
			keys[i] = term(k)
		}
		fmt.Fprintf(w, "Concurrency keys: %s (a slot of each at once)\n", strings.Join(keys, ", "))
	}
	if j.Sequence {
		held := ""
		if j.HoldsSlot {
			held = "; this job holds its key's slot until it runs again"
		}
		fmt.Fprintf(w, "Sequence: key %s runs its jobs one at a time in enqueue order, a failing job keeping its place through its retries%s\n",
			term(j.Key), held)
	}
	if r := e.Rate; r != nil {
		fmt.Fprintf(w, "\n%s; this job is number %s in line\n", rateSentence(r, time.Now()), e.Place())
		if len(r.Line) > 0 {
			fmt.Fprintf(w, "First in line: %s\n", lineOf(r.Line, r.Waiting))
		}
	}
	if e.Key == nil {
		return nil
	}
	k := e.Key
	fmt.Fprintf(w, "\nKey %s: limit %d, free %d, %d blocked; this job is number %s in line\n",
		term(k.Key), k.Limit, k.Free, k.Blocked, e.Place())
	if !e.ExpectedStart.IsZero() {
		fmt.Fprintf(w, "Expected start: %s (in %s): place %s × the key's recent release interval %s\n",
			humanize.Time(e.ExpectedStart), time.Until(e.ExpectedStart).Round(time.Millisecond), e.Place(), k.ReleaseInterval)
	}
	if len(k.Line) > 0 {
		fmt.Fprintf(w, "First in line: %s\n", lineOf(k.Line, k.Blocked))
	}
	if len(k.Holders) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nHOLDER\tKIND\tSTATE\tPROCESS\tRUNNING SINCE")
	for _, h := range k.Holders {
		proc, since := "-", "-"
		if h.State == bq.StateRunning {
			proc = fmt.Sprintf("%s (#%d)", term(h.ProcessName), h.ProcessID)
			if !h.ProcessAlive {
				proc += " not heartbeating"
			}
			since = humanize.Time(h.RunningSince)
		}
		state := string(h.State)
		switch h.State {
		case bq.StateScheduled:
			state += " (a sequence's retry, keeping its place)"
		case bq.StateFailed:
			state += " (halting its sequence until retried or discarded)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", h.JobID, term(h.Kind), state, proc, since)
	}
	return tw.Flush()
}

// lineShown is how many of a key's blocked line explain prints.
const lineShown = 10

// lineOf writes the first jobs of a line of total jobs, a key's or a
// rate key's: "jobs 7, 8 (priority 5), 9 … and 4,990 more".
func lineOf(line []bq.BlockedJob, total int) string {
	var parts []string
	for _, b := range line[:min(len(line), lineShown)] {
		p := strconv.FormatInt(b.JobID, 10)
		if b.Priority != 0 {
			p += fmt.Sprintf(" (priority %d)", b.Priority)
		}
		parts = append(parts, p)
	}
	s := "job "
	if len(parts) > 1 {
		s = "jobs "
	}
	s += strings.Join(parts, ", ")
	if more := total - len(parts); more > 0 {
		s += fmt.Sprintf(" and %s more", humanize.Thousands(more))
	}
	return s
}

// labelsText is a job's metadata and tags on one line ("" for none):
// "Metadata: k=v, k2=v2; tags: a, b".
func labelsText(md map[string]string, tags []string) string {
	var parts []string
	if len(md) > 0 {
		pairs := make([]string, 0, len(md))
		for _, k := range slices.Sorted(maps.Keys(md)) {
			pairs = append(pairs, k+"="+md[k])
		}
		parts = append(parts, "metadata: "+strings.Join(pairs, ", "))
	}
	if len(tags) > 0 {
		parts = append(parts, "tags: "+strings.Join(tags, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	s := strings.Join(parts, "; ")
	return term(strings.ToUpper(s[:1]) + s[1:])
}

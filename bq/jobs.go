package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bqueue/bq"
)

// listFlag is a flag given once per value (--kind a --kind b); a value
// may also list several, comma-separated.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// pairsFlag is --meta k=v, once per pair.
type pairsFlag map[string]string

func (p pairsFlag) String() string { return "" }

func (p pairsFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is no pair: write key=value, e.g. --meta tenant=acme", s)
	}
	p[k] = v
	return nil
}

// timeFlag is an RFC 3339 instant; unset is the zero time.
type timeFlag struct{ t *time.Time }

func (f timeFlag) String() string {
	if f.t == nil || f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f timeFlag) Set(s string) error {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return fmt.Errorf("%q is no RFC 3339 time: write e.g. 2026-12-01T09:00:00Z", s)
	}
	*f.t = t
	return nil
}

// runJobs lists jobs, a page at a time.
func runJobs(ctx context.Context, e *env, args []string) error {
	f := newFlagSet(e, "jobs", "jobs --dsn DSN [--kind K]... [--queue Q]... [--state S]... [--key K | --key-prefix P]\n\t[--meta k=v]... [--tag T] [--created-after T] [--created-before T] [--finished-after T]\n\t[--finished-before T] [--limit N] [--after CURSOR] [--json]",
		`Lists jobs, newest first, a page at a time: every filter given must
match. Times are RFC 3339. Prints a table (with an ERROR column, each
error's first line, when a job listed has one) and the command for the
next page; --json prints the page (jobs and next, the --after of the
next).`)
	var db dbFlags
	db.register(f)
	var kinds, queues, states listFlag
	var filter bq.JobFilter
	meta := pairsFlag{}
	f.Var(&kinds, "kind", "job `kind`; repeat (or comma-separate) for any of several")
	f.Var(&queues, "queue", "`queue`; repeat for any of several")
	f.Var(&states, "state", "`state`: scheduled, blocked, ready, running, failed, completed, discarded, cancelled; repeat for any of several")
	f.StringVar(&filter.Key, "key", "", "full concurrency `key` (Group/Key), exactly")
	f.StringVar(&filter.KeyPrefix, "key-prefix", "", "full keys starting with `prefix`, e.g. billing/ or billing/acme-")
	f.Var(meta, "meta", "metadata `key=value` the job carries; repeat: every pair must match")
	f.StringVar(&filter.Tag, "tag", "", "a `tag` the job carries")
	f.Var(timeFlag{&filter.CreatedAfter}, "created-after", "created at or after `time`")
	f.Var(timeFlag{&filter.CreatedBefore}, "created-before", "created before `time`")
	f.Var(timeFlag{&filter.FinishedAfter}, "finished-after", "finished at or after `time`")
	f.Var(timeFlag{&filter.FinishedBefore}, "finished-before", "finished before `time`")
	f.IntVar(&filter.Limit, "limit", bq.DefaultListLimit, fmt.Sprintf("jobs a page, 1 to %d", bq.MaxListLimit))
	f.StringVar(&filter.After, "after", "", "the `cursor` a previous page printed: the page after it")
	asJSON := f.Bool("json", false, "print the page as JSON")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if err := f.noArgs(pos); err != nil {
		return err
	}
	for _, s := range states {
		st, err := bq.ParseJobState(s)
		if err != nil {
			return f.fail("--state: %v", err)
		}
		filter.States = append(filter.States, st)
	}
	filter.Kinds, filter.Queues = kinds, queues
	if len(meta) > 0 {
		filter.Metadata = meta
	}
	if filter.Key != "" && filter.KeyPrefix != "" {
		return f.fail("give --key (one full key) or --key-prefix (keys starting with it), not both")
	}
	client, err := db.inspect(ctx, f)
	if err != nil {
		return err
	}
	defer client.Close()
	page, err := client.ListJobs(ctx, filter)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, page)
	}
	printJobs(e.stdout, page, time.Now())
	if page.Next != "" {
		fmt.Fprintf(e.stdout, "\nNext page: bq jobs %s\n", nextPageArgs(args, page.Next))
	}
	return nil
}

// printJobs writes a page as a table.
func printJobs(w io.Writer, page bq.JobPage, now time.Time) {
	if len(page.Jobs) == 0 {
		fmt.Fprintln(w, "No jobs match.")
		return
	}
	// An ERROR column when a job of the page has one (a failed job, or
	// one whose earlier attempts failed): why is the first question.
	withErrors := slices.ContainsFunc(page.Jobs, func(j *bq.JobInfo) bool { return j.LastError != "" })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "ID\tKIND\tQUEUE\tSTATE\tKEY\tCREATED\tLABELS"
	if withErrors {
		header += "\tERROR"
	}
	fmt.Fprintln(tw, header)
	for _, j := range page.Jobs {
		key := term(j.Key)
		if n := len(j.Keys); n > 1 {
			key += fmt.Sprintf(" (+%d)", n-1) // its further keys: bq explain lists them
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s", j.ID, term(j.Kind), term(j.Queue), j.State,
			key, ago(j.CreatedAt, now), labelsText(j.Metadata, j.Tags))
		if withErrors {
			fmt.Fprintf(tw, "\t%s", errorCell(j.LastError))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// errorCellRunes is how much of a job's error bq jobs shows: bq explain
// and --json give the whole of it.
const errorCellRunes = 80

// errorCell is a job's last error in one table cell: its first line, cut
// at errorCellRunes with an ellipsis, "-" when it has none.
func errorCell(msg string) string {
	if msg == "" {
		return "-"
	}
	line, rest, more := strings.Cut(strings.TrimSpace(msg), "\n")
	line = strings.TrimSpace(line)
	more = more && strings.TrimSpace(rest) != ""
	if r := []rune(line); len(r) > errorCellRunes {
		line, more = string(r[:errorCellRunes]), true
	}
	if more {
		line += "…"
	}
	return term(strings.ReplaceAll(line, "\t", " "))
}

// nextPageArgs is the command line of the page after cursor: args
// without their --after, then --after cursor.
func nextPageArgs(args []string, cursor string) string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--after" || a == "-after":
			i++ // and its value
			continue
		case strings.HasPrefix(a, "--after=") || strings.HasPrefix(a, "-after="):
			continue
		}
		out = append(out, term(shellQuote(a)))
	}
	return strings.Join(append(out, "--after", cursor), " ")
}

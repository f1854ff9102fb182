package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/humanize"
)

// runRate lists, shows, sets and clears rate keys.
func runRate(ctx context.Context, e *env, args []string) error {
	f := newFlagSet(e, "rate", "rate list|show|set|clear --dsn DSN [--prefix bq_] [--json] ...\n\n"+
		"\tbq rate list [--after KEY] [--max N] [--json]\n"+
		"\tbq rate show KEY [--json]\n"+
		"\tbq rate set KEY LIMIT PERIOD\n"+
		"\tbq rate clear KEY",
		`Rate keys allow at most LIMIT job starts per PERIOD, fleet-wide. KEY is a
full rate key, Group + "/" + Key (bq.Key), as "bq rate list" prints it.
"list" prints each stored key: its rate (an override marked), its starts
in the last period, its waiting jobs and when the next may start.
"show" prints one key and the first 50 jobs of its line.
"set" overrides the key's rate (PERIOD a Go duration: 1s, 250ms, 1m) for
every job of the key, at once, until "clear", which goes back to the rate
the key's jobs ask for.`)
	var db dbFlags
	db.register(f)
	asJSON := f.Bool("json", false, "print as JSON (list and show)")
	after := f.String("after", "", "list the keys after this `KEY`, in key order (list)")
	maxKeys := f.Int("max", 100, "list at most `N` keys, 1 to 1000 (list)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return f.fail("want an action: list, show KEY, set KEY LIMIT PERIOD or clear KEY, e.g. bq rate list --dsn DSN")
	}
	action, pos := pos[0], pos[1:]
	given := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	for _, name := range []string{"after", "max"} {
		if given[name] && action != "list" {
			return f.fail("--%s is a flag of bq rate list, not of %s", name, action)
		}
	}
	if given["json"] && action != "list" && action != "show" {
		return f.fail("--json is a flag of bq rate list and show, not of %s", action)
	}
	var limit int
	var period time.Duration
	switch action {
	case "list":
		if err := f.noArgs(pos); err != nil {
			return err
		}
		if *maxKeys < 1 || *maxKeys > 1000 {
			return f.fail("--max %d: use 1 to 1000 keys a page (and --after the last key for the next page)", *maxKeys)
		}
	case "show", "clear":
		if len(pos) != 1 {
			return f.fail("give one rate key, e.g. bq rate %s --dsn DSN api/tenant-1", action)
		}
	case "set":
		if len(pos) != 3 {
			return f.fail("give a rate key, a limit and a period, e.g. bq rate set --dsn DSN api/tenant-1 10 1s")
		}
		if limit, err = strconv.Atoi(pos[1]); err != nil {
			return f.fail("limit %q: use a whole number of starts per period, 1 to %d", pos[1], bq.MaxRateLimit)
		}
		if period, err = time.ParseDuration(pos[2]); err != nil || period <= 0 {
			return f.fail("period %q: use a Go duration of 1ms or more, e.g. 1s, 250ms or 1m", pos[2])
		}
	default:
		return f.fail("unknown action %q: use list, show, set or clear", action)
	}

	client, err := db.inspect(ctx, f)
	if err != nil {
		return err
	}
	defer client.Close()
	w := e.stdout
	switch action {
	case "list":
		rates, err := client.ListRates(ctx, *after, *maxKeys)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(w, rates)
		}
		return printRates(w, rates, *maxKeys, time.Now())
	case "show":
		st, err := client.RateState(ctx, pos[0])
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(w, st)
		}
		return printRateState(w, st, time.Now())
	case "set":
		if err := client.SetKeyRate(ctx, pos[0], limit, period); err != nil {
			return err
		}
		fmt.Fprintf(w, "rate key %s set to %s: it beats the jobs' own rate until 'bq rate clear'\n", term(pos[0]), rateText(limit, period))
	case "clear":
		if err := client.ClearKeyRate(ctx, pos[0]); err != nil {
			return err
		}
		fmt.Fprintf(w, "rate key %s override cleared: the key takes its jobs' own rate again\n", term(pos[0]))
	}
	return nil
}

// rateText is a rate for a person: "10/1s".
func rateText(limit int, period time.Duration) string {
	return fmt.Sprintf("%d/%s", limit, period)
}

// rateCell is the RATE column: "10/1s", "5/1s (override)", "-" for a key
// with no stored rate.
func rateCell(r *bq.RateState) string {
	if !r.Exists || r.Limit == 0 {
		return "-"
	}
	s := rateText(r.Limit, r.Period)
	if r.Overridden {
		s += " (override)"
	}
	if a := r.Adaptive; a != nil {
		s += fmt.Sprintf(" (adapted, min %d)", a.Min)
	}
	return s
}

// nextStartCell is the NEXT START column: "-" when none waits.
func nextStartCell(r *bq.RateState, now time.Time) string {
	if r.NextStartAt.IsZero() {
		return "-"
	}
	if !r.NextStartAt.After(now) {
		return "now"
	}
	return humanize.Ago(r.NextStartAt, now)
}

// printRates writes bq rate list's table.
func printRates(w io.Writer, rates []*bq.RateState, max int, now time.Time) error {
	if len(rates) == 0 {
		fmt.Fprintln(w, "no rate keys: none is stored (no rate-limited job has been enqueued, or the keys were all idle and removed)")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tRATE\tRECENT\tWAITING\tNEXT START")
	for _, r := range rates {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", term(r.Key), rateCell(r), r.Recent, r.Waiting, nextStartCell(r, now))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rates) == max {
		fmt.Fprintf(w, "\nmore may follow: --after %s for the next page\n", term(rates[len(rates)-1].Key))
	}
	return nil
}

// printRateState writes bq rate show's key and its line.
func printRateState(w io.Writer, r *bq.RateState, now time.Time) error {
	if !r.Exists {
		fmt.Fprintf(w, "Rate key %s: no stored rate (no rate-limited job has used it lately)\n", term(r.Key))
		return nil
	}
	fmt.Fprintln(w, rateSentence(r, now))
	if len(r.Line) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nJOB\tKIND\tQUEUE\tPRIORITY\tWAITING SINCE")
	for _, b := range r.Line {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\n", b.JobID, term(b.Kind), term(b.Queue), b.Priority, ago(b.Since, now))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more := r.Waiting - len(r.Line); more > 0 {
		fmt.Fprintf(w, "… and %s more\n", humanize.Thousands(more))
	}
	return nil
}

// rateSentence is one line on a rate key, for show and explain: "Rate
// key api/t1: 10/1s (override), 10 starts in the last period, 3 waiting,
// next start in 400ms".
func rateSentence(r *bq.RateState, now time.Time) string {
	s := fmt.Sprintf("Rate key %s: %s, %d starts in the last period, %d waiting", term(r.Key), rateCell(r), r.Recent, r.Waiting)
	if next := nextStartCell(r, now); next != "-" {
		s += ", next start " + next
	}
	return s
}

package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bqueue/bq"
)

// runStatus prints the Health report: queues, limit groups, the most
// blocked keys, the paused keys and the processes.
func runStatus(ctx context.Context, e *env, args []string) error {
	f := newFlagSet(e, "status", "status --dsn DSN [--prefix bq_] [--json | --watch] [--top 10]",
		`Shows each queue's ready, running, scheduled, blocked and failed jobs and
whether it is paused, the limit groups and their saturated keys, the most
blocked keys, the paused keys (bq key), the registered processes and the
periodic jobs' schedules (next run, last run and its job). With --watch
it redraws them every 2s until Ctrl-C, with the last hour's history as
sparklines: runs completed and failed, jobs by state, and the blocked
jobs of the most blocked keys.`)
	var db dbFlags
	db.register(f)
	asJSON := f.Bool("json", false, "print the report as JSON")
	top := f.Int("top", 10, "how many of the most blocked keys to list (at most 100)")
	watch := f.Bool("watch", false, "redraw every 2s, with the last hour's history, until Ctrl-C")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if err := f.noArgs(pos); err != nil {
		return err
	}
	if *watch && *asJSON {
		return f.fail("--watch draws for a person: use --json without it, once per report")
	}
	w := e.stdout
	client, err := db.inspect(ctx, f)
	if err != nil {
		return err
	}
	defer client.Close()
	if *watch {
		return watchStatus(ctx, w, client, *top)
	}
	h, err := client.Health(ctx, bq.HealthOptions{TopKeys: *top})
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(w, h)
	}
	return printHealth(w, h)
}

// statusShares is how many keys of a fair-share queue bq status lists.
const statusShares = 10

// printHealth writes the report as aligned tables; every name in it goes
// through term.
func printHealth(w io.Writer, h *bq.Health) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	section := func(title string) { fmt.Fprintf(tw, "\n%s\n", title) }

	fmt.Fprintln(tw, "QUEUES")
	if len(h.Queues) == 0 {
		fmt.Fprintln(tw, "  no live jobs, no paused queue")
	} else {
		fmt.Fprintln(tw, "QUEUE\tREADY\tRUNNING\tSCHEDULED\tBLOCKED\tFAILED\tOLDEST READY\tPAUSED\tWAITING ON JOBS")
		for _, q := range h.Queues {
			oldest := "-"
			if q.Ready > 0 {
				oldest = age(q.OldestReadyAge)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%d\n", term(q.Queue), q.Ready, q.Running, q.Scheduled, q.Blocked, q.Failed,
				oldest, yesNo(q.Paused), q.Waiting)
		}
	}

	for _, q := range h.FairShares {
		if len(q.Keys) == 0 {
			continue
		}
		section(fmt.Sprintf("FAIR SHARE OF QUEUE %s (capacity %d; the furthest below its share first)", term(q.Queue), q.Capacity))
		fmt.Fprintln(tw, "KEY\tWEIGHT\tRUNNING\tREADY\tSHARE")
		for _, s := range q.Keys[:min(len(q.Keys), statusShares)] {
			key := term(s.Key)
			if s.Key == "" {
				key = "(no key)"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f\n", key, s.Weight, s.Running, s.Ready, s.Share)
		}
	}

	section("LIMIT GROUPS")
	if len(h.Groups) == 0 {
		fmt.Fprintln(tw, "  no concurrency keys in use")
	} else {
		fmt.Fprintln(tw, "GROUP\tLIMIT\tKEYS\tACTIVE\tBLOCKED\tSATURATED KEYS")
		for _, g := range h.Groups {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\n", term(g.Group), g.Limits(), g.Keys, g.Active, g.Blocked, g.Saturated)
		}
	}

	if len(h.Rates) > 0 {
		section("RATE GROUPS")
		fmt.Fprintln(tw, "GROUP\tKEYS\tWAITING\tTHROTTLED KEYS")
		for _, g := range h.Rates {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", term(g.Group), g.Keys, g.Waiting, g.Throttled)
		}
	}

	section("MOST BLOCKED KEYS")
	if len(h.TopKeys) == 0 {
		fmt.Fprintln(tw, "  nothing is blocked")
	} else {
		fmt.Fprintln(tw, "KEY\tLIMIT\tHOLDERS\tFREE\tBLOCKED\tRELEASE INTERVAL\tLINE CLEARS IN")
		for _, k := range h.TopKeys {
			interval, clears := "-", "-" // none measured yet
			if iv := k.ReleaseInterval; iv > 0 {
				interval, clears = iv.Round(time.Millisecond).String(), "~"+(time.Duration(k.Blocked)*iv).Round(time.Millisecond).String()
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", term(k.Key), k.Limit, k.Holders, k.Free, k.Blocked, interval, clears)
		}
	}

	if len(h.PausedKeys) > 0 {
		section("PAUSED KEYS (their jobs wait until 'bq key resume')")
		pausedKeysTable(tw, h.PausedKeys, h.At)
	}

	if len(h.AdaptedKeys) > 0 {
		section("ADAPTED KEYS (limits and rates lowered by bq.Throttled; they rise back with completions)")
		fmt.Fprintln(tw, "KEY\tOF\tLIMIT\tMIN\tSUCCESSES\tCHANGED")
		for _, k := range h.AdaptedKeys {
			of, limit := "slots", strconv.Itoa(k.Limit)
			if k.Rate {
				of, limit = "rate", limit+" per period"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", term(k.Key), of, limit, k.Min, k.Successes, ago(k.AdaptedAt, h.At))
		}
	}

	section("PROCESSES")
	if len(h.Processes) == 0 {
		fmt.Fprintln(tw, "  none registered: no worker or dispatcher is running")
	} else {
		fmt.Fprintln(tw, "ID\tKIND\tNAME\tQUEUES\tLAST HEARTBEAT\tALIVE")
		for _, p := range h.Processes {
			queues := strings.Join(p.Queues, ",")
			if queues == "" {
				queues = "-"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", p.ID, term(p.Kind), term(p.Name), term(queues), ago(p.LastHeartbeat, h.At), yesNo(p.Alive))
		}
	}
	printPeriodic(tw, h)
	section("INBOX")
	switch {
	case h.InboxPending == 0:
		fmt.Fprintln(tw, "  nothing waiting: every job other languages' clients wrote is admitted")
	default:
		fmt.Fprintf(tw, "  %d waiting in the inbox (written by clients in other languages, not admitted yet: a count that stays up means no running process defines their kinds)\n", h.InboxPending)
	}
	if h.Truncated {
		fmt.Fprintln(tw, "\n(more groups or processes than shown: the report lists 100 of each)")
	}
	return tw.Flush()
}

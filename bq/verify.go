package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/humanize"
)

// runVerify checks the stored rows against the invariants bq keeps and,
// with --repair, mends what drifted. It exits 1 while drift is left.
func runVerify(ctx context.Context, e *env, args []string) error {
	f := newFlagSet(e, "verify", "verify --dsn DSN [--prefix bq_] [--repair] [--json]",
		`Checks the stored rows against the invariants bq keeps: each key's
semaphore has its limit minus its holders free and counts its line's jobs
as blocked, no key has a free slot while its line waits, and no claim of
a process silent past ProcessDeadAfter is left unreaped. It takes one key
at a time under that key's own lock, so it runs beside a working fleet.
With --repair it mends what it finds: a drifted semaphore is recounted
from its key's rows (its free slots go to its line, as a release does);
unreaped claims are reaped by one dispatcher pass. Exit status 1 while
drift is left unrepaired, 0 when there is none (or all was repaired).
See docs/concurrency.md, "Verifying the invariants".`)
	var db dbFlags
	db.register(f)
	repair := f.Bool("repair", false, "mend the drift found (recount drifted semaphores, reap claims of dead processes)")
	asJSON := f.Bool("json", false, "print the report as JSON")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if err := f.noArgs(pos); err != nil {
		return err
	}
	client, err := db.inspect(ctx, f)
	if err != nil {
		return err
	}
	defer client.Close()
	r, err := client.Verify(ctx, bq.VerifyOptions{Repair: *repair})
	if err != nil {
		return err
	}
	if *asJSON {
		err = writeJSON(e.stdout, r)
	} else {
		err = printVerify(e.stdout, r)
	}
	if err != nil {
		return err
	}
	left := r.Unrepaired()
	switch {
	case left == 0:
		return nil
	case *repair:
		return fmt.Errorf("verify: %s left unrepaired", drifts(left))
	}
	return fmt.Errorf("verify: %s found; run '%s verify --repair' to mend it", drifts(left), e.command())
}

// printVerify writes a verify report: a summary line, then one line per
// drift (its kind, key or job, detail, and "repaired" when it was).
func printVerify(w io.Writer, r *bq.VerifyReport) error {
	sems := humanize.Thousands(r.Semaphores) + " semaphores"
	if r.Semaphores == 1 {
		sems = "1 semaphore"
	}
	if len(r.Drift) == 0 {
		fmt.Fprintf(w, "checked %s: no drift\n", sems)
		return nil
	}
	fmt.Fprintf(w, "checked %s: %s, %d repaired\n", sems, drifts(len(r.Drift)), len(r.Drift)-r.Unrepaired())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, d := range r.Drift {
		where := "key " + term(d.Key)
		if d.JobID != 0 {
			where = "job " + strconv.FormatInt(d.JobID, 10)
			if d.Key != "" {
				where += " (key " + term(d.Key) + ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s", d.Kind, where, term(d.Detail))
		if d.Repaired {
			fmt.Fprint(tw, "\trepaired")
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// drifts counts drift: "1 drift", "3 drifts".
func drifts(n int) string {
	if n == 1 {
		return "1 drift"
	}
	return strconv.Itoa(n) + " drifts"
}

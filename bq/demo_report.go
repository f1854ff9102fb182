package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bqueue/bq"
)

// laneWidth is the number of columns of the per-key lane chart.
const laneWidth = 64

// report prints the timeline, the lanes and the summary, and fails if a
// limit was exceeded or a job did not complete.
func (d *demo) report(ctx context.Context) error {
	out := d.e.stdout
	states := map[bq.JobState]int{}
	for _, id := range d.ids {
		info, err := d.clients[0].Job(ctx, id)
		if err != nil {
			return err
		}
		states[info.State]++
	}
	runs := d.rec.snapshot()
	slices.SortFunc(runs, func(a, b execution) int { return cmp.Compare(a.start, b.start) })

	fmt.Fprintf(out, "\nTimeline (seconds since the workers started; one line per run):\n")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, r := range runs {
		fmt.Fprintf(tw, "  %s -> %s\t%s\t%s\t%s\tjob %d\n", secs(r.start), secs(r.end), r.key, r.label, r.worker, r.id)
	}
	tw.Flush()

	var total time.Duration
	for _, r := range runs {
		total = max(total, r.end)
	}
	bin := max((total / laneWidth).Round(10*time.Millisecond), 10*time.Millisecond)
	if bin*laneWidth < total {
		bin += 10 * time.Millisecond
	}
	keys := append(slices.Clone(demoTenants), demoTargets...)
	fmt.Fprintf(out, "\nJobs of each key running at once (one column = %s; . = none):\n", bin)
	for _, k := range keys {
		fmt.Fprintf(out, "  %-9s |%s|\n", k, lane(intervalsOf(runs, k), bin, laneWidth))
	}

	fmt.Fprintf(out, "\nSummary:\n")
	var problems []string
	var most []string
	for _, t := range demoTenants {
		m := maxOverlap(intervalsOf(runs, t))
		most = append(most, fmt.Sprintf("%s %d", t, m))
		if m > demoExportLimit {
			problems = append(problems, fmt.Sprintf("tenant %s ran %d exports at once, over its limit of %d", t, m, demoExportLimit))
		}
	}
	fmt.Fprintf(out, "  Most exports running at once, per tenant (limit %d): %s.\n", demoExportLimit, strings.Join(most, ", "))
	problems = append(problems, waits(out, runs)...)
	for _, t := range demoTargets {
		ran := len(intervalsOf(runs, t))
		m := maxOverlap(intervalsOf(runs, t))
		fmt.Fprintf(out, "  Refresh %-9s %d run(s), at most %d at once (limit 1); %d duplicate(s) discarded at enqueue, never stored.\n",
			t+":", ran, m, d.dropped[t])
		if m > 1 {
			problems = append(problems, fmt.Sprintf("refresh %s ran %d at once, over its limit of 1", t, m))
		}
	}
	perWorker := map[string]int{}
	var all []interval
	for _, r := range runs {
		perWorker[r.worker]++
		all = append(all, interval{r.start, r.end})
	}
	var spread []string
	for i := range demoWorkers {
		name := fmt.Sprintf("worker-%d", i+1)
		spread = append(spread, fmt.Sprintf("%s %d", name, perWorker[name]))
	}
	fmt.Fprintf(out, "  Jobs run per worker: %s.\n", strings.Join(spread, ", "))
	fmt.Fprintf(out, "  Total: %d jobs ran in %s, at most %d at once over all keys; final states: %s.\n",
		len(runs), secs(total), maxOverlap(all), formatStates(states))

	if n := states[bq.StateCompleted]; n != len(d.ids) || len(runs) != len(d.ids) {
		problems = append(problems, fmt.Sprintf("%d jobs stored, %d completed, %d runs recorded", len(d.ids), n, len(runs)))
	}
	if len(problems) > 0 {
		return fmt.Errorf("demo: %s", strings.Join(problems, "; "))
	}
	fmt.Fprintf(out, "  Every limit held across %d workers.\n", demoWorkers)
	return nil
}

// waits reports how long each tenant's exports waited to start (all were
// enqueued before the workers started) and checks the selling point: the
// large tenant's backlog, enqueued first, delays no small tenant.
func waits(out io.Writer, runs []execution) (problems []string) {
	fmt.Fprintf(out, "  Wait before each tenant's exports started (all enqueued before the workers started):\n")
	last := map[string]time.Duration{}
	for _, t := range demoTenants {
		var starts []time.Duration
		for _, r := range runs {
			if r.kind == "export" && r.key == t {
				starts = append(starts, r.start)
			}
		}
		if len(starts) == 0 {
			continue
		}
		slices.Sort(starts)
		last[t] = starts[len(starts)-1]
		size := ""
		if t == demoLarge {
			size = ", the large tenant"
		}
		fmt.Fprintf(out, "    %-8s %2d exports%s: first started at %s, median %s, last %s\n",
			t, len(starts), size, secs(starts[0]), secs(starts[len(starts)/2]), secs(last[t]))
	}
	var small time.Duration
	for _, t := range demoTenants {
		if t == demoLarge {
			continue
		}
		small = max(small, last[t])
		if last[t] >= last[demoLarge] {
			problems = append(problems, fmt.Sprintf("tenant %s waited as long as %s's backlog (%s)", t, demoLarge, secs(last[t])))
		}
	}
	fmt.Fprintf(out, "  The small tenants' exports had all started by %s, though %s's backlog of %d was enqueued before\n"+
		"  them (its last export started at %s): a big backlog on one key delays no other key. A queue worked\n"+
		"  oldest first without per-tenant limits would have started theirs only after all %d of %s's.\n",
		secs(small), demoLarge, demoExports[demoLarge], secs(last[demoLarge]), demoExports[demoLarge], demoLarge)
	return problems
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

func formatStates(states map[bq.JobState]int) string {
	var parts []string
	for s, n := range states {
		parts = append(parts, fmt.Sprintf("%d %s", n, s))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// interval is one run's [start, end).
type interval struct{ start, end time.Duration }

func intervalsOf(runs []execution, key string) []interval {
	var out []interval
	for _, r := range runs {
		if r.key == key {
			out = append(out, interval{r.start, r.end})
		}
	}
	return out
}

// maxOverlap is the largest number of intervals running at one instant.
// An interval ending at the instant another starts does not overlap it.
func maxOverlap(ivs []interval) int {
	type event struct {
		at    time.Duration
		delta int
	}
	events := make([]event, 0, 2*len(ivs))
	for _, iv := range ivs {
		events = append(events, event{iv.start, +1}, event{iv.end, -1})
	}
	// Ends sort before starts at the same instant.
	slices.SortFunc(events, func(a, b event) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta))
	})
	best, cur := 0, 0
	for _, e := range events {
		cur += e.delta
		best = max(best, cur)
	}
	return best
}

// runningAt counts the intervals running at instant t.
func runningAt(ivs []interval, t time.Duration) int {
	n := 0
	for _, iv := range ivs {
		if iv.start <= t && t < iv.end {
			n++
		}
	}
	return n
}

// lane draws ivs as width columns of bin each: every column shows the
// most intervals running at once within it ('.' for none).
func lane(ivs []interval, bin time.Duration, width int) string {
	var b strings.Builder
	for i := range width {
		from, to := time.Duration(i)*bin, time.Duration(i+1)*bin
		// Within [from, to) the count only rises at a start.
		most := runningAt(ivs, from)
		for _, iv := range ivs {
			if iv.start >= from && iv.start < to {
				most = max(most, runningAt(ivs, iv.start))
			}
		}
		switch {
		case most == 0:
			b.WriteByte('.')
		case most > 9:
			b.WriteByte('+')
		default:
			b.WriteByte(byte('0' + most))
		}
	}
	return b.String()
}

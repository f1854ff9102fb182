package conformance

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// staleTolerance is the stale-run overlap counted as the documented
// residue of a pause (job code between two checks of ctx, plus the time
// the OS takes to schedule a resumed process on a loaded machine) rather
// than as a broken limit. Today's failures overlap for seconds; the goal
// is under the 10 ms check interval. BQ_STALE_TOLERANCE overrides it.
func staleTolerance() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("BQ_STALE_TOLERANCE")); err == nil {
		return d
	}
	return 100 * time.Millisecond
}

// inFlightAllowance: a run of the paused process that ended this shortly
// before the pause may have had its completion in that process's hands
// (queued, or the very transaction frozen), so running it again is
// at-least-once delivery, not a lost completion.
const inFlightAllowance = 2 * time.Second

// window is a span during which process pid executed nothing: from the
// SIGSTOP sent to the SIGCONT sent.
type window struct {
	pid        int
	stop, cont time.Time
}

// outcomeRun is a recorded run with how it ended ("ok", "ctx: ...",
// "error: ..."; "" when it never recorded an end).
type outcomeRun struct {
	run
	Outcome string
	open    bool // no end recorded
}

func (h *harness) outcomeRuns(t *testing.T) []outcomeRun {
	t.Helper()
	rows, err := h.raw.QueryContext(context.Background(),
		`SELECT job_id, kind, jkey, pid, started_ns, ended_ns, outcome FROM test_runs ORDER BY started_ns`)
	if err != nil {
		t.Fatalf("read runs: %v", err)
	}
	defer rows.Close()
	var out []outcomeRun
	for rows.Next() {
		var r outcomeRun
		var start, end int64
		if err := rows.Scan(&r.JobID, &r.Kind, &r.Key, &r.PID, &start, &end, &r.Outcome); err != nil {
			t.Fatal(err)
		}
		r.Start, r.End = time.Unix(0, start), time.Unix(0, end)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read runs: %v", err)
	}
	return out
}

// pauseReport is what a pause did to the runs of one scenario.
type pauseReport struct {
	w   window
	tol time.Duration
	// overlap per key, the pause excluded: a paused run counts before
	// the stop and again from tol after the resume.
	overlap map[string]int
	// tails: how long each run caught by the pause went on after the
	// resume; stale: the tails that ran beside another run of the same
	// job or key (its re-run, or the job that took its slot).
	tails, stale []time.Duration
	// Re-runs, by why the earlier run did not count: caught by the pause,
	// its completion in flight in the paused process, cut short by its
	// context on a live process (it never completed), or unexplained.
	paused, inFlight, cutShort, unexplained []string
	// rerunAfter: from the stop until the fleet started again each job
	// the pause caught.
	rerunAfter []time.Duration
	open       []string // runs that never recorded an end
	caught     []string // the runs the pause caught
	runs       int
}

// analysePause splits the runs of the paused process around w and
// measures overlap, stale runs and re-runs.
func analysePause(runs []outcomeRun, w window) *pauseReport {
	rep := &pauseReport{w: w, tol: staleTolerance(), runs: len(runs)}
	end := time.Now()
	for i := range runs {
		if runs[i].End.Before(runs[i].Start) {
			runs[i].open, runs[i].End = true, end
			rep.open = append(rep.open, describeRun(runs[i], w))
		}
	}
	caught := func(r outcomeRun) bool { // executing when the pause began
		return r.PID == w.pid && r.Start.Before(w.stop) && r.End.After(w.stop)
	}

	// Pieces of execution, for overlap.
	var pieces []run
	for _, r := range runs {
		if !caught(r) {
			pieces = append(pieces, r.run)
			continue
		}
		before := r.run
		before.End = w.stop
		pieces = append(pieces, before)
		if r.End.After(w.cont.Add(rep.tol)) {
			after := r.run
			after.Start = w.cont.Add(rep.tol)
			pieces = append(pieces, after)
		}
	}
	rep.overlap = maxOverlap(pieces)

	// Stale tails: a caught run's execution after the resume beside a run
	// of the same job or key that the pause did not catch.
	for _, r := range runs {
		if !caught(r) {
			continue
		}
		rep.caught = append(rep.caught, fmt.Sprintf("job %d (%s %q): %s", r.JobID, r.Kind, r.Key, describeRun(r, w)))
		// An end stamped between the two signals came just as the
		// process resumed (SIGCONT lands before the test reads its clock).
		tail := max(r.End.Sub(w.cont), 0)
		rep.tails = append(rep.tails, tail)
		if tail == 0 {
			continue
		}
		for _, o := range runs {
			if caught(o) || (o.JobID != r.JobID && (r.Key == "" || o.Key != r.Key || o.Kind != r.Kind)) {
				continue
			}
			if o.Start.Before(r.End) && o.End.After(w.cont) {
				rep.stale = append(rep.stale, tail)
				break
			}
		}
	}

	// Re-runs: every run of a job but its last must have a reason.
	byJob := map[int64][]outcomeRun{}
	var order []int64
	for _, r := range runs {
		if _, ok := byJob[r.JobID]; !ok {
			order = append(order, r.JobID)
		}
		byJob[r.JobID] = append(byJob[r.JobID], r)
	}
	for _, id := range order {
		rs := byJob[id]
		if len(rs) < 2 {
			continue
		}
		var desc []string
		for _, r := range rs {
			desc = append(desc, describeRun(r, w))
		}
		line := fmt.Sprintf("job %d (%s %q): %s", id, rs[0].Kind, rs[0].Key, strings.Join(desc, "; "))
		worst := 0 // 1 paused, 2 in flight, 3 cut short, 4 unexplained
		for i, r := range rs[:len(rs)-1] {
			why := 4
			switch {
			case caught(r) || (r.PID == w.pid && r.open):
				why = 1
				rep.rerunAfter = append(rep.rerunAfter, rs[i+1].Start.Sub(w.stop))
			case r.PID == w.pid && !r.End.After(w.stop) && w.stop.Sub(r.End) <= inFlightAllowance:
				why = 2
				rep.rerunAfter = append(rep.rerunAfter, rs[i+1].Start.Sub(w.stop))
			case strings.HasPrefix(r.Outcome, "ctx:"):
				why = 3
			}
			worst = max(worst, why)
		}
		switch worst {
		case 1:
			rep.paused = append(rep.paused, line)
		case 2:
			rep.inFlight = append(rep.inFlight, line)
		case 3:
			rep.cutShort = append(rep.cutShort, line)
		default:
			rep.unexplained = append(rep.unexplained, line)
		}
	}
	return rep
}

// describeRun spells a run with its instants relative to the stop.
func describeRun(r outcomeRun, w window) string {
	rel := func(t time.Time) string { return fmt.Sprintf("%+.3fs", t.Sub(w.stop).Seconds()) }
	end := rel(r.End)
	if r.open {
		end = "never"
	}
	who := fmt.Sprintf("pid %d", r.PID)
	if r.PID == w.pid {
		who += " (paused)"
	}
	return fmt.Sprintf("%s %s..%s %s", who, rel(r.Start), end, cmp.Or(r.Outcome, "-"))
}

// check asserts the properties every pause scenario pins: no key beyond
// its limit with the pause excluded, no stale run past the tolerance, no
// unexplained re-run, no run left without an end.
func (rep *pauseReport) check(t *testing.T, limits map[string]int) {
	t.Helper()
	for key, to := range limits {
		if rep.overlap[key] > to {
			t.Errorf("key %q: %d runs overlapped (pause excluded, stale tails past %s counted), limit %d", key, rep.overlap[key], rep.tol, to)
		}
	}
	for _, d := range rep.stale {
		if d > rep.tol {
			t.Errorf("a run caught by the pause went on %s after the resume beside a run of its job or key (tolerance %s)", d.Round(time.Millisecond), rep.tol)
		}
	}
	for _, line := range rep.unexplained {
		t.Errorf("unexplained re-run: %s", line)
	}
	for _, line := range rep.open {
		t.Errorf("run never recorded its end: %s", line)
	}
}

// log writes the report's figures.
func (rep *pauseReport) log(t *testing.T, db string, limits map[string]int) {
	t.Helper()
	var keys []string
	for k := range limits {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var ov []string
	for _, k := range keys {
		ov = append(ov, fmt.Sprintf("%s %d/%d", k, rep.overlap[k], limits[k]))
	}
	t.Logf("%s: pause %s, %d runs; max overlap per key (pause excluded) vs To: %s",
		db, rep.w.cont.Sub(rep.w.stop).Round(time.Millisecond), rep.runs, strings.Join(ov, ", "))
	t.Logf("%s: stale-run overlap: max %s, each %s (tolerance %s); tails after resume of the %d runs the pause caught: %s",
		db, maxDur(rep.stale), durs(rep.stale), rep.tol, len(rep.tails), durs(rep.tails))
	t.Logf("%s: re-runs explained: %d caught by the pause, %d completion in flight in the paused process; %d cut short by ctx on a live process; unexplained: %d",
		db, len(rep.paused), len(rep.inFlight), len(rep.cutShort), len(rep.unexplained))
	for _, group := range []struct {
		name  string
		lines []string
	}{{"run caught by the pause", rep.caught}, {"re-run, caught by the pause", rep.paused}, {"re-run, in flight", rep.inFlight},
		{"re-run, cut short", rep.cutShort}, {"re-run, UNEXPLAINED", rep.unexplained}} {
		for i, line := range group.lines {
			if i == 10 {
				t.Logf("%s:   %s: ... %d more", db, group.name, len(group.lines)-10)
				break
			}
			t.Logf("%s:   %s: %s", db, group.name, line)
		}
	}
	if len(rep.rerunAfter) > 0 {
		t.Logf("%s: the fleet re-ran the paused process's jobs %s after the stop (first %s, last %s)",
			db, durs(rep.rerunAfter), minDur(rep.rerunAfter), maxDur(rep.rerunAfter))
	} else {
		t.Logf("%s: the fleet re-ran none of the paused process's jobs", db)
	}
}

func durs(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = fmtDur(d)
	}
	return "[" + strings.Join(s, " ") + "]"
}

func fmtDur(d time.Duration) string {
	if d < 10*time.Millisecond && d > -10*time.Millisecond {
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

func maxDur(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	return fmtDur(slices.Max(ds))
}

func minDur(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	return fmtDur(slices.Min(ds))
}

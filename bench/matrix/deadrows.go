package main

import (
	"cmp"
	"errors"
	"fmt"
	"strings"

	"github.com/bqueue/bq/internal/humanize"
	"github.com/bqueue/bq/internal/pgstats"
)

// deadRowsTitle opens the dead-rows section; --only rewrites the report
// from there on.
const deadRowsTitle = "\n## Dead tuples and table size per 1M jobs: bq vs River\n"

// rawLine follows the targets in every report; a report written before
// the dead-rows section existed is spliced there.
const rawLine = "\nRaw JSON lines of every run:"

// deadRows is the section of the --table-stats runs: per run, then per
// table.
func (r report) deadRows() string {
	var runs []item
	var first *pgstats.Report
	for _, it := range r.items {
		if rs := r.results[it.id]; it.tables && len(rs) > 0 && rs[0].Tables != nil {
			runs = append(runs, it)
			first = cmp.Or(first, rs[0].Tables)
		}
	}
	if len(runs) == 0 {
		return ""
	}
	var b strings.Builder
	sv := first.Server
	b.WriteString(deadRowsTitle)
	fmt.Fprintf(&b, `
Measured on %s, each run once (these are counts, not timings), by
`+"`--table-stats`"+`: `+"`pg_stat_user_tables`"+` and `+"`pg_total_relation_size`"+` of every
table of the run's fresh schema (bq's `+"`bq_*`"+`, River's `+"`river_*`"+`), read after
migrating and again after the drain, once the run's connections had
closed. A run drains the jobs the matrix's drain and keyed runs use
(column *jobs*); every figure is scaled linearly to 1,000,000 jobs
(× 1,000,000 ÷ jobs), sizes included, so the few pages of tables that do
not grow with the jobs (processes, River's leader and queue) weigh more
the fewer the jobs. *Made* counts the rows updated or
deleted, each of which leaves a dead tuple behind until page pruning or
vacuum removes it; *left* is `+"`n_dead_tup`"+` after the drain; *growth* is
table, TOAST and index bytes after the drain minus after migrating.
Autovacuum *off*: the run disabled it on its own tables
(`+"`ALTER TABLE … SET (autovacuum_enabled = false)`"+`), so nothing made was
vacuumed away; *on*: as the server has it. The server: PostgreSQL %s,
autovacuum=%s, naptime %s, vacuum scale factor %s, threshold %s, cost
delay %s.`, r.when(), sv.Version, sv.Autovacuum, sv.Naptime,
		sv.ScaleFactor, sv.Threshold, sv.CostDelay)
	if sv.Autovacuum != "on" {
		b.WriteString(" With autovacuum off on the server, the *on* runs could not be vacuumed either.")
	}
	b.WriteString("\n\n")

	var rows [][]string
	for _, it := range runs {
		res := r.results[it.id][0]
		t := res.Tables.Total()
		per := func(n int64) string { return humanize.Thousands(int(pgstats.PerMillion(n, res.Jobs))) }
		av := res.Tables.Autovacuum
		if av == "on" && res.Tables.Server.Autovacuum != "on" {
			av = "on (server off)"
		}
		rows = append(rows, []string{it.id, av, humanize.Thousands(res.Jobs),
			fmt.Sprintf("%s (%.2f/job)", per(t.DeadMade()), float64(t.DeadMade())/float64(res.Jobs)),
			per(t.HOTUpdated), per(t.DeadLeft), fmt.Sprintf("%d / %d", t.Autovacuums, t.Autoanalyzes),
			mb(t.Grown, res.Jobs), "`" + r.command(it) + "`"})
	}
	writeTable(&b, []string{"run", "autovacuum", "jobs", "dead tuples made per 1M jobs", "of them HOT updates",
		"dead tuples left per 1M", "autovacuum / autoanalyze runs", "growth MB per 1M", "command"}, rows)
	if ratio := r.deadRatio("pg/bq/drain-dead", "pg/river/drain-dead"); ratio != "" {
		fmt.Fprintf(&b, "\nUnkeyed drain with autovacuum off, bq ÷ River: %s.\n", ratio)
	}

	b.WriteString("\nPer table, autovacuum off (tables with nothing counted left out):\n\n")
	rows = rows[:0]
	for _, it := range runs {
		res := r.results[it.id][0]
		if res.Tables.Autovacuum != "off" {
			continue
		}
		for _, c := range res.Tables.Tables {
			if c.Inserted+c.DeadMade()+c.DeadLeft == 0 {
				continue
			}
			perJob := func(n int64) string { return fmt.Sprintf("%.3f", float64(n)/float64(res.Jobs)) }
			rows = append(rows, []string{it.id, "`" + c.Table + "`", perJob(c.Inserted),
				perJob(c.Updated) + " (" + perJob(c.HOTUpdated) + ")", perJob(c.Deleted), perJob(c.DeadMade()),
				humanize.Thousands(int(pgstats.PerMillion(c.DeadLeft, res.Jobs))), mb(c.Grown, res.Jobs)})
		}
	}
	writeTable(&b, []string{"run", "table", "inserted per job", "updated per job (HOT)", "deleted per job",
		"dead made per job", "dead left per 1M", "growth MB per 1M"}, rows)
	return b.String()
}

// deadRatio compares two runs' dead tuples made per job and growth per
// job, or is empty when either did not run.
func (r report) deadRatio(a, b string) string {
	ra, rb := r.results[a], r.results[b]
	if len(ra) == 0 || len(rb) == 0 || ra[0].Tables == nil || rb[0].Tables == nil {
		return ""
	}
	ta, tb := ra[0].Tables.Total(), rb[0].Tables.Total()
	perJob := func(n int64, jobs int) float64 { return float64(n) / float64(jobs) }
	return fmt.Sprintf("%.2f× the dead tuples per job (%.2f ÷ %.2f), %.2f× the growth per job",
		perJob(ta.DeadMade(), ra[0].Jobs)/perJob(tb.DeadMade(), rb[0].Jobs),
		perJob(ta.DeadMade(), ra[0].Jobs), perJob(tb.DeadMade(), rb[0].Jobs),
		perJob(ta.Grown, ra[0].Jobs)/perJob(tb.Grown, rb[0].Jobs))
}

// splice puts tail in place of old's dead-rows section and what follows
// it; a report from before that section had it gets tail after its
// targets.
func splice(old, tail string) (string, error) {
	at := strings.Index(old, deadRowsTitle)
	if at < 0 {
		at = strings.Index(old, rawLine)
	}
	if at < 0 {
		return "", errors.New("no dead-rows section nor raw-results line to splice at: run the whole matrix once")
	}
	return old[:at] + tail, nil
}

func mb(bytes int64, jobs int) string {
	return fmt.Sprintf("%.1f", pgstats.PerMillion(bytes, jobs)/(1<<20))
}

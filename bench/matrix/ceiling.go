package main

import (
	"fmt"
	"strings"
)

// fraction is one throughput shown as a fraction of its database's
// ceiling (bench/ceiling), measured in the same round.
type fraction struct {
	db, what string // e.g. "PostgreSQL", "bq drain work/s"
	item     string // the throughput's item
	ceiling  string // the ceiling's item
	enqueue  bool   // enqueue/s against the enqueue ceiling, else work/s
}

func fractions() []fraction {
	return []fraction{
		{"PostgreSQL", "bq drain work/s", "pg/bq/drain", "pg/ceiling/claim-complete", false},
		{"PostgreSQL", "River drain work/s", "pg/river/drain", "pg/ceiling/claim-complete", false},
		{"PostgreSQL", "bq keyed work/s", "pg/bq/keyed", "pg/ceiling/claim-complete", false},
		{"PostgreSQL", "bq fleet of 16 processes work/s", "pg/bq/fleet-16", "pg/ceiling/claim-complete", false},
		{"PostgreSQL", "bq EnqueueMany/s", "pg/bq/drain", "pg/ceiling/enqueue", true},
		{"PostgreSQL", "River InsertMany/s", "pg/river/drain", "pg/ceiling/enqueue", true},
		{"MySQL", "bq drain work/s", "mysql/bq/drain", "mysql/ceiling/claim-complete", false},
		{"MySQL", "bq drain work/s (÷ the batch-27 ceiling)", "mysql/bq/drain", "mysql/ceiling/claim-complete-27", false},
		{"MySQL", "bq keyed work/s", "mysql/bq/keyed", "mysql/ceiling/claim-complete", false},
		{"MySQL", "bq fleet of 16 processes work/s", "mysql/bq/fleet-16", "mysql/ceiling/claim-complete", false},
		{"MySQL", "bq EnqueueMany/s", "mysql/bq/drain", "mysql/ceiling/enqueue", true},
	}
}

// ceilingTable shows each throughput of fractions() that ran as a
// fraction of its ceiling, the ratio taken within each round.
func (r report) ceilingTable() string {
	var rows [][]string
	for _, f := range fractions() {
		a, c := r.results[f.item], r.results[f.ceiling]
		if len(a) == 0 || len(c) == 0 {
			continue
		}
		get := func(r *result) float64 { return r.WorkPerS }
		if f.enqueue {
			get = func(r *result) float64 { return r.EnqueuePerS }
		}
		vals := ratios(a, c, get)
		if len(vals) == 0 {
			continue
		}
		rows = append(rows, []string{f.db, f.what + " (" + f.item + ")", "`" + f.ceiling + "`", fmtVals(vals, 2),
			fmtVals(field(a, get), 0), fmtVals(field(c, get), 0)})
	}
	return section("Fraction of the database's ceiling",
		"What the database alone reached with the least work a job of this design costs (bench/ceiling: "+
			"pgbench on PostgreSQL, a Go loop on MySQL; see the notes below), run in the same rounds; "+
			"each fraction is taken within a round. No ceiling is measured for SQLite.",
		[]string{"database", "throughput", "ceiling", "fraction of the ceiling", "throughput jobs/s", "ceiling jobs/s"}, rows)
}

// fleetTable shows what the --processes runs measured besides jobs/s.
func (r report) fleetTable() string {
	var rows [][]string
	for _, it := range r.items {
		rs := r.results[it.id]
		if len(rs) == 0 || rs[0].Fleet == nil {
			continue
		}
		fl := func(f func(*fleet) float64, prec int) string {
			return fmtVals(field(rs, func(r *result) float64 {
				if r.Fleet == nil {
					return 0
				}
				return f(r.Fleet)
			}), prec)
		}
		rows = append(rows, []string{it.id, fmt.Sprintf("%d × %d", rs[0].Fleet.Processes, rs[0].Slots),
			fmtVals(field(rs, func(r *result) float64 { return r.WorkPerS }), 0),
			fl(func(f *fleet) float64 { return float64(f.ConnsPeak) }, 0),
			fl(func(f *fleet) float64 { return float64(f.ConnsPerProcess) }, 0),
			fl(func(f *fleet) float64 { return f.WakeupsPerJob }, 4),
			fl(func(f *fleet) float64 { return f.WakeupReadsPerJob }, 4)})
	}
	return section("Fleet (bq bench --processes)",
		"The drain worked by N child processes (fleet-N; fleet-keyed-N: 1,000 keys, To=2; fleet-hotkey-N: one key, "+
			"To=50, its limit held across the processes), the parent only enqueueing and measuring: jobs/s, the server "+
			"connections the run held at peak (sampled every 100 ms, the parent's included), the connections each "+
			"process may open (its --pool and, on PostgreSQL, the listener's), and the wake-ups sent per job (PostgreSQL NOTIFYs, MySQL signal-log rows), each of "+
			"which every process receives or reads (few in a drain: its jobs are enqueued while the queue is paused). "+
			"The peak RSS of these rows in the results is the parent's.",
		[]string{"run", "processes × slots", "work jobs/s", "server conns peak", "conns per process",
			"wake-ups per job", "wake-up reads per job"}, rows)
}

// rateTable shows the --mode rate runs.
func (r report) rateTable() string {
	var rows [][]string
	for _, it := range r.items {
		rs := r.results[it.id]
		if len(rs) == 0 || rs[0].Mode != "rate" {
			continue
		}
		f := func(fn func(*result) float64, prec int) string { return fmtVals(field(rs, fn), prec) }
		rows = append(rows, []string{it.id, f(func(r *result) float64 { return r.RateTargetPerS }, 0),
			f(func(r *result) float64 { return r.RatePerS }, 1), f(func(r *result) float64 { return r.RateRatio }, 3),
			f(func(r *result) float64 { return float64(r.RateMaxWindow) }, 0) + fmt.Sprintf(" (limit %d)", rs[0].RateLimit),
			f(func(r *result) float64 { return float64(r.RateLate) }, 0)})
	}
	return section("Rate limits (bq bench --mode rate)",
		"One rate key, all jobs enqueued up front: the starts/s achieved after the first period's allowance, "+
			"its ratio to the configured rate, the most starts of the key within any one period (never above the "+
			"limit, or the run fails), and the runs that missed their start slack.",
		[]string{"run", "configured starts/s", "achieved starts/s", "ratio", "most starts in one period",
			"late runs"}, rows)
}

// section is a report section: its heading, its intro and its table;
// nothing when the table has no rows.
func section(title, intro string, header []string, rows [][]string) string {
	if len(rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## " + title + "\n\n" + intro + "\n\n")
	writeTable(&b, header, rows)
	return b.String()
}

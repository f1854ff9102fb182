package main

import (
	"cmp"
	_ "embed"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/humanize"
)

// notes is the hand-written part of the report: reading the numbers,
// profiles, and what the engine should change.
//
//go:embed notes.md
var notes string

// target is one of bq's performance targets, checked as a ratio.
type target struct {
	what    string
	goal    string
	ok      func(v float64) bool
	measure func(get func(id string) []*result) (vals []float64, unit string)
}

// targets lists bq's targets; netDelay is the network rows' delay, 0 when
// the matrix leaves them out (and their targets with them).
func targets(netDelay time.Duration) []target {
	work := func(r *result) float64 { return r.WorkPerS }
	enq := func(r *result) float64 { return r.EnqueuePerS }
	p50 := func(r *result) float64 { return r.P50MS }
	p99 := func(r *result) float64 { return r.P99MS }
	ratio := func(a, b string, f func(*result) float64) func(get func(string) []*result) ([]float64, string) {
		return func(get func(string) []*result) ([]float64, string) { return ratios(get(a), get(b), f), "×" }
	}
	atLeast := func(x float64) func(float64) bool { return func(v float64) bool { return v >= x } }
	atMost := func(x float64) func(float64) bool { return func(v float64) bool { return v <= x } }
	backlog := func(id string) func(get func(string) []*result) ([]float64, string) {
		return func(get func(string) []*result) ([]float64, string) {
			return field(get(id), func(r *result) float64 { return r.BacklogRatio }), "×"
		}
	}
	ts := []target{
		{"PostgreSQL drain: bq work/s ÷ River work/s", "≥ 1.5", atLeast(1.5), ratio("pg/bq/drain", "pg/river/drain", work)},
		{"PostgreSQL drain: bq EnqueueMany/s ÷ River InsertMany/s", "≥ 1", atLeast(1), ratio("pg/bq/drain", "pg/river/drain", enq)},
		{"PostgreSQL drain: bq work/s ÷ Graphile Worker work/s (its best settings)", "≥ 1.2", atLeast(1.2), ratio("pg/bq/drain", "pg/graphile/drain", work)},
		{"PostgreSQL drain: bq EnqueueMany/s ÷ Graphile Worker addJobs/s", "≥ 1", atLeast(1), ratio("pg/bq/drain", "pg/graphile/drain", enq)},
		{"PostgreSQL drain: bq work/s ÷ the claim-complete ceiling", "≥ 0.6", atLeast(0.6), ratio("pg/bq/drain", "pg/ceiling/claim-complete", work)},
		{"PostgreSQL EnqueueMany/s ÷ the enqueue ceiling", "≥ 0.6", atLeast(0.6), ratio("pg/bq/drain", "pg/ceiling/enqueue", enq)},
		{"PostgreSQL keyed (1,000 keys, To=2) ÷ bq unkeyed drain", "≥ 0.8", atLeast(0.8), ratio("pg/bq/keyed", "pg/bq/drain", work)},
		{"PostgreSQL keyed EnqueueMany/s ÷ unkeyed EnqueueMany/s", "≥ 0.6", atLeast(0.6), ratio("pg/bq/keyed", "pg/bq/drain", enq)},
		{"PostgreSQL hotkey (1 key, To=50) ÷ bq unkeyed drain", "≥ 0.7", atLeast(0.7), ratio("pg/bq/hotkey", "pg/bq/drain", work)},
		{"PostgreSQL keyed with a second key per job ÷ keyed with one", "≥ 0.7", atLeast(0.7), ratio("pg/bq/keyed-second", "pg/bq/keyed", work)},
		{"PostgreSQL keyed under fair share ÷ keyed (1,000 keys)", "≥ 0.7", atLeast(0.7), ratio("pg/bq/keyed-fair", "pg/bq/keyed", work)},
		{"PostgreSQL keyed under fair share ÷ keyed (10 keys, deep)", "≥ 0.7", atLeast(0.7), ratio("pg/bq/keyed-fair-deep", "pg/bq/keyed-deep", work)},
		{"PostgreSQL fleet: 16 processes ÷ 1 (drain work/s, 25 slots each)", "≥ 0.8", atLeast(0.8), ratio("pg/bq/fleet-16", "pg/bq/fleet-1", work)},
		{"PostgreSQL rate limit: starts/s achieved ÷ the configured rate (500/s)", "≥ 0.95", atLeast(0.95), func(get func(string) []*result) ([]float64, string) {
			return field(get("pg/bq/rate"), func(r *result) float64 { return r.RateRatio }), "×"
		}},
		{"MySQL drain: bq work/s ÷ the MariaDB claim-complete ceiling (batch 100)", "≥ 0.5", atLeast(0.5), ratio("mysql/bq/drain", "mysql/ceiling/claim-complete", work)},
		{"MySQL fleet: 16 processes ÷ 1 (drain work/s, 25 slots each)", "≈ (no target)", atLeast(0), ratio("mysql/bq/fleet-16", "mysql/bq/fleet-1", work)},
		{"MySQL keyed EnqueueMany/s ÷ unkeyed EnqueueMany/s", "≥ 0.6", atLeast(0.6), ratio("mysql/bq/keyed", "mysql/bq/drain", enq)},
		{"MySQL keyed (1,000 keys, To=2) ÷ bq unkeyed drain", "≥ 0.8", atLeast(0.8), ratio("mysql/bq/keyed", "mysql/bq/drain", work)},
		{"SQLite keyed (1,000 keys, To=2) ÷ bq unkeyed drain", "≥ 0.75", atLeast(0.75), ratio("sqlite/bq/keyed", "sqlite/bq/drain", work)},
		{"SQLite keyed EnqueueMany/s ÷ unkeyed EnqueueMany/s", "≥ 0.6", atLeast(0.6), ratio("sqlite/bq/keyed", "sqlite/bq/drain", enq)},
		{"SQLite hotkey (1 key, To=50) ÷ bq unkeyed drain", "≥ 0.7", atLeast(0.7), ratio("sqlite/bq/hotkey", "sqlite/bq/drain", work)},
		{"SQLite keyed with a second key per job ÷ keyed with one", "≥ 0.7", atLeast(0.7), ratio("sqlite/bq/keyed-second", "sqlite/bq/keyed", work)},
		{"SQLite keyed under fair share ÷ keyed (1,000 keys)", "≥ 0.7", atLeast(0.7), ratio("sqlite/bq/keyed-fair", "sqlite/bq/keyed", work)},
		{"SQLite keyed under fair share ÷ keyed (10 keys, deep)", "≥ 0.7", atLeast(0.7), ratio("sqlite/bq/keyed-fair-deep", "sqlite/bq/keyed-deep", work)},
		{"MySQL keyed with a second key per job ÷ keyed with one", "≥ 0.7", atLeast(0.7), ratio("mysql/bq/keyed-second", "mysql/bq/keyed", work)},
		{"MySQL keyed under fair share ÷ keyed (1,000 keys)", "≥ 0.7", atLeast(0.7), ratio("mysql/bq/keyed-fair", "mysql/bq/keyed", work)},
		{"MySQL keyed under fair share ÷ keyed (10 keys, deep)", "≥ 0.7", atLeast(0.7), ratio("mysql/bq/keyed-fair-deep", "mysql/bq/keyed-deep", work)},
		{"PostgreSQL steady p50: bq ÷ River", "≤ 1", atMost(1), ratio("pg/bq/steady", "pg/river/steady", p50)},
		{"PostgreSQL steady p99: bq ÷ River", "≤ 1", atMost(1), ratio("pg/bq/steady", "pg/river/steady", p99)},
		{"SQLite drain: bq work/s ÷ River (riversqlite) work/s", "≥ 2", atLeast(2), ratio("sqlite/bq/drain", "sqlite/river/drain", work)},
		{"SQLite steady p99 at the steady rate (ms)", "≤ 20 ms", atMost(20), func(get func(string) []*result) ([]float64, string) {
			return field(get("sqlite/bq/steady"), p99), " ms"
		}},
		{"PostgreSQL backlog: handoff with the large line ÷ with the small line", "≤ 1.2", atMost(1.2), backlog("pg/bq/backlog")},
		{"MySQL backlog: handoff with the large line ÷ with the small line", "≤ 1.2", atMost(1.2), backlog("mysql/bq/backlog")},
		{"SQLite backlog: handoff with the large line ÷ with the small line", "≤ 1.2", atMost(1.2), backlog("sqlite/bq/backlog")},
		{"Peak RSS of a bq process with 100 slots (largest of all bq runs, MB)", "< 64 MB", func(v float64) bool { return v < 64 },
			func(get func(string) []*result) ([]float64, string) {
				most := 0.0
				for _, db := range []string{"pg", "sqlite", "mysql"} {
					for _, mode := range []string{"drain", "keyed", "hotkey", "steady"} {
						for _, r := range get(db + "/bq/" + mode) {
							most = max(most, r.PeakRSSMB)
						}
					}
				}
				if most == 0 {
					return nil, " MB"
				}
				return []float64{most}, " MB"
			}},
		{"PostgreSQL drain: default Config ÷ tuned Config", "≈ 1 (defaults are fast)", atLeast(0.9), ratio("pg/bq/drain-default", "pg/bq/drain", work)},
		{"SQLite drain: default Config ÷ tuned Config", "≈ 1 (defaults are fast)", atLeast(0.9), ratio("sqlite/bq/drain-default", "sqlite/bq/drain", work)},
		{"PostgreSQL steady p99: default Config ÷ tuned Config", "≈ 1", atMost(1.1), ratio("pg/bq/steady-default", "pg/bq/steady", p99)},
		{"SQLite steady p99: default Config ÷ tuned Config", "≈ 1", atMost(1.1), ratio("sqlite/bq/steady-default", "sqlite/bq/steady", p99)},
		{"PostgreSQL drain: pool_max_conns=16 ÷ pgx's default pool", "≈ (what a bigger pool buys)", atLeast(1), ratio("pg/bq/drain-pool16", "pg/bq/drain", work)},
		{"PostgreSQL steady p50: producer in another client (woken by LISTEN/NOTIFY) ÷ same client", "≈ (what a cross-process wake-up costs)", atMost(1), ratio("pg/bq/steady-remote", "pg/bq/steady", p50)},
	}
	if netDelay <= 0 {
		return ts
	}
	// Across a network (the -net items): the loopback rows' goals, each
	// row after its database's loopback keyed ratios; MySQL's hot key has
	// no goal on loopback either.
	across := " ÷ unkeyed drain across a network (--net-delay " + durationArg(netDelay) + ")"
	after := func(what string, add ...target) {
		i := slices.IndexFunc(ts, func(t target) bool { return t.what == what })
		ts = slices.Insert(ts, i+1, add...) // at the top should the row be gone (i = -1)
	}
	after("PostgreSQL hotkey (1 key, To=50) ÷ bq unkeyed drain",
		target{"PostgreSQL keyed (1,000 keys, To=2)" + across, "≥ 0.8", atLeast(0.8), ratio("pg/bq/keyed-net", "pg/bq/drain-net", work)},
		target{"PostgreSQL hotkey (1 key, To=50)" + across, "≥ 0.7", atLeast(0.7), ratio("pg/bq/hotkey-net", "pg/bq/drain-net", work)})
	after("MySQL keyed (1,000 keys, To=2) ÷ bq unkeyed drain",
		target{"MySQL keyed (1,000 keys, To=2)" + across, "≥ 0.8", atLeast(0.8), ratio("mysql/bq/keyed-net", "mysql/bq/drain-net", work)},
		target{"MySQL hotkey (1 key, To=50)" + across, "≥ 0.7", atLeast(0.7), ratio("mysql/bq/hotkey-net", "mysql/bq/drain-net", work)})
	return ts
}

// report is a run of the matrix (or a re-rendering of one) to write.
type report struct {
	items   []item
	results map[string][]*result // by item id, one per round
	s       sizes
	rounds  int
	pgDSN   string
	took    time.Duration
	at      time.Time // when the run ended
	raw     string    // where its JSON lines went
	// partial: only dead-rows items ran (--only); the report replaces the
	// dead-rows section and the notes of the file, keeping its head.
	partial bool
	only    string // --only's words, when some items ran
}

// write writes the report to out.
func (r report) write(out string) error {
	text := r.head() + r.tail()
	if r.partial {
		old, err := os.ReadFile(out)
		if err != nil {
			return fmt.Errorf("--only rewrites part of %s: %w", out, err)
		}
		if text, err = splice(string(old), r.tail()); err != nil {
			return fmt.Errorf("%s: %w", out, err)
		}
	}
	return os.WriteFile(out, []byte(text), 0o644)
}

// tail is the part of the report after the targets: the dead rows, the
// raw results' place and the notes.
func (r report) tail() string {
	raw := "\nRaw JSON lines of every run: `" + fullRaw + "` (not committed)"
	switch {
	case r.partial:
		raw += "; of the dead-rows runs, `" + r.raw + "`"
	case r.only != "":
		raw = "\nRaw JSON lines of these runs: `" + r.raw + "` (not committed)"
	}
	return r.deadRows() + raw + ".\n" + notes
}

// head is the report up to the targets, included.
func (r report) head() string {
	items, s, rounds, took := r.items, r.s, r.rounds, r.took
	var b strings.Builder
	get := func(id string) []*result { return r.results[id] }
	fmt.Fprintf(&b, `# Benchmarks

Written by `+"`make bench`"+` (bench/matrix) on %s, in %s. Do not edit by hand:
run `+"`make bench`"+` again.

The machine: %d CPUs (%s/%s), shared by the benchmark, the database
server and whatever else runs on it, so it is noisy. Every comparison is
therefore a ratio of two runs made side by side: the matrix runs in %d
rounds, each round runs every command once, a ratio is taken within each
round, and the tables show medians over the rounds (per-round values in
brackets). Jobs are no-ops; one process works them with %d slots.
Jobs are enqueued in batches of 1,000 from 2 goroutines at once (bq
EnqueueMany, River InsertMany: `+"`--producers 2`"+`, as the enqueue
ceiling uses 2 connections), then worked.
bq runs with `+"`--config tuned`"+` (PollInterval 50ms, DispatchInterval 100ms,
both documented Config fields) unless the row says default; River v0.51.2
runs with FetchCooldown 1ms and FetchPollInterval 50ms (bench/river);
Graphile Worker 0.17.3 (Node) with its best settings: concurrency equal
to bq's slots, localQueue 2,000 jobs fetched ahead, refetchDelay 10 ms,
completeJobBatchDelay 0 (bench/graphile), its jobs enqueued 1,000 at a
time by one producer (addJobs).
Work is timed from starting the workers until the database shows no
unfinished job. `+"`$PG`"+` is the PostgreSQL server; each run makes a fresh
schema `+"`bench_<random>`"+` and drops it afterwards, and each SQLite run a
fresh file in a temporary directory.

%s## Results (medians)

`, r.when(), took.Round(time.Second), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH,
		rounds, s.slots, r.onlyNote())
	var rows [][]string
	for _, it := range items {
		rs := get(it.id)
		if len(rs) == 0 || it.tables {
			continue
		}
		cmd := r.command(it)
		f := func(fn func(*result) float64, prec int) string {
			vals := field(rs, fn)
			if median(vals) == 0 {
				return "–"
			}
			return fmtVals(vals, prec)
		}
		rss := f(func(r *result) float64 { return r.PeakRSSMB }, 0)
		if strings.HasSuffix(it.id, "/backlog") {
			rows = append(rows, []string{it.id, "`" + cmd + "`", "–",
				fmt.Sprintf("handoff %s ms with %d blocked; %s ms with %d blocked", fmtVals(field(rs, func(r *result) float64 { return r.BacklogSmallMS }), 2),
					rs[0].BacklogSmall, fmtVals(field(rs, func(r *result) float64 { return r.BacklogLargeMS }), 2), rs[0].BacklogLarge),
				"–", "–", "–", rss})
			continue
		}
		rows = append(rows, []string{it.id, "`" + cmd + "`",
			f(func(r *result) float64 { return r.EnqueuePerS }, 0), f(func(r *result) float64 { return r.WorkPerS }, 0),
			f(func(r *result) float64 { return r.P50MS }, 2), f(func(r *result) float64 { return r.P95MS }, 2),
			f(func(r *result) float64 { return r.P99MS }, 2), rss})
	}
	writeTable(&b, []string{"run", "command", "enqueue jobs/s", "work jobs/s", "p50 ms", "p95 ms", "p99 ms", "peak RSS MB"}, rows)
	b.WriteString(r.keyedTable() + r.ceilingTable() + r.fleetTable() + r.rateTable())

	fmt.Fprintf(&b, "\n## Targets\n\nEach ratio is taken within a round, then the median over the rounds is shown (per-round values in brackets).\n\n")
	rows = rows[:0]
	for _, t := range targets(s.netDelay) {
		vals, unit := t.measure(get)
		if len(vals) == 0 {
			rows = append(rows, []string{t.what, t.goal, "not run", "–"})
			continue
		}
		m := median(vals)
		verdict := "met"
		switch {
		case strings.HasPrefix(t.goal, "≈"):
			verdict = "(for information)"
		case !t.ok(m):
			verdict = "**missed**"
		}
		rows = append(rows, []string{t.what, t.goal, fmtVals(vals, 2) + unit, verdict})
	}
	writeTable(&b, []string{"target", "goal", "measured", "verdict"}, rows)
	return b.String()
}

// onlyNote says, in a report of some items only, which ran.
func (r report) onlyNote() string {
	if r.only == "" {
		return ""
	}
	return "Only the items whose id contains one of `" + r.only + "` ran (`--only`); the rest of the matrix is not in this report.\n\n"
}

// when is when the run ended (now, for a results file that does not say).
func (r report) when() string {
	return cmp.Or(r.at, time.Now()).UTC().Format("2006-01-02 15:04 UTC")
}

// command is how to run item it by hand, the server's DSN shown as $PG.
func (r report) command(it item) string {
	shown := make([]string, len(it.args))
	for i, a := range it.args {
		shown[i] = humanize.RedactDSN(strings.Replace(a, r.pgDSN, "$PG", 1))
		if strings.ContainsAny(shown[i], "&?") {
			shown[i] = `"` + shown[i] + `"`
		}
	}
	switch it.bin {
	case "river":
		return "(cd bench/river && go run . " + strings.Join(shown, " ") + ")"
	case "ceiling":
		return "go run ./bench/ceiling " + strings.Join(shown, " ")
	case "graphile":
		return "(cd bench/graphile && npm ci && node bench.js " + strings.Join(shown, " ") + ")"
	}
	return "bq " + strings.Join(shown, " ")
}

// fmtVals shows the median and, for several runs, each run in brackets.
func fmtVals(vals []float64, prec int) string {
	s := fmt.Sprintf("%.*f", prec, median(vals))
	if len(vals) > 1 {
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = fmt.Sprintf("%.*f", prec, v)
		}
		s += " [" + strings.Join(parts, ", ") + "]"
	}
	return s
}

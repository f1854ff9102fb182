// Command matrix runs the benchmark matrix behind `make bench`: bq bench's
// workloads (fleet and rate runs included), River's peers and the
// databases' own ceilings (bench/ceiling) on SQLite, PostgreSQL and MySQL,
// round after round so that the runs compared with each other sit side by
// side in time, and writes the medians, the fractions of each ceiling and
// the ratios against bq's targets to docs/benchmarks.md.
//
//	go run ./bench/matrix --bq BIN --river BIN --ceiling BIN --dsn postgres://... --out docs/benchmarks.md
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/bqueue/bq/internal/pgstats"
)

// result is the JSON line of `bq bench --json` and of bench/river.
type result struct {
	System         string  `json:"system"`
	Mode           string  `json:"mode"`
	Driver         string  `json:"driver"`
	Config         string  `json:"config"`
	Jobs           int     `json:"jobs"`
	Slots          int     `json:"slots"`
	EnqueuePerS    float64 `json:"enqueue_per_s"`
	WorkPerS       float64 `json:"work_per_s"`
	P50MS          float64 `json:"p50_ms"`
	P95MS          float64 `json:"p95_ms"`
	P99MS          float64 `json:"p99_ms"`
	PeakRSSMB      float64 `json:"peak_rss_mb"`
	BacklogSmall   int     `json:"backlog_small"`
	BacklogLarge   int     `json:"backlog_large"`
	BacklogSmallMS float64 `json:"backlog_small_ms"`
	BacklogLargeMS float64 `json:"backlog_large_ms"`
	BacklogRatio   float64 `json:"backlog_ratio"`
	// Tables is what a --table-stats run left in its schema's tables.
	Tables *pgstats.Report `json:"tables"`
	// Fleet is what a --processes run measured besides throughput.
	Fleet *fleet `json:"fleet"`
	// A --mode rate run: the configured rate, the starts/s achieved and
	// their ratio, and the most starts of one key seen in one period.
	RateLimit      int     `json:"rate_limit"`
	RateTargetPerS float64 `json:"rate_target_per_s"`
	RatePerS       float64 `json:"rate_per_s"`
	RateRatio      float64 `json:"rate_ratio"`
	RateMaxWindow  int     `json:"rate_max_window"`
	RateLate       int     `json:"rate_late"`
	// bench/ceiling: jobs per claim (or per INSERT) and the MySQL
	// transactions retried as deadlock victims.
	Batch     int `json:"batch"`
	Deadlocks int `json:"deadlocks"`
}

// fleet is the "fleet" object of `bq bench --processes N --json`.
type fleet struct {
	Processes         int     `json:"processes"`
	ConnsPeak         int     `json:"server_conns_peak"`
	ConnsPerProcess   int     `json:"conns_per_process"`
	WakeupsPerJob     float64 `json:"wakeups_per_job"`
	WakeupReadsPerJob float64 `json:"wakeup_reads_per_job"`
}

// fullRaw is where a whole run's JSON lines go by default.
const fullRaw = ".artifacts/bench/results.jsonl"

// item is one command of the matrix.
type item struct {
	id   string // e.g. "pg/bq/drain"
	name string
	args []string // after the binary
	bin  string   // "bq", "river" or "ceiling"
	runs int      // rounds it runs in (the first ones)
	// tables: a --table-stats run, reported in the dead-rows section
	// rather than among the timings.
	tables bool
}

type sizes struct {
	drain, keyed, hotkey, steady int
	rate                         float64
	slots                        int
	backlogSmall, backlogLarge   int
	backlogRuns                  int
	mysqlBacklogRuns             int
	fleetJobs, fleetSlots        int
	fleetPGPool, fleetMySQLPool  int
	rateJobs, rateLimit          int
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "matrix: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	var (
		bqBin, riverBin, ceilingBin, dsn, mysqlDSN, out, raw, drivers, from, only string
		rounds                                                                    int
		s                                                                         sizes
	)
	flag.StringVar(&bqBin, "bq", "", "the bq binary")
	flag.StringVar(&riverBin, "river", "", "the bench/river binary")
	flag.StringVar(&ceilingBin, "ceiling", "", "the bench/ceiling binary (needed by the */ceiling/* items)")
	flag.StringVar(&dsn, "dsn", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL server DSN")
	flag.StringVar(&mysqlDSN, "mysql-dsn", "mysql://root@127.0.0.1:3306/test", "MySQL/MariaDB server DSN")
	flag.StringVar(&drivers, "drivers", "postgres,sqlite,mysql", "databases to run on")
	flag.StringVar(&out, "out", "docs/benchmarks.md", "the report to write")
	flag.StringVar(&raw, "raw", fullRaw, "where every JSON line goes")
	flag.IntVar(&rounds, "rounds", 3, "runs of each command; medians are over them")
	flag.IntVar(&s.drain, "drain-jobs", 20000, "jobs of drain")
	flag.IntVar(&s.keyed, "keyed-jobs", 20000, "jobs of keyed")
	flag.IntVar(&s.hotkey, "hotkey-jobs", 10000, "jobs of hotkey")
	flag.IntVar(&s.steady, "steady-jobs", 4000, "jobs of steady")
	flag.Float64Var(&s.rate, "rate", 500, "steady's enqueue rate, jobs/s")
	flag.IntVar(&s.slots, "slots", 100, "worker slots")
	flag.IntVar(&s.backlogSmall, "backlog-small", 1000, "backlog's small line")
	flag.IntVar(&s.backlogLarge, "backlog-large", 1000000, "backlog's large line")
	flag.IntVar(&s.backlogRuns, "backlog-runs", 3, "rounds the backlog runs in (building the large line is the slow part)")
	flag.IntVar(&s.fleetJobs, "fleet-jobs", 10000, "jobs of each fleet run (bq bench --processes)")
	flag.IntVar(&s.fleetSlots, "fleet-slots", 25, "slots of each process of a fleet run")
	flag.IntVar(&s.fleetPGPool, "fleet-pg-pool", 3, "pool of each PostgreSQL fleet process (bq bench --pool; the listener's connection is one more)")
	flag.IntVar(&s.fleetMySQLPool, "fleet-mysql-pool", 4, "connections of each MySQL fleet process (bq bench --pool)")
	flag.IntVar(&s.rateJobs, "rate-jobs", 5000, "jobs of the rate runs (bq bench --mode rate)")
	flag.IntVar(&s.rateLimit, "rate-limit", 500, "the rate runs' limit: starts per second of their one key")
	flag.IntVar(&s.mysqlBacklogRuns, "mysql-backlog-runs", 1, "rounds MySQL's backlog runs in (its large line takes minutes to build)")
	flag.StringVar(&from, "from", "", "re-render the report from this results file of an earlier run, running nothing")
	flag.StringVar(&only, "only", "", "run only the items whose id contains one of these comma-separated words (e.g. \"ceiling,fleet,rate\"); "+
		"when they are all dead-rows runs (\"dead\"), rewrite only the dead-rows section and the notes of --out, keeping the rest of it, "+
		"else write a report of only what ran")
	flag.Parse()
	var items []item
	for d := range strings.SplitSeq(drivers, ",") {
		items = append(items, matrix(d, dsn, mysqlDSN, s, rounds)...)
	}
	if only != "" {
		items = selectItems(items, only)
		if len(items) == 0 {
			return fmt.Errorf("--only %q selects no item", only)
		}
		if !flagSet("raw") {
			raw = ".artifacts/bench/results-only.jsonl" // the full run's results stay
		}
	}
	r := report{items: items, s: s, rounds: rounds, pgDSN: dsn, partial: only != "" && allTables(items), only: only, raw: raw}
	if from != "" {
		return rerender(r, from, out)
	}
	if bqBin == "" || riverBin == "" {
		return errors.New("--bq and --river are required")
	}
	if ceilingBin == "" && slices.ContainsFunc(items, func(it item) bool { return it.bin == "ceiling" }) {
		return errors.New("--ceiling is required by the */ceiling/* items (or leave them out with --only)")
	}
	if err := os.MkdirAll(filepath.Dir(raw), 0o755); err != nil {
		return err
	}
	rawFile, err := os.Create(raw)
	if err != nil {
		return err
	}
	defer rawFile.Close()

	r.results = map[string][]*result{} // by item id, one per round
	t0 := time.Now()
	for round := range rounds {
		for _, it := range items {
			if round >= it.runs {
				continue
			}
			bin := bqBin
			switch it.bin {
			case "river":
				bin = riverBin
			case "ceiling":
				bin = ceilingBin
			}
			fmt.Fprintf(os.Stderr, "[round %d/%d, %s] %s\n", round+1, rounds, time.Since(t0).Round(time.Second), it.name)
			res, line, err := runOne(ctx, bin, it.args)
			if err != nil {
				return fmt.Errorf("%s: %w", it.name, err)
			}
			fmt.Fprintf(rawFile, "{\"item\":%q,\"round\":%d,\"result\":%s}\n", it.id, round+1, bytes.TrimSpace(line))
			_ = rawFile.Sync()
			r.results[it.id] = append(r.results[it.id], res)
		}
	}
	r.took, r.at = time.Since(t0), time.Now()
	if err := r.write(out); err != nil {
		return err
	}
	fmt.Fprintf(rawFile, "{\"took_s\":%.0f,\"at\":%q}\n", r.took.Seconds(), r.at.Format(time.RFC3339))
	fmt.Fprintf(os.Stderr, "wrote %s in %s\n", out, time.Since(t0).Round(time.Second))
	return nil
}

// rerender writes the report from the results file of an earlier run
// (after the notes changed, say).
func rerender(r report, from, out string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	r.results = map[string][]*result{}
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		var rec struct {
			Item   string    `json:"item"`
			Result *result   `json:"result"`
			TookS  float64   `json:"took_s"`
			At     time.Time `json:"at"`
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			return fmt.Errorf("%s: %w", from, err)
		}
		if rec.TookS > 0 {
			r.took, r.at = time.Duration(rec.TookS*float64(time.Second)), rec.At
		}
		if rec.Item != "" {
			r.results[rec.Item] = append(r.results[rec.Item], rec.Result)
		}
	}
	return r.write(out)
}

// selectItems keeps the items whose id contains one of the comma-separated
// words of only.
func selectItems(items []item, only string) []item {
	var out []item
	for _, it := range items {
		for w := range strings.SplitSeq(only, ",") {
			if w != "" && strings.Contains(it.id, w) {
				out = append(out, it)
				break
			}
		}
	}
	return out
}

// allTables says whether every item is a dead-rows (--table-stats) run.
func allTables(items []item) bool {
	for _, it := range items {
		if !it.tables {
			return false
		}
	}
	return true
}

// flagSet says whether flag name was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// matrix lists driver d's commands.
func matrix(d, dsn, mysqlDSN string, s sizes, rounds int) []item {
	short, arg := "pg", dsn
	switch d {
	case "sqlite":
		short, arg = "sqlite", "sqlite"
	case "mysql":
		short, arg = "mysql", mysqlDSN
	}
	n := func(v int) string { return fmt.Sprint(v) }
	slots := n(s.slots)
	rate := fmt.Sprint(s.rate)
	bqItem := func(id string, extra ...string) item {
		args := append([]string{"bench", "--dsn", arg, "--json", "--slots", slots}, extra...)
		return item{id: short + "/bq/" + id, name: "bq bench " + strings.Join(extra, " ") + " on " + d, args: args, bin: "bq", runs: rounds}
	}
	riverItem := func(id string, extra ...string) item {
		args := append([]string{"--dsn", arg, "--json", "--slots", slots}, extra...)
		return item{id: short + "/river/" + id, name: "river-bench " + strings.Join(extra, " ") + " on " + d, args: args, bin: "river", runs: rounds}
	}
	// The database alone (bench/ceiling), on a fresh database each run;
	// SQLite has no ceiling program.
	ceilingItem := func(id string, extra ...string) item {
		args := append([]string{"--dsn", arg, "--mode"}, extra...)
		return item{id: short + "/ceiling/" + id, name: "ceiling --mode " + strings.Join(extra, " ") + " on " + d, args: args, bin: "ceiling", runs: rounds}
	}
	var ceilings []item
	switch d {
	case "postgres":
		ceilings = []item{ceilingItem("enqueue", "enqueue"), ceilingItem("claim-complete", "claim-complete")}
	case "mysql":
		// Batch 100 is the ceiling; 27 is about what bq's claims average.
		ceilings = []item{ceilingItem("enqueue", "enqueue"), ceilingItem("claim-complete", "claim-complete", "--batch", "100"),
			ceilingItem("claim-complete-27", "claim-complete", "--batch", "27")}
	}
	// The fleet: the drain worked by N child processes of --fleet-slots
	// slots each (bq bench --processes), the parent only enqueueing; then
	// the keyed drain (1,000 keys, To=2) and the hot key (To=50) by the
	// same processes, right after the unkeyed drain they are divided by.
	var fleetItems []item
	if d != "sqlite" {
		for _, p := range []int{1, 4, 16} {
			for _, m := range []struct{ id, mode string }{{"", "drain"}, {"keyed-", "keyed"}, {"hotkey-", "hotkey"}} {
				args := []string{"--mode", m.mode, "--jobs", n(s.fleetJobs), "--processes", n(p)}
				switch m.mode {
				case "keyed":
					args = append(args, "--keys", "1000", "--to", "2")
				case "hotkey":
					args = append(args, "--to", "50")
				}
				it := bqItem(fmt.Sprintf("fleet-%s%d", m.id, p), args...)
				it.args[5] = n(s.fleetSlots) // --slots: per process
				// Bounded pools, as docs/scaling.md measured them, so that 16
				// processes fit a stock max_connections (PostgreSQL 100, MySQL
				// 151, whose pool is otherwise unbounded) beside other clients.
				pool := s.fleetPGPool
				if d == "mysql" {
					pool = s.fleetMySQLPool
				}
				it.args = append(it.args, "--pool", n(pool))
				it.name = fmt.Sprintf("bq bench --mode %s --processes %d --slots %d on %s", m.mode, p, s.fleetSlots, d)
				fleetItems = append(fleetItems, it)
			}
		}
	}
	// A rate limit's throughput: one key at --rate-limit starts per second.
	rateItem := bqItem("rate", "--mode", "rate", "--jobs", n(s.rateJobs), "--rate-limit", n(s.rateLimit), "--rate-period", "1s")
	backlog := bqItem("backlog", "--mode", "backlog", "--backlog-small", n(s.backlogSmall),
		"--backlog-large", n(s.backlogLarge), "--batch", "10000")
	backlog.runs = min(s.backlogRuns, rounds)
	if d == "mysql" {
		// Building MySQL's large line takes ~2.5 min (~7,000 blocked
		// jobs/s); the ratio is of handoffs alternating within one run.
		backlog.runs = min(s.mysqlBacklogRuns, rounds)
	}
	var pgOnly []item
	if d == "postgres" {
		// What bq's defaults leave on the table: a pool sized for the
		// slots (pgx's default is max(4, CPUs) connections), and the
		// wake-up that LISTEN/NOTIFY would give a producer in another
		// process (the enqueueing client is not the working one).
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		pool := bqItem("drain-pool16", "--mode", "drain", "--jobs", n(s.drain))
		pool.args[2] = dsn + sep + "pool_max_conns=16"
		pool.name += " (pool_max_conns=16)"
		pgOnly = append(pgOnly, pool,
			bqItem("steady-remote", "--mode", "steady", "--jobs", n(s.steady), "--rate", rate, "--separate-producer"))
		// Dead rows and table size, bq beside River, in the first round
		// only (they are counts): with autovacuum off on the run's tables,
		// so that every dead tuple made is counted, then as the server
		// has it.
		for _, av := range []string{"off", "on"} {
			suffix := ""
			if av == "on" {
				suffix = "-av"
			}
			dead := []item{
				bqItem("drain-dead"+suffix, "--mode", "drain", "--jobs", n(s.drain), "--table-stats", "--autovacuum", av),
				riverItem("drain-dead"+suffix, "--mode", "drain", "--jobs", n(s.drain), "--table-stats", "--autovacuum", av),
				bqItem("keyed-dead"+suffix, "--mode", "keyed", "--jobs", n(s.keyed), "--keys", "1000", "--to", "2",
					"--table-stats", "--autovacuum", av),
			}
			for i := range dead {
				dead[i].runs, dead[i].tables = 1, true
			}
			pgOnly = append(pgOnly, dead...)
		}
	}
	if d == "mysql" {
		// River has no MySQL driver: bq's own figures beside the ceiling.
		out := append(ceilings,
			bqItem("drain", "--mode", "drain", "--jobs", n(s.drain)),
			bqItem("keyed", "--mode", "keyed", "--jobs", n(s.keyed), "--keys", "1000", "--to", "2"),
			// The cost of a second key per job (never binding: limit 1000).
			bqItem("keyed-second", "--mode", "keyed", "--jobs", n(s.keyed), "--keys", "1000", "--to", "2", "--second-keys", "10"),
			// The cost of fair share (issue 35): the keyed drain in a queue whose
			// policy has FairShare.
			bqItem("keyed-fair", "--mode", "keyed", "--jobs", n(s.keyed), "--keys", "1000", "--to", "2", "--fair"),
			bqItem("hotkey", "--mode", "hotkey", "--jobs", n(s.hotkey), "--to", "50"),
			bqItem("steady", "--mode", "steady", "--jobs", n(s.steady), "--rate", rate),
			rateItem,
			backlog,
		)
		return append(out, fleetItems...)
	}
	out := append(ceilings,
		bqItem("drain", "--mode", "drain", "--jobs", n(s.drain)),
		riverItem("drain", "--mode", "drain", "--jobs", n(s.drain)),
		bqItem("drain-default", "--mode", "drain", "--jobs", n(s.drain), "--config", "default"),
		bqItem("keyed", "--mode", "keyed", "--jobs", n(s.keyed), "--keys", "1000", "--to", "2"),
		// The cost of a second key per job (never binding: limit 1000).
		bqItem("keyed-second", "--mode", "keyed", "--jobs", n(s.keyed), "--keys", "1000", "--to", "2", "--second-keys", "10"),
		// The cost of fair share (issue 35): the keyed drain in a queue whose
		// policy has FairShare.
		bqItem("keyed-fair", "--mode", "keyed", "--jobs", n(s.keyed), "--keys", "1000", "--to", "2", "--fair"),
		bqItem("hotkey", "--mode", "hotkey", "--jobs", n(s.hotkey), "--to", "50"),
		bqItem("steady", "--mode", "steady", "--jobs", n(s.steady), "--rate", rate),
		riverItem("steady", "--mode", "steady", "--jobs", n(s.steady), "--rate", rate),
		bqItem("steady-default", "--mode", "steady", "--jobs", n(s.steady), "--rate", rate, "--config", "default"),
		rateItem,
		backlog,
	)
	out = append(out, fleetItems...)
	return append(out, pgOnly...)
}

// runOne runs one command, its stderr (progress bars) passed through, and
// reads the JSON line it prints.
func runOne(ctx context.Context, bin string, args []string) (*result, []byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stderr = os.Stderr
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Run(); err != nil {
		return nil, nil, err
	}
	var last []byte
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 && line[0] == '{' {
			last = append([]byte(nil), line...)
		}
	}
	if last == nil {
		return nil, nil, errors.New("no JSON line on stdout")
	}
	var r result
	if err := json.Unmarshal(last, &r); err != nil {
		return nil, nil, err
	}
	return &r, last, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// field collects one number of an item's runs.
func field(rs []*result, f func(*result) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

// ratios pairs two items' runs round by round: the ratio of each round,
// measured side by side.
func ratios(a, b []*result, f func(*result) float64) []float64 {
	var out []float64
	for i := range min(len(a), len(b)) {
		if d := f(b[i]); d != 0 {
			out = append(out, f(a[i])/d)
		}
	}
	return out
}

func writeTable(w io.Writer, header []string, rows [][]string) {
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat(" --- |", len(header)))
	for _, r := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
}

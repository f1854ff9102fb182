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
		bqBin, riverBin, ceilingBin, graphileJS, dsn, mysqlDSN, out, raw, drivers, from, only string
		rounds                                                                                int
		s                                                                                     sizes
	)
	flag.StringVar(&bqBin, "bq", "", "the bq binary")
	flag.StringVar(&riverBin, "river", "", "the bench/river binary")
	flag.StringVar(&graphileJS, "graphile", "", "bench/graphile/bench.js, its modules installed (npm ci), run with node")
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
	flag.DurationVar(&s.netDelay, "net-delay", 250*time.Microsecond, "the network rows' delay of each packet each way (bq bench --net-delay): drain-net, keyed-net and hotkey-net "+
		"on PostgreSQL and MySQL (\"--only net\" runs only them); 0 leaves them out")
	flag.StringVar(&from, "from", "", "re-render the report from this results file of an earlier run, running nothing")
	flag.StringVar(&only, "only", "", "run only the items whose id contains one of these comma-separated words (e.g. \"ceiling,fleet,rate\", or \"net\" for the network rows); "+
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
	if graphileJS == "" && slices.ContainsFunc(items, func(it item) bool { return it.bin == "graphile" }) {
		return errors.New("--graphile is required by the */graphile/* items (or leave them out with --only)")
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
			bin, args := bqBin, it.args
			switch it.bin {
			case "river":
				bin = riverBin
			case "ceiling":
				bin = ceilingBin
			case "graphile":
				bin, args = "node", append([]string{graphileJS}, it.args...)
			}
			fmt.Fprintf(os.Stderr, "[round %d/%d, %s] %s\n", round+1, rounds, time.Since(t0).Round(time.Second), it.name)
			res, line, err := runOne(ctx, bin, args)
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

// flagSet says whether flag name was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
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

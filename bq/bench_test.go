package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/pgstats"
)

func TestBenchUsage(t *testing.T) {
	t.Setenv("BQ_DSN", "")
	ctx := context.Background()
	for _, c := range []struct {
		args     []string
		inStderr string
	}{
		{[]string{"bench"}, "--dsn is required"},
		{[]string{"bench", "--dsn", "sqlite", "--mode", "sprint"}, `--mode "sprint"`},
		{[]string{"bench", "--dsn", "mongodb://x", "--mode", "drain"}, "use postgres://"},
		{[]string{"bench", "--dsn", "sqlite", "--jobs", "0"}, "--jobs must be at least 1"},
		{[]string{"bench", "--dsn", "sqlite", "--config", "fast"}, `--config "fast"`},
		{[]string{"bench", "--dsn", "sqlite", "--table-stats"}, "use a postgres:// DSN"},
		{[]string{"bench", "--dsn", "postgres://x/y", "--mode", "steady", "--table-stats"}, "--mode drain, keyed or hotkey"},
		{[]string{"bench", "--dsn", "postgres://x/y", "--autovacuum", "off"}, "a setting of --table-stats"},
		{[]string{"bench", "--dsn", "postgres://x/y", "--table-stats", "--autovacuum", "no"}, `--autovacuum "no"`},
		{[]string{"bench", "--dsn", "sqlite", "--mode", "rate", "--rate-limit", "0"}, "--rate-limit must be from 1 to 10000"},
		{[]string{"bench", "--dsn", "sqlite", "--mode", "rate", "--rate-period", "1500us"}, "use whole milliseconds"},
		{[]string{"bench", "--dsn", "sqlite", "--mode", "rate", "--rate-keys", "0"}, "--rate-keys must be at least 1"},
		{[]string{"bench", "--dsn", "sqlite", "--mode", "rate", "--jobs", "800", "--rate-keys", "2"}, "more jobs than --rate-keys x --rate-limit (1000)"},
		{[]string{"bench", "--dsn", "sqlite", "--mode", "rate", "--processes", "2"}, "--processes runs --mode drain, steady, keyed or hotkey"},
		{[]string{"bench", "--dsn", "sqlite", "--mode", "drain", "--window", "10s"}, "--window 10s: use 100ms or more with --mode steady"},
		{[]string{"bench", "--dsn", "sqlite", "--plans", "p.txt"}, "--plans logs PostgreSQL's plans"},
		{[]string{"bench", "--dsn", "sqlite", "--max-active", "-1"}, "--max-active -1: use a cap of 1 or more running jobs, or 0 (the default) for none"},
		{[]string{"bench", "--dsn", "sqlite", "--wait-events"}, "--wait-events samples a database server's connections, and SQLite has none: use a postgres:// or mysql:// DSN"},
		{[]string{"bench", "--dsn", "postgres://x/y", "--mode", "steady", "--wait-events"}, "--wait-events samples a drain: use --mode drain, keyed or hotkey"},
		{[]string{"bench", "--dsn", "postgres://x/y", "--plans", "p.txt", "--processes", "2"}, "leave out --table-stats, --cpuprofile, --sql-stats, --plans"},
		{[]string{"bench", "--dsn", "sqlite", "--mode", "steady", "--window", "10ms"}, "--window 10ms: use 100ms or more"},
		{[]string{"bench", "--dsn", "sqlite", "--net-delay", "250us"}, "--net-delay delays the packets to a database server, and SQLite has none: use a postgres:// or mysql:// DSN"},
		{[]string{"bench", "--dsn", "postgres://x/y", "--net-delay", "-1ms"}, "--net-delay -1ms: use a positive duration"},
		{[]string{"bench", "--dsn", "mysql://x/y", "--net-delay", "soon"}, `invalid value "soon" for flag --net-delay`},
	} {
		code, _, stderr := bqCmd(t, ctx, c.args...)
		if code != 2 || !strings.Contains(stderr, c.inStderr) {
			t.Errorf("bq %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(c.args, " "), code, stderr, c.inStderr)
		}
	}
}

// TestBench runs every mode at a tiny size and checks the JSON line.
func TestBench(t *testing.T) {
	for _, db := range testDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			dsn := map[string]string{"sqlite": "sqlite", "postgres": postgresDSN(), "mysql": mysqlDSN()}[db.name]
			for _, mode := range benchModes {
				prof := filepath.Join(t.TempDir(), "cpu.prof")
				args := []string{"bench", "--dsn", dsn, "--mode", mode, "--json", "--progress=false", "--jobs", "60",
					"--slots", "8", "--keys", "5", "--rate", "2000", "--batch", "25",
					"--backlog-small", "5", "--backlog-large", "40", "--handoffs", "3", "--cpuprofile", prof,
					"--rate-limit", "20", "--rate-period", "200ms"}
				measured := db.name == "postgres" && (mode == "drain" || mode == "keyed")
				sampled := db.name != "sqlite" && (mode == "drain" || mode == "keyed")
				if db.name == "postgres" {
					args = append(args, "--sql-stats")
				}
				if mode == "steady" {
					args = append(args, "--window", "100ms")
				}
				if measured {
					args = append(args, "--table-stats", "--autovacuum", "off")
				}
				if sampled {
					args = append(args, "--wait-events")
				}
				code, stdout, stderr := bqCmd(t, context.Background(), args...)
				if code != 0 {
					t.Fatalf("bq bench --mode %s: exit %d\n%s", mode, code, stderr)
				}
				var r benchResult
				if err := json.Unmarshal([]byte(stdout), &r); err != nil {
					t.Fatalf("bq bench --mode %s: %v\n%s", mode, err, stdout)
				}
				if r.Mode != mode || r.Driver != db.name || r.PeakRSSMB <= 0 {
					t.Errorf("bq bench --mode %s: %+v", mode, r)
				}
				switch mode {
				case "backlog":
					if r.BacklogSmallMS <= 0 || r.BacklogLargeMS <= 0 || r.BacklogLarge != 40 {
						t.Errorf("backlog: %+v", r)
					}
				case "rate":
					if r.RateMaxWindow < 1 || r.RateMaxWindow > 20 || r.RatePerS <= 0 || r.RateRatio <= 0 || r.Jobs != 60 {
						t.Errorf("rate: %+v", r)
					}
				case "steady":
					if r.P50MS <= 0 || r.P99MS < r.P50MS {
						t.Errorf("steady: %+v", r)
					}
					checkWindows(t, r)
				default:
					if r.WorkPerS <= 0 || r.EnqueuePerS <= 0 || r.Jobs != 60 {
						t.Errorf("%s: %+v", mode, r)
					}
				}
				if fi, err := os.Stat(prof); err != nil || fi.Size() == 0 {
					t.Errorf("%s: no CPU profile written: %v", mode, err)
				}
				if db.name == "postgres" && !strings.Contains(stderr, "round trips") {
					t.Errorf("%s: --sql-stats printed nothing:\n%s", mode, stderr)
				}
				if measured {
					checkTableStats(t, mode, r)
				}
				if sampled {
					if !regexp.MustCompile(`sampled every 2ms while it worked \([1-9][0-9]* samples;`).MatchString(stderr) {
						t.Errorf("%s: --wait-events printed no samples:\n%s", mode, stderr)
					}
				}
			}
		})
	}
}

// checkTableStats checks what --table-stats counted in a drain of 60 jobs:
// every job inserted once into bq_jobs and updated once as it finished,
// and, unkeyed, moved once through ready and claimed; none of it vacuumed.
func checkTableStats(t *testing.T, mode string, r benchResult) {
	t.Helper()
	if r.Tables == nil || r.Tables.Autovacuum != "off" {
		t.Fatalf("%s --table-stats: %+v", mode, r.Tables)
	}
	byName := map[string]pgstats.Change{}
	for _, c := range r.Tables.Tables {
		byName[c.Table] = c
	}
	want := map[string][2]int64{"bq_jobs": {60, 60}, "bq_ready_executions": {60, 0}, "bq_claimed_executions": {60, 0}}
	for table, w := range want {
		c := byName[table]
		if c.Inserted != w[0] || c.Updated != w[1] || c.Autovacuums != 0 || c.Bytes <= 0 {
			t.Errorf("%s --table-stats: %s %+v; want %d inserted, %d updated, no autovacuum", mode, table, c, w[0], w[1])
		}
		if mode == "drain" && (c.DeadMade() != 60 || c.DeadLeft > 60) {
			t.Errorf("%s --table-stats: %s made %d dead tuples, %d left; want 60, at most 60", mode, table, c.DeadMade(), c.DeadLeft)
		}
	}
	// Each of the 5 keys is inserted once, and again only after the
	// dispatcher deleted it as idle (the 2 producers' batches can leave a
	// key idle between them).
	if s := byName["bq_semaphores"]; mode == "keyed" && (s.Inserted < 5 || s.Inserted > 5+s.Deleted) {
		t.Errorf("keyed --table-stats: bq_semaphores %+v; want 5 keys inserted, plus one per idle key deleted", s)
	}
}

// TestBenchRate runs the rate mode briefly on SQLite, with one rate key and
// with two, and checks that no key started more than its limit within one
// period and that the achieved rate and its ratio are reported. The ratio
// itself depends on the machine: not asserted.
func TestBenchRate(t *testing.T) {
	for _, c := range []struct {
		name                 string
		jobs, limit, keys    int
		period               string
		target, periodMillis float64
	}{
		{"one key", 200, 100, 1, "1s", 100, 1000},
		// A period of 1s gives the full 15ms start slack: a shorter one
		// (6ms at 250ms) is missed often under -race, each miss a slot.
		{"two keys", 200, 50, 2, "1s", 100, 1000},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"bench", "--dsn", "sqlite", "--mode", "rate", "--json", "--progress=false", "--slots", "20",
				"--jobs", strconv.Itoa(c.jobs), "--rate-limit", strconv.Itoa(c.limit), "--rate-period", c.period,
				"--rate-keys", strconv.Itoa(c.keys)}
			code, stdout, stderr := bqCmd(t, context.Background(), args...)
			if code != 0 {
				t.Fatalf("bq %s: exit %d\n%s", strings.Join(args, " "), code, stderr)
			}
			var r benchResult
			if err := json.Unmarshal([]byte(stdout), &r); err != nil {
				t.Fatalf("%v\n%s", err, stdout)
			}
			if r.Mode != "rate" || r.Jobs != c.jobs || r.RateLimit != c.limit || r.RateKeys != c.keys ||
				r.RatePeriodMS != c.periodMillis || r.RateTargetPerS != c.target {
				t.Errorf("configuration not reported: %+v", r)
			}
			if r.RateMaxWindow < 1 || r.RateMaxWindow > c.limit {
				t.Errorf("most starts of one key in one period: %d; want 1 to the limit, %d", r.RateMaxWindow, c.limit)
			}
			if r.RatePerS <= 0 || r.RateRatio <= 0 || math.Abs(r.RateRatio-r.RatePerS/r.RateTargetPerS) > 1e-9 {
				t.Errorf("achieved %g starts/s, ratio %g; want both reported, ratio = achieved / %g", r.RatePerS, r.RateRatio, r.RateTargetPerS)
			}
			t.Logf("%.1f starts/s of %g (ratio %.3f), %d late runs, most %d per window", r.RatePerS, r.RateTargetPerS, r.RateRatio, r.RateLate, r.RateMaxWindow)
			if r.RateSteadyPerS <= 0 || r.RateLate < 0 {
				t.Errorf("steady rate %g starts/s, %d late runs; want both reported", r.RateSteadyPerS, r.RateLate)
			}
			if r.RateMinSlotGapMS < c.periodMillis || r.RateSlotGapMS < r.RateMinSlotGapMS {
				t.Errorf("ring slots reused after %g ms on average, %g ms at least; want at least the period, %g ms",
					r.RateSlotGapMS, r.RateMinSlotGapMS, c.periodMillis)
			}
		})
	}
}

// TestMeasureRate checks the window count and the achieved rate on starts
// made up, and that a run over its limit fails.
func TestMeasureRate(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// A perfect limiter at 2 per 100ms: bursts of 2 at 0, 100, ..., 400 ms.
	var starts []benchStart
	for i := range 10 {
		starts = append(starts, benchStart{"a", at(i / 2 * 100)})
	}
	m := measureRate(starts, 2, 100*time.Millisecond)
	if m.maxWindow != 2 || math.Abs(m.perS-20) > 1e-9 || m.meanGap != 100*time.Millisecond || m.minGap != 100*time.Millisecond {
		t.Errorf("perfect limiter: %+v; want 2 per window, 20 starts/s, slots reused after 100ms", m)
	}
	// One start early: three within 100ms (at 100, 150, 199).
	starts = append(starts[:0], benchStart{"a", at(0)}, benchStart{"a", at(100)}, benchStart{"a", at(150)},
		benchStart{"a", at(199)}, benchStart{"b", at(0)}, benchStart{"b", at(50)})
	m = measureRate(starts, 2, 100*time.Millisecond)
	if m.maxWindow != 3 || m.minGap != 99*time.Millisecond {
		t.Errorf("early start: %+v; want 3 in a window, a slot reused after 99ms", m)
	}
	r := &benchResult{Mode: "rate", RateLimit: 2, RatePeriodMS: 100, RateMaxWindow: m.maxWindow}
	if err := checkRate(r); err == nil || !strings.Contains(err.Error(), "RATE LIMIT WAS BROKEN: 3 starts") {
		t.Errorf("checkRate: %v; want the limit reported broken", err)
	}
	if r.RateMaxWindow = 2; checkRate(r) != nil {
		t.Errorf("checkRate at the limit: %v", checkRate(r))
	}
}

// checkWindows checks a steady run's --window report: consecutive
// windows from 0 whose jobs add up to the run's, each with its
// percentiles in order.
func checkWindows(t *testing.T, r benchResult) {
	t.Helper()
	if len(r.Windows) == 0 {
		t.Fatalf("steady --window: no windows in %+v", r)
	}
	jobs := 0
	for i, w := range r.Windows {
		if math.Abs(w.FromS-float64(i)*0.1) > 1e-9 || w.ToS <= w.FromS {
			t.Errorf("window %d: %+v, want it to start at %.1f s", i, w, float64(i)*0.1)
		}
		if w.Jobs > 0 && (w.P50MS <= 0 || w.P95MS < w.P50MS || w.P99MS < w.P95MS) {
			t.Errorf("window %d: percentiles out of order: %+v", i, w)
		}
		jobs += w.Jobs
	}
	if jobs != r.Jobs {
		t.Errorf("steady --window: the windows hold %d jobs, the run %d", jobs, r.Jobs)
	}
}

// TestLatencyWindows: latencies go to the window of their job's enqueue
// instant, counted from the run's start; a job enqueued before it goes in
// the first, one with no instant in none; an empty window between two
// keeps its place.
func TestLatencyWindows(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) int64 { return t0.Add(d).UnixNano() }
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	enq := []int64{at(-time.Millisecond), at(2 * time.Second), at(9 * time.Second), at(25 * time.Second), 0}
	lat := []time.Duration{ms(1), ms(3), ms(2), ms(7), ms(50)}
	got := latencyWindows(t0, 10*time.Second, enq, lat)
	want := []latencyWindow{
		{FromS: 0, ToS: 10, Jobs: 3, P50MS: 2, P95MS: 3, P99MS: 3},
		{FromS: 10, ToS: 20},
		{FromS: 20, ToS: 30, Jobs: 1, P50MS: 7, P95MS: 7, P99MS: 7},
	}
	if !slices.Equal(got, want) {
		t.Errorf("windows:\n got %+v\nwant %+v", got, want)
	}
	if latencyWindows(t0, 0, enq, lat) != nil {
		t.Error("--window 0 reported windows")
	}
}

// TestBenchPlans: --plans writes the plan of the run's statements, the
// claim's among them, each under the line naming its time and backend.
func TestBenchPlans(t *testing.T) {
	for _, db := range testDatabases(t) {
		if db.name != "postgres" {
			continue
		}
		path := filepath.Join(t.TempDir(), "plans.txt")
		code, _, stderr := bqCmd(t, context.Background(), "bench", "--dsn", postgresDSN(), "--mode", "steady", "--jobs", "30",
			"--rate", "1000", "--slots", "4", "--json", "--progress=false", "--plans", path)
		if code != 0 && strings.Contains(stderr, "LOAD") && strings.Contains(stderr, "permission denied") {
			t.Skipf("the test server's user may not LOAD auto_explain: %s", stderr)
		}
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		plans := string(b)
		for _, want := range []string{"-- bq bench --plans: ", " s, backend ", "Query Text:", "DELETE FROM bq_ready_executions", "Buffers: shared"} {
			if !strings.Contains(plans, want) {
				t.Errorf("--plans file lacks %q:\n%.2000s", want, plans)
			}
		}
	}
}

// TestBenchMaxActive: --max-active stores the cap in the bench queue's
// policy (with --fair too) and the run reports it; the jobs all run
// through the capped claim.
func TestBenchMaxActive(t *testing.T) {
	for _, db := range testDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			dsn := map[string]string{"sqlite": "sqlite", "postgres": postgresDSN(), "mysql": mysqlDSN()}[db.name]
			for _, fair := range []bool{false, true} {
				args := []string{"bench", "--dsn", dsn, "--mode", "keyed", "--keys", "5", "--to", "2", "--jobs", "60",
					"--slots", "8", "--max-active", "3", "--json", "--progress=false", "--fair=" + strconv.FormatBool(fair)}
				code, stdout, stderr := bqCmd(t, context.Background(), args...)
				if code != 0 {
					t.Fatalf("fair %v: exit %d\n%s", fair, code, stderr)
				}
				var r benchResult
				if err := json.Unmarshal([]byte(stdout), &r); err != nil {
					t.Fatalf("fair %v: %v\n%s", fair, err, stdout)
				}
				if r.MaxActive != 3 || r.Jobs != 60 || r.WorkPerS <= 0 {
					t.Errorf("fair %v: %+v; want max_active 3 and the 60 jobs worked", fair, r)
				}
			}
		})
	}
}

func TestIdleWaitSpacesReadsWhileMuchIsLeft(t *testing.T) {
	for _, c := range []struct {
		live, last  int
		since, want time.Duration
	}{
		{100, 5000, time.Second, 2 * time.Millisecond},               // few left: read often
		{10000, -1, 0, 50 * time.Millisecond},                        // no pace yet
		{8000, 8000, 100 * time.Millisecond, 50 * time.Millisecond},  // no progress
		{8000, 9000, 100 * time.Millisecond, 400 * time.Millisecond}, // 800 ms left at 10k/s
		{9000, 10000, 2 * time.Second, time.Second},                  // capped
		{1000, 1100, time.Microsecond, 2 * time.Millisecond},         // floored
	} {
		if got := idleWait(c.live, c.last, c.since); got != c.want {
			t.Errorf("idleWait(%d, %d, %s) = %s, want %s", c.live, c.last, c.since, got, c.want)
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/testdb"
)

// TestMain lets the test binary be the worker processes of a
// `bq bench --processes` run: the parent starts os.Executable(), which
// under `go test` is this binary.
func TestMain(m *testing.M) {
	if os.Getenv(fleetWorkerEnv) != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], &env{stdout: os.Stdout, stderr: os.Stderr})
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func TestBenchFleetUsage(t *testing.T) {
	t.Setenv("BQ_DSN", "")
	ctx := context.Background()
	for _, c := range []struct {
		args     []string
		inStderr string
	}{
		{[]string{"bench", "--dsn", "sqlite", "--processes", "0"}, "--processes must be from 1 to 256, got 0"},
		{[]string{"bench", "--dsn", "sqlite", "--processes", "-3"}, "--processes must be from 1 to 256, got -3"},
		{[]string{"bench", "--dsn", "sqlite", "--processes", "257"}, "--processes must be from 1 to 256"},
		{[]string{"bench", "--dsn", "sqlite", "--processes", "2", "--mode", "backlog"}, "--mode drain, steady, keyed or hotkey, not backlog"},
		{[]string{"bench", "--dsn", "sqlite", "--processes", "2", "--cpuprofile", "x"}, "leave out --table-stats, --cpuprofile"},
		{[]string{"bench", "--dsn", "postgres://x/y", "--processes", "2", "--sql-stats"}, "measure one process"},
		{[]string{"bench", "--dsn", "sqlite", "--processes", "two"}, `invalid value "two" for flag --processes`},
		{[]string{"bench", "--dsn", "sqlite", "--pool", "3"}, "give --processes"},
		{[]string{"bench", "--dsn", "sqlite", "--processes", "2", "--pool", "-1"}, "a --pool of at least 1"},
	} {
		code, _, stderr := bqCmd(t, ctx, c.args...)
		if code != 2 || !strings.Contains(stderr, c.inStderr) {
			t.Errorf("bq %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(c.args, " "), code, stderr, c.inStderr)
		}
	}
}

// TestBenchFleetTooManyConnections: a fleet the server's max_connections
// cannot hold is refused before any process starts, naming the fixes.
func TestBenchFleetTooManyConnections(t *testing.T) {
	for _, db := range testDatabases(t) {
		if db.name == testdb.SQLite {
			continue
		}
		t.Run(db.name, func(t *testing.T) {
			dsn := map[string]string{"postgres": postgresDSN(), "mysql": mysqlDSN()}[db.name]
			code, _, stderr := bqCmd(t, context.Background(), "bench", "--dsn", dsn, "--processes", "256", "--jobs", "10", "--progress=false")
			if code != 1 || !strings.Contains(stderr, "--processes 256 needs up to") || !strings.Contains(stderr, "raise max_connections") {
				t.Errorf("exit %d, stderr %q; want exit 1 and the connections needed and the fixes", code, stderr)
			}
		})
	}
}

// fleetRun runs bq with args, a --processes bench, waiting while the
// server's connections are taken: under make test the other packages'
// tests share the server, and one CI run found 96 of its 97 in use at the
// fleet's preflight (which refuses a fleet the server cannot hold,
// TestBenchFleetTooManyConnections). It tries for two minutes.
func fleetRun(t *testing.T, args []string) (code int, stdout, stderr string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; {
		code, stdout, stderr = bqCmd(t, context.Background(), args...)
		if code != 1 || !strings.Contains(stderr, "are in use") || time.Now().After(deadline) {
			return code, stdout, stderr
		}
		t.Logf("the server's connections are taken (%s); trying again", strings.TrimSpace(stderr))
		time.Sleep(2 * time.Second)
	}
}

// TestBenchFleet runs a tiny fleet of two worker processes, drain,
// steady, keyed and hotkey, on each database and checks the output's
// shape, not timings (runFleet itself fails a run whose processes did not
// start every job once).
func TestBenchFleet(t *testing.T) {
	for _, db := range testDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			dsn := map[string]string{"sqlite": "sqlite", "postgres": postgresDSN(), "mysql": mysqlDSN()}[db.name]
			server := db.name != testdb.SQLite
			for _, mode := range []string{"drain", "steady", "keyed", "hotkey"} {
				args := []string{"bench", "--dsn", dsn, "--mode", mode,
					"--processes", "2", "--slots", "4", "--jobs", "120", "--rate", "600", "--batch", "50", "--json", "--progress=false"}
				switch mode {
				case "drain":
					args = append(args, "--pool", "3")
				case "steady":
					args = append(args, "--window", "100ms")
				case "keyed":
					args = append(args, "--keys", "5", "--to", "2")
					if server {
						args = append(args, "--wait-events") // samples the children's connections too
					}
				case "hotkey":
					args = append(args, "--to", "3")
				}
				code, stdout, stderr := fleetRun(t, args)
				if code != 0 {
					t.Fatalf("--mode %s: exit %d\n%s", mode, code, stderr)
				}
				var r benchResult
				if err := json.Unmarshal([]byte(stdout), &r); err != nil {
					t.Fatalf("--mode %s: %v\n%s", mode, err, stdout)
				}
				if mode == "keyed" && server && !strings.Contains(stderr, "connections busy on average") {
					t.Errorf("--mode keyed --wait-events: no samples printed:\n%s", stderr)
				}
				f := r.Fleet
				if f == nil || f.Processes != 2 || r.Slots != 4 || r.Jobs != 120 || r.WorkPerS <= 0 || r.EnqueuePerS <= 0 {
					t.Fatalf("--mode %s: %+v fleet %+v", mode, r, f)
				}
				// Each worker process holds at least its listener's connection.
				if server && (f.ConnsPeak < 2 || f.ConnsPerProcess < 2) {
					t.Errorf("--mode %s: connections %+v; want at least one per process", mode, f)
				}
				// --pool bounds each process: PostgreSQL's listener holds a
				// connection besides the pool, MySQL's reads on the pool.
				if want := map[string]int{"postgres": 4, "mysql": 3}[db.name]; mode == "drain" && server && f.ConnsPerProcess != want {
					t.Errorf("--pool 3: %d connections per process, want %d", f.ConnsPerProcess, want)
				}
				if want := map[string]int{"keyed": 5, "hotkey": 1}[mode]; r.Keys != want {
					t.Errorf("--mode %s: %d keys, want %d", mode, r.Keys, want)
				}
				if mode == "steady" {
					if r.P50MS <= 0 || r.P99MS < r.P50MS {
						t.Errorf("steady latency: %+v", r)
					}
					checkWindows(t, r)
					// Enqueues signal the workers (MySQL may fold several into
					// one row), and both processes read each wake-up.
					if server && (f.WakeupsPerJob <= 0 || f.WakeupReadsPerJob != 2*f.WakeupsPerJob) {
						t.Errorf("steady wake-ups: %+v", f)
					}
				}
			}
			code, stdout, stderr := bqCmd(t, context.Background(), "bench", "--dsn", dsn, "--processes", "2",
				"--jobs", "50", "--progress=false")
			want := []string{"bq bench drain on " + db.name, "2 processes x 25 slots:", "jobs/s worked"}
			if server {
				want = append(want, "server connections:", "wake-ups:")
			}
			if code != 0 || slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(stdout, w) }) {
				t.Errorf("text output: exit %d, want %q in\n%s%s", code, want, stdout, stderr)
			}
		})
	}
}

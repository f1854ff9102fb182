package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
					"--backlog-small", "5", "--backlog-large", "40", "--handoffs", "3", "--cpuprofile", prof}
				measured := db.name == "postgres" && (mode == "drain" || mode == "keyed")
				if db.name == "postgres" {
					args = append(args, "--sql-stats")
				}
				if measured {
					args = append(args, "--table-stats", "--autovacuum", "off")
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
				case "steady":
					if r.P50MS <= 0 || r.P99MS < r.P50MS {
						t.Errorf("steady: %+v", r)
					}
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
	if s := byName["bq_semaphores"]; mode == "keyed" && s.Inserted != 5 {
		t.Errorf("keyed --table-stats: bq_semaphores %+v; want 5 keys inserted", s)
	}
}

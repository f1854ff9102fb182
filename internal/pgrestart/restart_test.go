// Package pgrestart puts a running bq through what happens to its
// database server — a restart, a failover to a replica, a switch to
// read-only and back — and checks that nothing is lost, that no limit is
// exceeded, and that work resumes as soon as the server takes writes
// again. The servers are ones the tests start for themselves on private
// ports (testdb.Server): the shared servers of BQ_TEST_POSTGRES_DSN and
// BQ_TEST_MYSQL_DSN are never stopped or reconfigured. Those tests run
// only when asked, BQ_TEST_PG_RESTART=1 (PostgreSQL) and
// BQ_TEST_MYSQL_RESTART=1 (MariaDB), which `make test` sets for a last
// step of its own after every other test has finished: how soon work
// resumes is timed, and a loaded machine would blur it. TestSQLiteFull,
// on a file of its own, runs with the suite.
package pgrestart

import (
	"cmp"
	"context"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bqueue/bq"
	_ "github.com/bqueue/bq/drivers/mysql"
	_ "github.com/bqueue/bq/drivers/postgres"
	"github.com/bqueue/bq/internal/testdb"
)

type Args struct {
	Key string
	N   int
}

// The runs of this process, as the jobs saw them.
var (
	mu       sync.Mutex
	runs     = map[int]int{} // N -> completed runs
	starts   []time.Time
	inFlight = map[string]int{} // key -> runs in progress
	peak     = map[string]int{}
)

const limit = 2

var job = bq.Define("pgrestart.job", func(ctx context.Context, a Args) error {
	mu.Lock()
	starts = append(starts, time.Now())
	inFlight[a.Key]++
	peak[a.Key] = max(peak[a.Key], inFlight[a.Key])
	mu.Unlock()
	defer func() { mu.Lock(); inFlight[a.Key]--; mu.Unlock() }()
	select {
	case <-time.After(50 * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	mu.Lock()
	runs[a.N]++
	mu.Unlock()
	return nil
}, bq.JobOptions[Args]{
	Backoff:     func(int) time.Duration { return 100 * time.Millisecond },
	Concurrency: &bq.Concurrency[Args]{Key: func(a Args) string { return a.Key }, To: limit},
})

// TestPostgresRestart restarts a PostgreSQL server of the test's own
// under a running bq.
func TestPostgresRestart(t *testing.T) {
	gate(t, testdb.Postgres, "BQ_TEST_PG_RESTART")
	srv := testdb.PrivatePostgres(t)
	restartUnder(t, srv.DSN, srv.Stop, func() time.Time { srv.Start(); return time.Now() })
}

// TestMariaDBRestart restarts a MariaDB server of the test's own under a
// running bq.
func TestMariaDBRestart(t *testing.T) {
	gate(t, testdb.MySQL, "BQ_TEST_MYSQL_RESTART")
	srv := testdb.PrivateMariaDB(t)
	restartUnder(t, srv.DSN, srv.Stop, func() time.Time { srv.Start(); return time.Now() })
}

// gate runs a restart test only when its variable asks for it (`make
// test` sets it for a step of its own, after the other tests: the test
// checks how soon work resumes, which a loaded machine would blur) and
// BQ_TEST_DRIVERS selects its database. The server it restarts is its
// own, never the shared one of BQ_TEST_POSTGRES_DSN or BQ_TEST_MYSQL_DSN.
func gate(t *testing.T, kind, variable string) {
	t.Helper()
	if os.Getenv(variable) != "1" {
		t.Skipf("restarts a %s server of its own and times how soon work resumes: run through `make test`, which sets %s=1 for a last step of its own", kind, variable)
	}
	testdb.Require(t, kind)
}

// restartUnder runs a worker on dsn, stops the server under it for longer
// than the processes' leases (so every run is stopped and every process
// silent), starts it again, and checks: no job is lost, none completes
// twice, no key ran more than its limit at once, and the first job starts
// soon after the server is ready: a silence every process shared is no
// reason to reap anyone.
func restartUnder(t *testing.T, dsn string, stopServer func(), startServer func() time.Time) {
	ctx := context.Background()
	resetRuns()
	cfg := faultConfig(6)
	client, err := bq.Open(ctx, dsn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	const total = 300
	var ids []int64
	for i := range total {
		res, err := job.Enqueue(ctx, client, Args{Key: []string{"a", "b", "c"}[i%3], N: i})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- client.Run(runCtx) }()

	waitFor(t, 30*time.Second, "some jobs to run", func() bool { mu.Lock(); defer mu.Unlock(); return len(runs) > 20 })
	stopServer()
	stoppedAt := time.Now()
	if _, err := job.Enqueue(ctx, client, Args{Key: "a", N: total}); err == nil {
		t.Error("an enqueue with the server down reported success")
	}
	time.Sleep(4 * time.Second) // past ProcessDeadAfter: every run's lease lapses
	ready := startServer()
	t.Logf("server down for %s", ready.Sub(stoppedAt).Round(time.Millisecond))

	waitFor(t, 90*time.Second, "every job to complete", func() bool {
		completed := 0
		for _, id := range ids {
			if info, err := client.Job(ctx, id); err == nil && info.State == bq.StateCompleted {
				completed++
			}
		}
		return completed == total
	})
	stop()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	ns := make([]int, total)
	for n := range ns {
		ns[n] = n
	}
	reruns, first, peakSeen := judgeRuns(t, ns, ready, "the server was ready")
	// Work resumes within a heartbeat retry (100 ms) and a claim of the
	// server being ready; before, a process reaped itself and waited for
	// its next heartbeat to register again (up to HeartbeatInterval).
	if first > cfg.HeartbeatInterval {
		t.Errorf("the first job started %s after the server was ready, want well within a heartbeat interval (%s)", first, cfg.HeartbeatInterval)
	}
	t.Logf("%d jobs completed across a server restart, limits held (peak %v, limit %d); the first job started %s after the server was ready",
		total, peakSeen, limit, first.Round(time.Millisecond))
	if reruns > 0 {
		t.Errorf("%d jobs completed twice: an outcome is retried until it lands, so a job completed during the outage must not run again", reruns)
	}
}

// resetRuns forgets the runs of an earlier test.
func resetRuns() {
	mu.Lock()
	defer mu.Unlock()
	clear(runs)
	starts = nil
	clear(peak)
}

// faultConfig is the configuration of a client put through a fault:
// leases that lapse within the fault (3 s), a slow poll, so that work
// resuming at once after it shows the wake-ups at work.
func faultConfig(slots int) bq.Config {
	return bq.Config{
		Queues:            map[string]int{"default": slots},
		PollInterval:      time.Second,
		DispatchInterval:  100 * time.Millisecond,
		HeartbeatInterval: time.Second,
		ProcessDeadAfter:  3 * time.Second,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

// judgeRuns checks the runs this process recorded: each of the jobs ns
// (their N) completed a run, and no key ran more than its limit at once.
// It returns how many of them completed more than one run, how soon after
// since the first job started (fatal when none did; since names the
// moment), and each key's peak.
func judgeRuns(t *testing.T, ns []int, since time.Time, sinceName string) (reruns int, first time.Duration, peakSeen map[string]int) {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	for _, n := range ns {
		switch c := runs[n]; {
		case c == 0:
			t.Errorf("job %d completed in the database but never ran", n)
		case c > 1:
			reruns++
		}
	}
	for key, n := range peak {
		if n > limit {
			t.Errorf("key %s: %d runs at once, limit %d", key, n, limit)
		}
	}
	i, _ := slices.BinarySearchFunc(starts, since, func(a, b time.Time) int { return a.Compare(b) })
	if i == len(starts) {
		t.Fatalf("no job started after %s", sinceName)
	}
	return reruns, starts[i].Sub(since), maps.Clone(peak)
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
	}
}

// stopsServer matches a command that stops or restarts a database server.
var stopsServer = regexp.MustCompile(`(?i)pg_ctlcluster\S*\s+.*\b(stop|restart)\b|pg_ctl\b.*\b(stop|restart)\b|` +
	`mysqladmin\b.*\bshutdown\b|systemctl\s+(stop|restart)|service\s+\S+\s+(stop|restart)|start-stop-daemon\b.*--stop|` +
	`\bkill(all)?\b.*\b(postgres|mariadbd|mysqld)\b`)

// TestMakeTestLeavesSharedServersAlone pins what `make test` may do to
// the servers it tests against: start them when they are down, never
// stop or restart them. Neither the commands make runs (make -n) nor the
// scripts they call hold a command that stops a server, and the restart
// tests run on servers of their own.
func TestMakeTestLeavesSharedServersAlone(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make: %v", err)
	}
	out, err := exec.Command("make", "-n", "-C", root, "test").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n test: %v\n%s", err, out)
	}
	texts := map[string]string{"make -n test": string(out)}
	scripts, _ := filepath.Glob(filepath.Join(root, "scripts", "*.sh"))
	if len(scripts) == 0 {
		t.Fatal("no scripts found")
	}
	for _, p := range append(scripts, filepath.Join(root, ".ci", "run")) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		texts[p] = string(b)
	}
	// Nor does any Go source (tests included) outside this file, whose
	// matcher lists what it looks for.
	self, _ := filepath.Abs("restart_test.go")
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == ".git" || d.Name() == ".artifacts") {
			return cmp.Or(err, filepath.SkipDir)
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && p != self {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			texts[p] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range texts {
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			if stopsServer.MatchString(line) {
				t.Errorf("%s stops or restarts a server: %s", what, strings.TrimSpace(line))
			}
		}
	}
	// The matcher itself finds what it must.
	for _, line := range []string{"pg_ctlcluster --skip-systemctl-redirect 15 main stop", "mysqladmin -uroot shutdown",
		"sudo -n pg_ctlcluster 15 main restart", "start-stop-daemon --stop --exec /usr/sbin/mariadbd", "systemctl restart postgresql"} {
		if !stopsServer.MatchString(line) {
			t.Errorf("the matcher misses %q", line)
		}
	}
	if stopsServer.MatchString("as_root start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd") {
		t.Error("the matcher takes a start for a stop")
	}
}

// Package pgrestart restarts the database server under a running bq and
// checks that nothing is lost, that no limit is exceeded, and that work
// resumes as soon as the server is back. It disturbs every other user of
// the server, so each test runs only when asked: BQ_TEST_PG_RESTART=1
// (PostgreSQL) and BQ_TEST_MYSQL_RESTART=1 (MariaDB), which `make test`
// sets for a last step of its own after every other test has finished,
// and only for the local servers it manages.
package pgrestart

import (
	"context"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bqueue/bq"
	bqmysql "github.com/bqueue/bq/drivers/mysql"
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

// localPort returns the port of a DSN that names this machine, and
// refuses any other: only a local server is ever restarted.
func localPort(t *testing.T, dsn, def string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse DSN: %v", err)
	}
	if h := u.Hostname(); h != "127.0.0.1" && h != "localhost" && h != "::1" {
		t.Fatalf("refusing to restart the server at %s: it is not on this machine (unset BQ_TEST_*_RESTART for a server of your own)", u.Redacted())
	}
	if p := u.Port(); p != "" {
		return p
	}
	return def
}

// pgCluster names the local cluster listening on port (pg_lsclusters).
func pgCluster(t *testing.T, port string) (version, name string) {
	t.Helper()
	out, err := exec.Command("pg_lsclusters", "--no-header").CombinedOutput()
	if err != nil {
		t.Fatalf("pg_lsclusters: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[2] == port {
			return f[0], f[1]
		}
	}
	t.Fatalf("no local PostgreSQL cluster listens on port %s:\n%s", port, out)
	return "", ""
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func TestPostgresRestart(t *testing.T) {
	if os.Getenv("BQ_TEST_PG_RESTART") != "1" {
		t.Skip("restarts the PostgreSQL server: run through `make test`, which sets BQ_TEST_PG_RESTART=1 for a last step of its own")
	}
	v, cluster := pgCluster(t, localPort(t, testdb.PostgresBaseDSN(), "5432"))
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, testdb.PostgresBaseDSN())
	if err != nil {
		t.Fatal(err)
	}
	schema := "restart_" + time.Now().Format("150405")
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("PostgreSQL unreachable at %s: %v", testdb.PostgresBaseDSN(), err)
	}
	admin.Close()
	sep := "?"
	if strings.Contains(testdb.PostgresBaseDSN(), "?") {
		sep = "&"
	}
	restartUnder(t, testdb.PostgresBaseDSN()+sep+"search_path="+schema,
		func() { run(t, "pg_ctlcluster", "--skip-systemctl-redirect", v, cluster, "stop") },
		func() time.Time {
			// pg_ctlcluster start returns once the server accepts connections.
			run(t, "pg_ctlcluster", "--skip-systemctl-redirect", v, cluster, "start")
			return time.Now()
		})
}

func TestMariaDBRestart(t *testing.T) {
	if os.Getenv("BQ_TEST_MYSQL_RESTART") != "1" {
		t.Skip("restarts the MariaDB server: run through `make test`, which sets BQ_TEST_MYSQL_RESTART=1 for a last step of its own")
	}
	port := localPort(t, testdb.MySQLBaseDSN(), "3306")
	cfg, err := bqmysql.ParseURL(testdb.MySQLBaseDSN())
	if err != nil {
		t.Fatal(err)
	}
	admin := []string{"-h127.0.0.1", "-P" + port, "-u" + cfg.User, "--connect-timeout=1"}
	if cfg.Passwd != "" {
		admin = append(admin, "-p"+cfg.Passwd)
	}
	ping := func() bool { return exec.Command("mysqladmin", append(admin, "ping")...).Run() == nil }
	if !ping() {
		t.Fatalf("MariaDB does not answer at 127.0.0.1:%s", port)
	}
	db := "restart_" + time.Now().Format("150405")
	run(t, "mysql", append(admin, "-e", "CREATE DATABASE "+db)...)
	u, _ := url.Parse(testdb.MySQLBaseDSN())
	u.Path = "/" + db
	restartUnder(t, u.String(),
		func() {
			run(t, "mysqladmin", append(admin, "shutdown")...)
			for ping() {
				time.Sleep(20 * time.Millisecond)
			}
		},
		func() time.Time {
			run(t, "start-stop-daemon", "--start", "--oknodo", "--background", "--exec", "/usr/sbin/mariadbd", "--", "--user=mysql")
			deadline := time.Now().Add(60 * time.Second)
			for !ping() {
				if time.Now().After(deadline) {
					t.Fatal("MariaDB did not come back within 60 s")
				}
				time.Sleep(10 * time.Millisecond)
			}
			return time.Now()
		})
}

// restartUnder runs a worker on dsn, stops the server under it for longer
// than the processes' leases (so every run is stopped and every process
// silent), starts it again, and checks: no job is lost, none completes
// twice, no key ran more than its limit at once, and the first job starts
// soon after the server is ready: a silence every process shared is no
// reason to reap anyone.
func restartUnder(t *testing.T, dsn string, stopServer func(), startServer func() time.Time) {
	ctx := context.Background()
	mu.Lock()
	clear(runs)
	starts = nil
	clear(peak)
	mu.Unlock()
	cfg := bq.Config{
		Queues:            map[string]int{"default": 6},
		PollInterval:      time.Second,
		DispatchInterval:  100 * time.Millisecond,
		HeartbeatInterval: time.Second,
		ProcessDeadAfter:  3 * time.Second,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
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
	mu.Lock()
	defer mu.Unlock()
	reruns := 0
	for n := range total {
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
	i, _ := slices.BinarySearchFunc(starts, ready, func(a, b time.Time) int { return a.Compare(b) })
	if i == len(starts) {
		t.Fatal("no job started after the server was back")
	}
	first := starts[i].Sub(ready)
	// Work resumes within a heartbeat retry (100 ms) and a claim of the
	// server being ready; before, a process reaped itself and waited for
	// its next heartbeat to register again (up to HeartbeatInterval).
	if first > cfg.HeartbeatInterval {
		t.Errorf("the first job started %s after the server was ready, want well within a heartbeat interval (%s)", first, cfg.HeartbeatInterval)
	}
	t.Logf("%d jobs completed across a server restart, limits held (peak %v, limit %d); the first job started %s after the server was ready",
		total, peak, limit, first.Round(time.Millisecond))
	if reruns > 0 {
		t.Errorf("%d jobs completed twice: an outcome is retried until it lands, so a job completed during the outage must not run again", reruns)
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
	}
}

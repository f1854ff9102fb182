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
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bqueue/bq"
	bqmysql "github.com/bqueue/bq/drivers/mysql"
	_ "github.com/bqueue/bq/drivers/postgres"
	"github.com/bqueue/bq/internal/humanize"
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
func localPort(dsn, def string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		return "", fmt.Errorf("refusing to restart the server of %s: write the DSN as a URL naming 127.0.0.1, localhost or ::1", humanize.RedactDSN(dsn))
	}
	if h := u.Hostname(); h != "127.0.0.1" && h != "localhost" && h != "::1" {
		return "", fmt.Errorf("refusing to restart the server at %s: it is not on this machine (unset BQ_TEST_*_RESTART for a server of your own)", humanize.RedactDSN(dsn))
	}
	if p := u.Port(); p != "" {
		return p, nil
	}
	return def, nil
}

// pickCluster returns the cluster of pg_lsclusters' output that serves
// port: the online one configured on it, the newest by version order
// (9.6 before 10, as sort -V) should several be. It refuses when none is
// online there: whatever answers on the port is not a cluster this
// machine's pg_ctlcluster manages, and restarting another would test
// nothing and disturb its users.
func pickCluster(lsclusters, port string) (version, name string, err error) {
	for _, line := range strings.Split(lsclusters, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[2] != port || f[3] != "online" {
			continue
		}
		if version == "" || versionLess(version, f[0]) {
			version, name = f[0], f[1]
		}
	}
	if version == "" {
		return "", "", fmt.Errorf("refusing to restart PostgreSQL: no local cluster is online on port %s (pg_lsclusters):\n%s", port, lsclusters)
	}
	return version, name, nil
}

// versionLess orders versions as sort -V does: 9.6 < 10 < 10.1.
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range min(len(as), len(bs)) {
		x, errX := strconv.Atoi(as[i])
		y, errY := strconv.Atoi(bs[i])
		if errX != nil || errY != nil {
			if as[i] != bs[i] {
				return as[i] < bs[i]
			}
			continue
		}
		if x != y {
			return x < y
		}
	}
	return len(as) < len(bs)
}

// pgCluster names the local cluster serving port.
func pgCluster(t *testing.T, port string) (version, name string) {
	t.Helper()
	out, err := exec.Command("pg_lsclusters", "--no-header").CombinedOutput()
	if err != nil {
		t.Fatalf("pg_lsclusters: %v\n%s", err, out)
	}
	version, name, err = pickCluster(string(out), port)
	if err != nil {
		t.Fatal(err)
	}
	return version, name
}

// mustLocalPort is localPort for a test: it fails the test on a refusal.
func mustLocalPort(t *testing.T, dsn, def string) string {
	t.Helper()
	port, err := localPort(dsn, def)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// TestRestartPicksTheDSNsServer: the restart tests restart only a local
// server, and for PostgreSQL only the cluster online on the DSN's port.
// It runs always: it restarts nothing.
func TestRestartPicksTheDSNsServer(t *testing.T) {
	for _, c := range []struct{ dsn, port, err string }{
		{"postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "5432", ""},
		{"postgres://postgres@localhost/test", "5432", ""},
		{"postgres://postgres@[::1]:5433/test", "5433", ""},
		{"postgres://app:hunter2@db.example.com:5432/test", "", "not on this machine"},
		{"postgres://app:hunter2@10.0.0.7/test", "", "not on this machine"},
		{"postgres:///test?host=/var/run/postgresql", "", "not on this machine"},
		{"host=127.0.0.1 port=5432 password=hunter2", "", "write the DSN as a URL"},
	} {
		port, err := localPort(c.dsn, "5432")
		if c.err == "" && (err != nil || port != c.port) || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("localPort(%q) = %q, %v; want %q or an error saying %q", c.dsn, port, err, c.port, c.err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("localPort(%q): the refusal shows the password: %v", c.dsn, err)
		}
	}
	const ls = `9.6 main    5432 down   postgres /var/lib/postgresql/9.6/main /var/log/postgresql/postgresql-9.6-main.log
10  main    5432 online postgres /var/lib/postgresql/10/main /var/log/postgresql/postgresql-10-main.log
16  main    5433 online postgres /var/lib/postgresql/16/main /var/log/postgresql/postgresql-16-main.log
9.6 old     5434 online postgres /var/lib/postgresql/9.6/old /var/log/postgresql/postgresql-9.6-old.log
10  other   5434 online postgres /var/lib/postgresql/10/other /var/log/postgresql/postgresql-10-other.log
`
	for _, c := range []struct{ port, version, name string }{
		{"5432", "10", "main"}, {"5433", "16", "main"}, {"5434", "10", "other"}, {"5999", "", ""},
	} {
		v, name, err := pickCluster(ls, c.port)
		if v != c.version || name != c.name || (err == nil) != (c.version != "") {
			t.Errorf("pickCluster(port %s) = %s %s, %v; want %q %q", c.port, v, name, err, c.version, c.name)
		}
	}
}

func TestPostgresRestart(t *testing.T) {
	if os.Getenv("BQ_TEST_PG_RESTART") != "1" {
		t.Skip("restarts the PostgreSQL server: run through `make test`, which sets BQ_TEST_PG_RESTART=1 for a last step of its own")
	}
	v, cluster := pgCluster(t, mustLocalPort(t, testdb.PostgresBaseDSN(), "5432"))
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
	port := mustLocalPort(t, testdb.MySQLBaseDSN(), "3306")
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

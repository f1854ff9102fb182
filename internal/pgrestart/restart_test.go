// Package pgrestart restarts the PostgreSQL server under a running bq and
// checks nothing is lost. It disturbs every other user of the server, so
// it runs only when BQ_TEST_PG_RESTART=1, which `make test` sets for a
// last step of its own after every other test has finished.
package pgrestart

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bqueue/bq"
)

type Args struct {
	Key string
	N   int
}

var (
	mu   sync.Mutex
	runs = map[int]int{} // N -> completed runs
)

var job = bq.Define("pgrestart.job", func(ctx context.Context, a Args) error {
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
	Concurrency: &bq.Concurrency[Args]{Key: func(a Args) string { return a.Key }, To: 2},
})

func baseDSN() string {
	if dsn := os.Getenv("BQ_TEST_POSTGRES_DSN"); dsn != "" {
		return dsn
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

func pgctl(t *testing.T, action string) {
	t.Helper()
	versions, err := os.ReadDir("/etc/postgresql")
	if err != nil || len(versions) == 0 {
		t.Fatalf("no PostgreSQL cluster under /etc/postgresql to %s: %v", action, err)
	}
	v := versions[len(versions)-1].Name()
	out, err := exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", v, "main", action).CombinedOutput()
	if err != nil {
		t.Fatalf("pg_ctlcluster %s %s: %v\n%s", v, action, err, out)
	}
}

func TestPostgresRestart(t *testing.T) {
	if os.Getenv("BQ_TEST_PG_RESTART") != "1" {
		t.Skip("restarts the PostgreSQL server: run through `make test`, which sets BQ_TEST_PG_RESTART=1 for a last step of its own")
	}
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, baseDSN())
	if err != nil {
		t.Fatal(err)
	}
	schema := "restart_" + time.Now().Format("150405")
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("PostgreSQL unreachable at %s: %v", baseDSN(), err)
	}
	admin.Close()
	dsn := baseDSN() + "&search_path=" + schema
	if !strings.Contains(baseDSN(), "?") {
		dsn = baseDSN() + "?search_path=" + schema
	}
	cfg := bq.Config{
		Queues:            map[string]int{"default": 6},
		PollInterval:      50 * time.Millisecond,
		DispatchInterval:  100 * time.Millisecond,
		HeartbeatInterval: 250 * time.Millisecond,
		ProcessDeadAfter:  15 * time.Second,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	}
	client, err := bq.Open(ctx, dsn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	const total = 150
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
	pgctl(t, "stop")
	stoppedAt := time.Now()
	if _, err := job.Enqueue(ctx, client, Args{Key: "a", N: total}); err == nil {
		t.Error("an enqueue with the server down reported success")
	}
	time.Sleep(2 * time.Second)
	pgctl(t, "start")
	t.Logf("server down for %s", time.Since(stoppedAt).Round(time.Millisecond))

	waitFor(t, 60*time.Second, "every job to complete", func() bool {
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
			reruns++ // finished while the server was down, then retried
		}
	}
	t.Logf("%d jobs completed across a server restart; %d ran again after their outcome could not be recorded", total, reruns)
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
	}
}

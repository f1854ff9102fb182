package conformance

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bqueue/bq"
	bqmysql "github.com/bqueue/bq/drivers/mysql"
	"github.com/bqueue/bq/drivers/sqlite"
	"github.com/bqueue/bq/internal/driver"
)

// helperMain is a worker process: the test binary re-executed with
// BQ_HELPER=worker. It works the default queue of BQ_DSN with BQ_SLOTS
// slots, recording each run in test_runs, until SIGTERM.
func helperMain() int {
	dsn := os.Getenv("BQ_DSN")
	slots, _ := strconv.Atoi(os.Getenv("BQ_SLOTS"))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	var err error
	switch {
	case strings.HasPrefix(dsn, "sqlite://"):
		helperDialect = "sqlite"
		helperDB, err = sql.Open("sqlite", sqlite.DSN(strings.TrimPrefix(dsn, "sqlite://")))
	case strings.HasPrefix(dsn, "mysql://"):
		helperDialect = "mysql"
		var d *bqmysql.Driver
		if d, err = bqmysql.Open(ctx, dsn); err == nil {
			helperDB = d.DB()
		}
	default:
		helperDialect = "postgres"
		helperDB, err = sql.Open("pgx", dsn)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper: open recorder:", err)
		return 1
	}
	cfg := testConfig()
	cfg.Queues = map[string]int{"default": slots}
	client, err := bq.Open(ctx, dsn, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper: open client:", err)
		return 1
	}
	defer client.Close()
	if err := client.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "helper: run:", err)
		return 1
	}
	if _, err := helperDB.ExecContext(context.Background(), rebind(helperDialect,
		`INSERT INTO test_conflicts (pid, retried) VALUES (?, ?)`), os.Getpid(), driver.RetriedConflicts.Load()); err != nil {
		fmt.Fprintln(os.Stderr, "helper: record conflicts:", err)
		return 1
	}
	return 0
}

// spawnWorkers starts n worker processes; they are stopped with SIGTERM
// when the test ends (or by stop).
func (h *harness) spawnWorkers(n, slots int) (stop func()) {
	h.t.Helper()
	var cmds []*exec.Cmd
	for range n {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "BQ_HELPER=worker", "BQ_DSN="+h.dsn, "BQ_SLOTS="+strconv.Itoa(slots))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			h.t.Fatalf("start worker process: %v", err)
		}
		cmds = append(cmds, cmd)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		for _, c := range cmds {
			_ = c.Process.Signal(syscall.SIGTERM)
		}
		for _, c := range cmds {
			done := make(chan error, 1)
			go func() { done <- c.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					h.t.Errorf("worker process %d: %v", c.Process.Pid, err)
				}
			case <-time.After(30 * time.Second):
				_ = c.Process.Kill()
				h.t.Errorf("worker process %d did not stop within 30s of SIGTERM", c.Process.Pid)
			}
		}
	}
	h.t.Cleanup(stop)
	return stop
}

// dbRuns reads the runs helper processes recorded.
func (h *harness) dbRuns(t *testing.T) []run {
	rows, err := h.raw.QueryContext(context.Background(), `SELECT job_id, kind, jkey, pid, started_ns, ended_ns FROM test_runs`)
	if err != nil {
		t.Fatalf("read runs: %v", err)
	}
	defer rows.Close()
	var out []run
	for rows.Next() {
		var r run
		var start, end int64
		if err := rows.Scan(&r.JobID, &r.Kind, &r.Key, &r.PID, &start, &end); err != nil {
			t.Fatal(err)
		}
		r.Start, r.End = time.Unix(0, start), time.Unix(0, end)
		out = append(out, r)
	}
	return out
}

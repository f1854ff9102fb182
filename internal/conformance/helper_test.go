package conformance

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bqueue/bq"
	bqmysql "github.com/bqueue/bq/drivers/mysql"
	"github.com/bqueue/bq/drivers/postgres"
	"github.com/bqueue/bq/drivers/sqlite"
	"github.com/bqueue/bq/internal/driver"
)

// helperMain is a bq process: the test binary re-executed with BQ_HELPER
// set to "worker" (workers and dispatcher), "workers" (workers only) or
// "dispatcher" ("migrate", "duplicate" and "enqueue-in" are one-off checks). It works queue BQ_QUEUE (default "default") of BQ_DSN with
// BQ_SLOTS slots,
// recording each run in test_runs, until SIGTERM (a second one exits at
// once). BQ_DEAD_AFTER, BQ_HEARTBEAT, BQ_POLL and BQ_DISPATCH override the
// test timings. With BQ_FREEZE_FILE set, the first transaction of bq's
// that commits after that file appears stops just before its commit (see
// installFreeze). With BQ_RECORD_DSN set, the runs are recorded over that
// DSN rather than BQ_DSN: a process whose BQ_DSN goes through a proxy
// that partitions it (partition_test.go) still leaves the evidence.
func helperMain() int {
	dsn := os.Getenv("BQ_DSN")
	record := cmp.Or(os.Getenv("BQ_RECORD_DSN"), dsn)
	slots, _ := strconv.Atoi(os.Getenv("BQ_SLOTS"))
	ctx, stop := bq.SignalContext(context.Background())
	defer stop()

	var err error
	switch {
	case strings.HasPrefix(record, "sqlite://"):
		helperDialect = "sqlite"
		// The recorder outwaits a process frozen inside a write
		// transaction (pause_test.go freezes one for 15 s): a run whose
		// record failed would look like a run bq lost.
		recorder := strings.Replace(sqlite.DSN(strings.TrimPrefix(record, "sqlite://")), "busy_timeout(10000)", "busy_timeout(60000)", 1)
		helperDB, err = sql.Open("sqlite", recorder)
	case strings.HasPrefix(record, "mysql://"):
		helperDialect = "mysql"
		var d *bqmysql.Driver
		if d, err = bqmysql.Open(ctx, record); err == nil {
			helperDB = d.DB()
		}
	case strings.Contains(record, postgres.ListenDSNParam+"="):
		// Through PgBouncer (pgbouncer_test.go): bq's driver reads the
		// DSN's own parameter, and runs no named prepared statements.
		helperDialect = "postgres"
		var d *postgres.Driver
		if d, err = postgres.Open(ctx, record); err == nil {
			helperDB = driver.EngineOf(d).SQLDB()
		}
	default:
		helperDialect = "postgres"
		helperDB, err = sql.Open("pgx", record)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper: open recorder:", err)
		return 1
	}
	cfg := testConfig()
	if slots > 0 {
		cfg.Queues = map[string]int{cmp.Or(os.Getenv("BQ_QUEUE"), "default"): slots}
	}
	if d, err := time.ParseDuration(os.Getenv("BQ_DEAD_AFTER")); err == nil {
		cfg.ProcessDeadAfter = d
	}
	if d, err := time.ParseDuration(os.Getenv("BQ_POLL")); err == nil {
		cfg.PollInterval = d
	}
	if d, err := time.ParseDuration(os.Getenv("BQ_HEARTBEAT")); err == nil {
		cfg.HeartbeatInterval = d
	}
	if d, err := time.ParseDuration(os.Getenv("BQ_DISPATCH")); err == nil {
		cfg.DispatchInterval = d
	}
	if f := os.Getenv("BQ_FREEZE_FILE"); f != "" {
		installFreeze(f)
	}
	client, err := bq.Open(ctx, dsn, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper: open client:", err)
		return 1
	}
	defer client.Close()
	if os.Getenv("BQ_HELPER") == "duplicate" {
		return duplicateMain(ctx, client)
	}
	if os.Getenv("BQ_HELPER") == "enqueue-in" {
		return enqueueInMain(ctx, client)
	}
	if os.Getenv("BQ_HELPER") == "migrate" {
		if err := client.Migrate(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "helper: migrate:", err)
			return 1
		}
		return 0
	}
	run := map[string]func(context.Context) error{
		"worker": client.Run, "workers": client.RunWorkers, "dispatcher": client.RunDispatcher,
	}[os.Getenv("BQ_HELPER")]
	if err := run(ctx); err != nil {
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

// installFreeze sets driver.BeforeCommit so that, once file exists, the
// next commit of a transaction bq owns removes it, writes the marker
// file+".frozen" (the committing goroutine's stack) and sleeps 300 ms
// still inside the transaction, holding its locks: the test, polling for
// the marker, stops the process there with SIGSTOP. It fires once.
func installFreeze(file string) {
	var fired atomic.Bool
	driver.BeforeCommit = func() {
		if fired.Load() {
			return
		}
		if _, err := os.Stat(file); err != nil || fired.Swap(true) {
			return
		}
		_ = os.Remove(file)
		// The marker names the transaction: the stack of its commit. It
		// appears whole (renamed into place), as the test reads it.
		if err := os.WriteFile(file+".tmp", debug.Stack(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "helper: write freeze marker:", err)
		}
		if err := os.Rename(file+".tmp", file+".frozen"); err != nil {
			fmt.Fprintln(os.Stderr, "helper: write freeze marker:", err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// spawn starts one helper process of mode (see helperMain); extra env
// entries override its settings. The caller stops it.
func (h *harness) spawn(mode string, slots int, env ...string) *exec.Cmd {
	h.t.Helper()
	return h.spawnTo(os.Stderr, mode, slots, env...)
}

// spawnTo is spawn with the process's output written to out.
func (h *harness) spawnTo(out io.Writer, mode string, slots int, env ...string) *exec.Cmd {
	h.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BQ_HELPER="+mode, "BQ_DSN="+h.dsn, "BQ_SLOTS="+strconv.Itoa(slots))
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("start %s process: %v", mode, err)
	}
	return cmd
}

// spawnWorkers starts n worker processes; they are stopped with SIGTERM
// when the test ends (or by stop).
func (h *harness) spawnWorkers(n, slots int) (stop func()) {
	h.t.Helper()
	var cmds []*exec.Cmd
	for range n {
		cmds = append(cmds, h.spawn("worker", slots))
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			h.stop(cmds...)
		}
	}
	h.t.Cleanup(stop)
	return stop
}

// stop ends helper processes with SIGTERM and checks they exit cleanly.
func (h *harness) stop(cmds ...*exec.Cmd) {
	h.t.Helper()
	for _, c := range cmds {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range cmds {
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				h.t.Errorf("process %d: %v", c.Process.Pid, err)
			}
		case <-time.After(30 * time.Second):
			_ = c.Process.Kill()
			h.t.Errorf("process %d did not stop within 30s of SIGTERM", c.Process.Pid)
		}
	}
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

// chaosFleet is a dispatcher process and worker processes (chaosEnv
// timings) of which killFor kills one at random with SIGKILL now and then,
// starting a replacement each time. Every process is stopped when the
// test ends.
type chaosFleet struct {
	h        *harness
	slots    int
	disp     *exec.Cmd
	mu       sync.Mutex
	workers  map[int]*exec.Cmd
	killedAt map[int]time.Time // pid -> when it was killed
	kills    int
	lastKill time.Time
	// busyFirst: kill a worker with a run in progress (test_runs) when
	// there is one, so that kills land on claims.
	busyFirst bool
	// env is the workers' further environment (e.g. BQ_QUEUE).
	env []string
}

// chaosFleet starts a dispatcher process and n worker processes of slots
// slots each, env added to the workers' environment.
func (h *harness) chaosFleet(n, slots int, env ...string) *chaosFleet {
	h.t.Helper()
	f := &chaosFleet{h: h, slots: slots, disp: h.spawn("dispatcher", 0, chaosEnv()...),
		workers: map[int]*exec.Cmd{}, killedAt: map[int]time.Time{}, env: env}
	for range n {
		f.startWorker()
	}
	h.t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		all := append([]*exec.Cmd{f.disp}, values(f.workers)...)
		for _, c := range all {
			_ = c.Process.Signal(syscall.SIGTERM)
		}
		for _, c := range all {
			_ = c.Wait()
		}
	})
	return f
}

func (f *chaosFleet) startWorker() {
	cmd := f.h.spawn("workers", f.slots, append(chaosEnv(), f.env...)...)
	f.mu.Lock()
	f.workers[cmd.Process.Pid] = cmd
	f.mu.Unlock()
}

// killFor kills a random worker (see busyFirst) every 1-2 s (or every():
// a pause drawn anew each time) and replaces it, for d.
func (f *chaosFleet) killFor(d time.Duration, every func() time.Duration) {
	if every == nil {
		every = func() time.Duration { return time.Second + rand.N(time.Second) }
	}
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		time.Sleep(every())
		busy := f.busy()
		f.mu.Lock()
		victim := f.victim(busy)
		_ = victim.Process.Kill()
		_ = victim.Wait()
		f.lastKill = time.Now()
		f.killedAt[victim.Process.Pid] = f.lastKill
		delete(f.workers, victim.Process.Pid)
		f.kills++
		f.mu.Unlock()
		f.startWorker()
	}
}

// victim picks a worker: one with a run in progress (busy) when there
// is one, else any. f.mu is held.
func (f *chaosFleet) victim(busy map[int]bool) *exec.Cmd {
	for pid, c := range f.workers {
		if busy[pid] {
			return c
		}
	}
	return values(f.workers)[rand.IntN(len(f.workers))]
}

// busy returns the worker processes with a run in progress, when
// busyFirst asks for them.
func (f *chaosFleet) busy() map[int]bool {
	out := map[int]bool{}
	if !f.busyFirst {
		return out
	}
	rows, err := f.h.raw.QueryContext(context.Background(), `SELECT DISTINCT pid FROM test_runs WHERE ended_ns = 0`)
	if err != nil {
		f.h.t.Errorf("read the runs in progress: %v", err)
		return out
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			f.h.t.Errorf("read the runs in progress: %v", err)
			return out
		}
		out[pid] = true
	}
	return out
}

// endAtKill returns runs with each run its process's kill cut short
// ending hold after the kill, or at its job's next start if sooner (its
// claim keeps its slots until reaped: hold is a bound on the reap's
// earliest time; 0 ends it at the kill). A run that never ended in a
// process not killed is an error.
func (f *chaosFleet) endAtKill(t *testing.T, runs []run, hold time.Duration) []run {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	next := func(r run) time.Time {
		var at time.Time
		for _, o := range runs {
			if o.JobID == r.JobID && o.Start.After(r.Start) && (at.IsZero() || o.Start.Before(at)) {
				at = o.Start
			}
		}
		return at
	}
	var out []run
	for _, r := range runs {
		if r.End.Before(r.Start) {
			at, ok := f.killedAt[r.PID]
			if !ok {
				t.Errorf("job %d: run in live process %d never ended", r.JobID, r.PID)
				continue
			}
			r.End = at.Add(hold)
			if n := next(r); !n.IsZero() && n.Before(r.End) {
				r.End = n
			}
		}
		out = append(out, r)
	}
	return out
}

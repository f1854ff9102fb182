package pgrestart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/testdb"
)

// TestPostgresFailover fails a PostgreSQL primary over to its streaming
// replica under a running bq: a primary and a replica of the test's own
// (never the shared server), with synchronous replication (every commit
// acknowledged only once the replica has it), and bq on a multi-host DSN
// with target_session_attrs=read-write. Mid-run the primary's
// postmaster is ended with SIGKILL, as a crash of its host would end it,
// and the replica is promoted. Then: every job whose enqueue was
// acknowledged completes, exactly once; none whose enqueue failed exists;
// no key ever ran more than its limit at once; work resumes within a few
// seconds of the promotion, by itself; and the stored rows hold no drift
// (Verify).
func TestPostgresFailover(t *testing.T) {
	gate(t, testdb.Postgres, "BQ_TEST_PG_RESTART")
	failover(t, true)
}

// TestPostgresFailoverAsync is TestPostgresFailover with asynchronous
// replication, the default: the replica may not have the primary's
// newest commits when it is promoted.
func TestPostgresFailoverAsync(t *testing.T) {
	gate(t, testdb.Postgres, "BQ_TEST_PG_RESTART")
	failover(t, false)
}

func failover(t *testing.T, synchronous bool) {
	ctx := context.Background()
	primary := testdb.PrivatePostgres(t, "max_wal_senders=5", "synchronous_commit=on")
	replica := testdb.PrivatePostgresReplica(t, primary)
	want := "async"
	if synchronous {
		want = "sync"
		if err := primary.SQL(ctx, "ALTER SYSTEM SET synchronous_standby_names = '*'", "SELECT pg_reload_conf()"); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "the replica to stream as "+want, func() bool {
		return primary.SQL(ctx, "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_stat_replication WHERE sync_state = '"+want+"') "+
			"THEN RAISE EXCEPTION 'not yet'; END IF; END $$") == nil
	})
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/test?sslmode=disable&target_session_attrs=read-write",
		primary.Port, replica.Port)

	resetRuns()
	cfg := faultConfig(10)
	client, err := bq.Open(ctx, dsn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.Migrate(ctx); err != nil {
		t.Fatal(err)
	}

	// A producer enqueues steadily, before, across and after the
	// failover, and keeps what was acknowledged and what was refused.
	var pmu sync.Mutex
	acked := map[int]int64{} // N -> job id
	var refused []int
	// lostReply: enqueues refused because the connection died, which may
	// have committed before the reply was lost (N -> the error).
	lostReply := map[int]string{}
	produce, stopProducing := context.WithCancel(ctx)
	var producing sync.WaitGroup
	producing.Go(func() {
		for n := 0; produce.Err() == nil; n++ {
			res, err := job.Enqueue(ctx, client, Args{Key: []string{"a", "b", "c"}[n%3], N: n})
			pmu.Lock()
			if err != nil {
				refused = append(refused, n)
				if connectionLost(err) {
					lostReply[n] = err.Error()
				}
			} else {
				acked[n] = res.ID
			}
			pmu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- client.Run(runCtx) }()

	waitFor(t, 30*time.Second, "some jobs to run", func() bool { mu.Lock(); defer mu.Unlock(); return len(runs) > 50 })
	// Long runs, due as the lag begins: with asynchronous replication
	// their claims are lost while they run on.
	var longIDs []int64
	for i := range 4 {
		res, err := longJob.Enqueue(ctx, client, Args{Key: "long", N: -1 - i}, bq.In(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		longIDs = append(longIDs, res.ID)
	}
	var lagged func()
	if !synchronous {
		// The replica falls behind: the primary's WAL sender is
		// stopped while the primary commits on, so the promotion loses
		// what the replica never received, as a replica that lags does.
		lagged = lag(t, primary, lagFor)
	}
	primary.Kill()
	failedAt := time.Now()
	if lagged != nil {
		lagged()
	}
	if err := replica.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	t.Logf("primary gone; replica promoted %s later", promoted.Sub(failedAt).Round(time.Millisecond))
	time.Sleep(3 * time.Second) // enqueues and runs go on against the new primary
	stopProducing()
	producing.Wait()

	pmu.Lock()
	ids := make(map[int]int64, len(acked))
	for n, id := range acked {
		ids[n] = id
	}
	pmu.Unlock()
	// A job whose enqueue the replica never received is gone: lost, with
	// asynchronous replication only, and its id may since name another
	// job (the sequence restarts from what the replica had). Every
	// other one completes.
	lost := map[int]bool{}
	waitFor(t, 90*time.Second, fmt.Sprintf("the %d acknowledged jobs to complete", len(ids)), func() bool {
		clear(lost)
		for n, id := range ids {
			info, err := client.Job(ctx, id)
			if errors.Is(err, bq.ErrJobNotFound) {
				lost[n] = true
				continue
			}
			if err != nil {
				return false
			}
			var a Args
			if err := json.Unmarshal(info.Args, &a); err != nil || a.N != n {
				lost[n] = true
				continue
			}
			if info.State != bq.StateCompleted {
				return false
			}
		}
		return true
	})
	waitFor(t, 30*time.Second, "the long jobs to complete", func() bool {
		for _, id := range longIDs {
			if info, err := client.Job(ctx, id); err != nil || info.State != bq.StateCompleted {
				return false
			}
		}
		return true
	})
	if synchronous && len(lost) > 0 {
		t.Errorf("%d acknowledged enqueues lost in a failover with synchronous replication", len(lost))
	}
	for n := range lost {
		delete(ids, n)
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	report, err := client.Verify(ctx, bq.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range report.Drift {
		t.Errorf("after the failover: %+v", d)
	}
	conn, err := pgx.Connect(ctx, replica.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var stored int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM bq_jobs").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	// A refused enqueue may have left its job only when its connection
	// died with the server: the commit can land before the reply is lost,
	// which no client can tell from a refusal.
	landed := 0
	for _, n := range refused {
		var found bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM bq_jobs WHERE (args::jsonb->>'N')::int = $1)", n).Scan(&found); err != nil {
			t.Fatal(err)
		}
		if !found {
			continue
		}
		if why, ok := lostReply[n]; ok {
			landed++
			t.Logf("enqueue %d was refused as its connection died (%s), and its commit had landed", n, why)
		} else {
			t.Errorf("enqueue %d was refused with no lost connection, yet its job is stored", n)
		}
	}
	if want := len(ids) + len(longIDs) + landed; stored != want {
		t.Errorf("%d jobs stored, %d enqueues acknowledged and not lost (and %d refused as the server died that had landed): an acknowledged one was lost", stored, want, landed)
	}

	reruns, first, peakSeen := judgeRuns(t, slices.Collect(maps.Keys(ids)), promoted, "the promotion")
	// Connections to the dead primary fail, new ones find the promoted
	// replica (target_session_attrs=read-write), and the workers claim
	// again within a heartbeat retry and a poll.
	if bound := cfg.PollInterval + cfg.HeartbeatInterval; first > bound {
		t.Errorf("the first job started %s after the promotion, want within %s", first, bound)
	}
	t.Logf("%d acknowledged jobs completed across the failover, %d lost with the commits the replica never received (%d enqueues refused while no server took writes), limits held (peak %v, limit %d); the first job started %s after the promotion",
		len(ids), len(lost), len(refused), peakSeen, limit, first.Round(time.Millisecond))
	switch {
	case synchronous && reruns > 0:
		t.Errorf("%d jobs completed twice: with synchronous replication every acknowledged outcome survives the failover", reruns)
	case reruns > 0:
		t.Logf("%d jobs ran again: their completions were among the commits the replica never received", reruns)
	}
}

// longJob runs for 1.5 s, longer than a failover takes, on its own key
// (limit 2): its runs in flight at the failover show whether a run whose
// claim vanished runs on beside its replacement.
var longJob = bq.Define("pgrestart.long", func(ctx context.Context, a Args) error {
	mu.Lock()
	inFlight[a.Key]++
	peak[a.Key] = max(peak[a.Key], inFlight[a.Key])
	mu.Unlock()
	defer func() { mu.Lock(); inFlight[a.Key]--; mu.Unlock() }()
	select {
	case <-time.After(1500 * time.Millisecond):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}, bq.JobOptions[Args]{
	Backoff:     func(int) time.Duration { return 100 * time.Millisecond },
	Concurrency: &bq.Concurrency[Args]{Key: func(a Args) string { return a.Key }, To: limit},
})

// lagFor is how far behind an asynchronous replica is at the failover.
const lagFor = 500 * time.Millisecond

// lag stops the primary's WAL sender (SIGSTOP) for d, so what the
// primary commits meanwhile never reaches the replica, and returns what
// ends the sender (SIGKILL), to call once the primary is gone.
func lag(t *testing.T, primary *testdb.Server, d time.Duration) func() {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, primary.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var pid int
	if err := conn.QueryRow(ctx, "SELECT pid FROM pg_stat_replication").Scan(&pid); err != nil {
		t.Fatalf("find the primary's WAL sender: %v", err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	return func() { _ = syscall.Kill(pid, syscall.SIGKILL) }
}

// connectionLost reports whether err is the loss of the connection to
// the server (killed, or shutting down), after which a commit's outcome
// is unknown.
func connectionLost(err error) bool {
	msg := err.Error()
	for _, s := range []string{"57P01", "unexpected EOF", "connection reset", "conn closed", "broken pipe", "connection refused", "terminating connection"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

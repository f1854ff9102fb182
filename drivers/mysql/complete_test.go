package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/sqlexec"
)

// counting is a transaction that counts the statements run on it.
type counting struct {
	*sql.Tx
	n int
}

func (c *counting) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	c.n++
	return c.Tx.ExecContext(ctx, q, args...)
}

func (c *counting) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	c.n++
	return c.Tx.QueryContext(ctx, q, args...)
}

func (c *counting) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	c.n++
	return c.Tx.QueryRowContext(ctx, q, args...)
}

// e is the engine d seals.
func (d *Driver) e() *engine { return driver.EngineAs[*engine](d) }

// openEngine opens the driver on a fresh migrated database, the URL's
// query set to query.
func openEngine(t *testing.T, query string) *engine {
	t.Helper()
	d, err := Open(context.Background(), testURL(t)+query)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d.e()
}

// counted runs fn in a transaction of e's whose statements it counts,
// commits it and returns the count.
func counted(t *testing.T, e *engine, fn func(tx txExecutor) error) int {
	t.Helper()
	ctx := context.Background()
	tx, err := e.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	c := &counting{Tx: tx}
	x := sqlexec.Begun(e.dl, e, tx, c, nil)
	if err := fn(txExecutor{executor{x.Executor, e}, sqlexec.Ending{Tx: x}}); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return c.n
}

// TestCompleteClaimsStatementsPerChunk pins the cost of a batch of
// completions: three statements per chunk of maxRows claims (lock, delete
// the claims, finish the jobs), not two per claim.
func TestCompleteClaimsStatementsPerChunk(t *testing.T) {
	ctx := context.Background()
	e := openEngine(t, "")
	const n = 2*maxRows + maxRows/2
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	jobs := make([]*driver.NewJob, n)
	for i := range jobs {
		jobs[i] = &driver.NewJob{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1, ScheduledAt: now, State: driver.StateReady}
	}
	var claims []*driver.Claim
	err := driver.InTx(ctx, e, func(ex driver.Executor) (err error) {
		if err := ex.JobInsertMany(ctx, now, jobs); err != nil {
			return err
		}
		claims, err = ex.ReadyClaim(ctx, driver.ClaimParams{Queue: "q", Max: n, ProcessID: 1, Now: now})
		return err
	})
	if err != nil || len(claims) != n {
		t.Fatalf("claimed %d of %d jobs: %v", len(claims), n, err)
	}
	for _, keep := range []bool{true, false} {
		half := claims[:n/2]
		if !keep {
			half = claims[n/2:]
		}
		var matched []driver.Ended
		n := counted(t, e, func(tx txExecutor) (err error) {
			matched, err = tx.ClaimCompleteMany(ctx, half, keep, now)
			return err
		})
		chunks := (len(half) + maxRows - 1) / maxRows
		if len(matched) != len(half) || n != 3*chunks {
			t.Errorf("keep %v: %d claims ended in %d statements, matched %d; want %d statements (3 per %d claims)",
				keep, len(half), n, len(matched), 3*chunks, maxRows)
		}
	}
}

// TestKeyedCompletionsStatementsPerChunk pins the cost of a batch of
// keyed completions, each key with a job blocked behind its holder: the
// completions, the releases and the promotions take a fixed number of
// statements per maxRows keys, not five per key.
func TestKeyedCompletionsStatementsPerChunk(t *testing.T) {
	ctx := context.Background()
	e := openEngine(t, "")
	const n = maxRows + maxRows/2
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	var jobs []*driver.NewJob
	for i := range n {
		l := driver.Limit{Key: fmt.Sprintf("g/%d", i), To: 1, Duration: time.Minute}
		for _, state := range []driver.JobState{driver.StateReady, driver.StateBlocked} {
			jobs = append(jobs, &driver.NewJob{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1,
				Limit: l, ScheduledAt: now, State: state})
		}
	}
	var claims []*driver.Claim
	err := driver.InTx(ctx, e, func(ex driver.Executor) (err error) {
		if err := ex.JobInsertMany(ctx, now, jobs); err != nil {
			return err
		}
		for i := range n {
			l := jobs[2*i].Limit
			if err := ex.SemaphoreEnsure(ctx, l, now); err != nil {
				return err
			}
			if err := ex.SemaphoreSave(ctx, driver.Semaphore{Key: l.Key, Value: 0, Limit: 1, Blocked: 1,
				Duration: time.Minute, ExpiresAt: now.Add(time.Minute)}); err != nil {
				return err
			}
		}
		claims, err = ex.ReadyClaim(ctx, driver.ClaimParams{Queue: "q", Max: n, ProcessID: 1, Now: now})
		return err
	})
	if err != nil || len(claims) != n {
		t.Fatalf("claimed %d of %d jobs: %v", len(claims), n, err)
	}
	var results []lifecycle.Result
	stmts := counted(t, e, func(tx txExecutor) (err error) {
		results, err = lifecycle.CompleteMany(ctx, tx, claims, true, false, now)
		return err
	})
	promoted := 0
	for _, r := range results {
		promoted += r.Promoted.Jobs
	}
	chunks := (n + maxRows - 1) / maxRows
	// Per chunk: 3 to complete; lock, pick, delete blocked, insert ready,
	// save to release and promote.
	if promoted != n || stmts != 8*chunks {
		t.Errorf("%d keyed completions took %d statements and promoted %d; want %d statements (8 per %d keys), %d promoted",
			n, stmts, promoted, 8*chunks, maxRows, n)
	}
}

// TestReleaseManyWithoutInterpolation releases through server-side
// prepared statements (interpolateParams=false), whose parameters reach
// the server typed as strings: the keys' hashes must still find their
// semaphores, or the slots would never come back.
func TestReleaseManyWithoutInterpolation(t *testing.T) {
	ctx := context.Background()
	e := openEngine(t, "?interpolateParams=false")
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	keys := []string{"g/a", "g/b"}
	var got []driver.Promotion
	err := driver.InTx(ctx, e, func(ex driver.Executor) (err error) {
		for _, k := range keys {
			l := driver.Limit{Key: k, To: 1, Duration: time.Minute}
			if err := ex.SemaphoreEnsure(ctx, l, now); err != nil {
				return err
			}
			if err := ex.SemaphoreSave(ctx, driver.Semaphore{Key: k, Value: 0, Limit: 1, Blocked: 1,
				Duration: time.Minute, ExpiresAt: now}); err != nil {
				return err
			}
			if err := ex.JobInsertMany(ctx, now, []*driver.NewJob{{Kind: "k", Queue: "q", Args: []byte(`{}`),
				MaxAttempts: 1, Limit: l, ScheduledAt: now, State: driver.StateBlocked}}); err != nil {
				return err
			}
		}
		got, err = ex.SemaphoreReleaseMany(ctx, keys, []int{1, 1}, now)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if got[i].Jobs != 1 {
			t.Errorf("%s: ReleaseMany promoted %+v, want its blocked job", k, got[i])
		}
	}
}

// TestLockManyWithoutInterpolation creates and locks semaphores through
// server-side prepared statements (interpolateParams=false): the keys'
// hashes and the queue, typed as strings by the server, must still find
// the semaphores and the queue's policy.
func TestLockManyWithoutInterpolation(t *testing.T) {
	ctx := context.Background()
	e := openEngine(t, "?interpolateParams=false")
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	limits := []driver.Limit{{Key: "g/a", To: 2, Duration: time.Minute}, {Key: "g/b", To: 3, Duration: time.Minute}}
	err := driver.InTx(ctx, e, func(ex driver.Executor) error {
		if _, err := ex.PolicyInsert(ctx, driver.Policy{Queue: "q", Namespace: "ns", MaxBlocked: 4, UpdatedAt: now}); err != nil {
			return err
		}
		bl := ex.(driver.BatchLocker)
		for round := range 2 { // creating, then finding what the first saved
			sems, err := bl.SemaphoreLockMany(ctx, limits, []string{"q", "q"}, now)
			if err != nil {
				return err
			}
			for i, s := range sems {
				if want := limits[i].To - round; s.Key != limits[i].Key || s.Value != want || s.Policy.MaxBlocked != 4 {
					t.Errorf("round %d: %s = %+v, want %d free and q's policy", round, limits[i].Key, s, want)
				}
				sems[i].Value--
			}
			if err := bl.SemaphoreSaveMany(ctx, sems); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

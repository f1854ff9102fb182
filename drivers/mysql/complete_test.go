package mysql

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
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

// TestCompleteClaimsStatementsPerChunk pins the cost of a batch of
// completions: three statements per chunk of maxRows claims (lock, delete
// the claims, finish the jobs), not two per claim.
func TestCompleteClaimsStatementsPerChunk(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	e := d.e
	const n = 2*maxRows + maxRows/2
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	jobs := make([]*driver.NewJob, n)
	for i := range jobs {
		jobs[i] = &driver.NewJob{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1, ScheduledAt: now, State: driver.StateReady}
	}
	var claims []*driver.Claim
	err = driver.InTx(ctx, e, func(ex driver.Executor) error {
		if err := ex.InsertJobs(ctx, now, jobs); err != nil {
			return err
		}
		claims, err = ex.ClaimReady(ctx, driver.ClaimParams{Queue: "q", Max: n, ProcessID: 1, Now: now})
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
		tx, err := e.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			t.Fatal(err)
		}
		c := &counting{Tx: tx}
		matched, err := sqlexec.Begun(e.dl, e, tx, c, nil).CompleteClaims(ctx, half, keep, now)
		if err != nil {
			tx.Rollback()
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		chunks := (len(half) + maxRows - 1) / maxRows
		if len(matched) != len(half) || c.n != 3*chunks {
			t.Errorf("keep %v: %d claims ended in %d statements, matched %d; want %d statements (3 per %d claims)",
				keep, len(half), c.n, len(matched), 3*chunks, maxRows)
		}
	}
}

package mysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlexec"
)

// executor is sqlexec's, with the claim MySQL takes its own way: in as
// few statements as the database's own ceiling takes (bench/ceiling).
type executor struct {
	*sqlexec.Executor
	d *engine
}

// txExecutor is a transaction bq owns.
type txExecutor struct {
	executor
	sqlexec.Ending
}

var _ driver.Tx = txExecutor{}

// Claim claims from an uncapped queue by a locking read that checks the
// gate itself, inside the rule's transaction; the gate is read only when
// it claims nothing.
func (d *engine) Claim(ctx context.Context, p driver.ClaimParams) ([]*driver.Claim, error) {
	return driver.ClaimWithin(ctx, d, p, driver.ClaimWays{InTx: func(ctx context.Context, tx driver.Executor, p driver.ClaimParams) ([]*driver.Claim, error) {
		return tx.(txExecutor).claimUncapped(ctx, p)
	}, ByRule: &d.byRule})
}

// ReadyClaim claims in three statements: a locking read of the queue's
// first ready rows joined to their jobs, skipping rows others hold; the
// delete of those ready rows; one INSERT of their claims, whose fences
// come back as InsertIDs reads ids. The jobs' rows are locked with their
// ready rows: nothing waits for them but a change of the same job, which
// the claim would skip anyway.
func (e executor) ReadyClaim(ctx context.Context, p driver.ClaimParams) ([]*driver.Claim, error) {
	if p.Among != nil {
		return e.Executor.ReadyClaim(ctx, p)
	}
	return e.claim(ctx, p, e.d.dl.own.pickClaim, p.Queue, p.Max)
}

// claimUncapped claims as ReadyClaim does, from a queue with no
// MaxActive that is not paused: the pick checks both.
func (e executor) claimUncapped(ctx context.Context, p driver.ClaimParams) ([]*driver.Claim, error) {
	return e.claim(ctx, p, e.d.dl.own.pickUncapped, p.Queue, p.Queue, p.Queue, p.Max)
}

// claim claims the jobs that pick, a locking read of ready rows joined to
// their jobs (sqltext.JobColumns), returns given args.
func (e executor) claim(ctx context.Context, p driver.ClaimParams, pick string, args ...any) ([]*driver.Claim, error) {
	dl := e.d.dl
	args = append([]any{}, args...)
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = dl.Text(s)
		}
	}
	at := sqlexec.Micros(p.Now)
	var claims []*driver.Claim
	err := e.Atomic(ctx, func(x *sqlexec.Executor) error {
		var err error
		claims, err = sqlexec.Collect(ctx, x.DB(), func(rows *sql.Rows) (*driver.Claim, error) {
			c := &driver.Claim{ClaimedAt: sqlexec.FromMicros(at)}
			return c, sqlexec.ScanJob(rows.Scan, &c.Job)
		}, pick, args...)
		if err != nil || len(claims) == 0 {
			return err
		}
		ids := make([]int64, len(claims))
		for i, c := range claims {
			ids[i] = c.ID
		}
		if _, err := sqlexec.ExecIn(ctx, x, dl.q.DeleteReady, ids); err != nil {
			return err
		}
		query, values := dl.ListRows(dl.q.InsertClaims, ids, dl.Text(p.Queue), p.ProcessID, at)
		fences, err := dl.insertIDs(ctx, x.DB(), query, values, "fence")
		if err != nil {
			return err
		}
		if len(fences) != len(claims) {
			return fmt.Errorf("%d fences returned for %d claims", len(fences), len(claims))
		}
		for i, c := range claims {
			c.Fence = fences[i]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return claims, nil
}

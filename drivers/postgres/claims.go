package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bqueue/bq/internal/driver"
)

// claims reads rows of jobColumns and fence, then claimed_at if the rows
// have it; without it the claims were made at now.
func claims(ctx context.Context, db dbtx, withClaimedAt bool, now time.Time, query string, args ...any) ([]*driver.Claim, error) {
	return collect(ctx, db, func(r pgx.CollectableRow) (*driver.Claim, error) {
		c := &driver.Claim{ClaimedAt: now}
		extra := []any{&c.Fence}
		if withClaimedAt {
			extra = append(extra, &c.ClaimedAt)
		}
		return c, scanJob(r, &c.Job, extra...)
	}, query, args...)
}

// ClaimUncapped is the one-statement claim: it leaves queues with a
// MaxActive or a pause alone, so uncapped queues pay two index probes
// for those features.
func (e *executor) ClaimUncapped(ctx context.Context, p driver.ClaimParams) ([]*driver.Claim, error) {
	return collectGeneric(ctx, e, func(r pgx.CollectableRow) (*driver.Claim, error) {
		c := &driver.Claim{ClaimedAt: p.Now}
		return c, scanJob(r, &c.Job, &c.Fence)
	}, e.q.claimUncapped, p.Queue, p.Max, p.ProcessID, p.Now)
}

func (e *executor) ClaimReady(ctx context.Context, p driver.ClaimParams) ([]*driver.Claim, error) {
	return claims(ctx, e.db, false, p.Now, e.q.claimReady, p.Queue, p.Max, p.ProcessID, p.Now)
}

func (e *executor) HasReady(ctx context.Context, queue string) (bool, error) {
	var any bool
	err := e.db.QueryRow(ctx, e.q.hasReady, queue).Scan(&any)
	return any, err
}

// QueueGate locks the policy row only inside a transaction: outside one
// (the pool) a lock would end with its statement.
func (e *executor) QueueGate(ctx context.Context, queue string) (driver.Gate, error) {
	query := e.q.lockQueueGate
	if _, pool := e.db.(*pgxpool.Pool); pool {
		query = e.q.queueGate
	}
	var g driver.Gate
	if err := e.db.QueryRow(ctx, query, queue).Scan(&g.MaxActive, &g.Paused); err != nil {
		return g, fmt.Errorf("read the cap and pause of queue %q: %w", queue, err)
	}
	return g, nil
}

func (e *executor) CountClaimed(ctx context.Context, queue string) (int, error) {
	var n int
	if err := e.db.QueryRow(ctx, e.q.countClaimed, queue).Scan(&n); err != nil {
		return 0, fmt.Errorf("count running jobs of queue %q: %w", queue, err)
	}
	return n, nil
}

func (e *executor) CompleteClaims(ctx context.Context, claims []*driver.Claim, keep bool, now time.Time) ([]driver.Fenced, error) {
	ids, fences := make([]int64, len(claims)), make([]int64, len(claims))
	for i, c := range claims {
		ids[i], fences[i] = c.ID, c.Fence
	}
	query, args := e.q.completeClaims, []any{ids, fences, now}
	if !keep {
		query, args = e.q.completeDelete, args[:2]
	}
	matched, err := collectGeneric(ctx, e, func(row pgx.CollectableRow) (f driver.Fenced, err error) {
		err = row.Scan(&f.JobID, &f.Fence)
		return f, err
	}, query, args...)
	if err != nil {
		return nil, fmt.Errorf("complete %d jobs: %w", len(claims), err)
	}
	return matched, nil
}

func (e *executor) DeleteClaim(ctx context.Context, jobID, fence int64) (bool, error) {
	tag, err := e.db.Exec(ctx, e.q.deleteClaim, jobID, fence)
	if err != nil {
		return false, fmt.Errorf("delete claim of job %d: %w", jobID, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (e *executor) LostClaims(ctx context.Context, now time.Time, deadAfter time.Duration, max int) ([]*driver.Claim, error) {
	out, err := claims(ctx, e.db, true, time.Time{}, e.q.lostClaims, now, deadAfter.Milliseconds(), max)
	if err != nil {
		return nil, fmt.Errorf("find claims of dead processes: %w", err)
	}
	return out, nil
}

func (e *executor) LostClaimsOfKey(ctx context.Context, key string, now time.Time, silence time.Duration) ([]*driver.Claim, error) {
	out, err := claims(ctx, e.db, true, time.Time{}, e.q.lostClaimsOfKey, now, key, silence.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("find lost claims of %q: %w", key, err)
	}
	return out, nil
}

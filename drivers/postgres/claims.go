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

func (e *executor) ClaimReady(ctx context.Context, p driver.ClaimParams) ([]*driver.Claim, error) {
	claims, err := e.claim(ctx, e.db, e.q.claimReady, p.Max, p)
	if err != nil || len(claims) > 0 {
		return claims, err
	}
	// Nothing claimed: the queue is empty, or capped by a policy.
	var limit int
	if err := e.db.QueryRow(ctx, e.q.policyCap, p.Queue).Scan(&limit); err != nil {
		return nil, fmt.Errorf("read the cap of queue %q: %w", p.Queue, err)
	}
	if limit == 0 {
		return nil, nil
	}
	return e.claimCapped(ctx, p)
}

func (e *executor) claim(ctx context.Context, db dbtx, query string, max int, p driver.ClaimParams) ([]*driver.Claim, error) {
	out, err := claims(ctx, db, false, p.Now, query, p.Queue, max, p.ProcessID, p.Now)
	if err != nil {
		return nil, fmt.Errorf("claim jobs of queue %q: %w", p.Queue, err)
	}
	return out, nil
}

// claimCapped claims within the queue's MaxActive. Claimers of the queue
// take turns on its policy row; the count of claimed jobs is read after
// the lock, in a statement of its own, so it sees every claim committed
// before this one's turn.
func (e *executor) claimCapped(ctx context.Context, p driver.ClaimParams) (claims []*driver.Claim, err error) {
	pool, ok := e.db.(*pgxpool.Pool)
	if !ok {
		return e.claimWithin(ctx, e.db, p) // already in a transaction
	}
	// A pipeTx like Driver.Begin's, so this transaction is bounded too.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("claim jobs of capped queue %q: %w", p.Queue, err)
	}
	tx := &pipeTx{conn: conn, idleTimeout: e.txIdle}
	if claims, err = e.claimWithin(ctx, tx, p); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("claim jobs of capped queue %q: %w", p.Queue, err)
	}
	return claims, nil
}

// claimWithin is claimCapped's work inside tx.
func (e *executor) claimWithin(ctx context.Context, tx dbtx, p driver.ClaimParams) (claims []*driver.Claim, err error) {
	var limit, active int
	ok, err := found(tx.QueryRow(ctx, e.q.lockPolicyCap, p.Queue).Scan(&limit))
	if err != nil {
		return nil, fmt.Errorf("lock the cap of queue %q: %w", p.Queue, err)
	}
	if !ok {
		limit = p.Max // the policy went away meanwhile
	}
	if err := tx.QueryRow(ctx, e.q.countClaimed, p.Queue).Scan(&active); err != nil {
		return nil, fmt.Errorf("count running jobs of queue %q: %w", p.Queue, err)
	}
	if n := min(p.Max, limit-active); n > 0 {
		return e.claim(ctx, tx, e.q.claimCapped, n, p)
	}
	return nil, nil
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
	matched, err := collect(ctx, e.db, func(row pgx.CollectableRow) (f driver.Fenced, err error) {
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

package sqlexec

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

func (e *Executor) ClaimReady(ctx context.Context, p driver.ClaimParams) ([]*driver.Claim, error) {
	queue := e.d.Text(p.Queue)
	if e.d.SingleWriter() && !e.inTx {
		// Look before taking the write lock: an idle poll only reads.
		var ready bool
		if err := e.db.QueryRowContext(ctx, e.q.HasReady, queue).Scan(&ready); err != nil {
			return nil, fmt.Errorf("look for ready jobs of queue %q: %w", p.Queue, err)
		}
		if !ready {
			return nil, nil
		}
	}
	var claims []*driver.Claim
	err := e.Atomic(ctx, func(x *Executor) error {
		claims = nil
		max, err := x.capClaim(ctx, queue, p.Max)
		if err != nil || max <= 0 {
			return err
		}
		picked, err := Column[int64](ctx, x.db, x.q.PickReady, queue, max)
		if err != nil || len(picked) == 0 {
			return err
		}
		if _, err := ExecIn(ctx, x, x.q.DeleteReady, picked); err != nil {
			return err
		}
		query, args := x.d.ListRows(x.q.InsertClaims, picked, queue, p.ProcessID, Micros(p.Now))
		if _, err := x.db.ExecContext(ctx, query, args...); err != nil {
			return err
		}
		claims, err = ClaimsIn(ctx, x, x.q.SelectClaims, picked)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim jobs of queue %q: %w", p.Queue, err)
	}
	return claims, nil
}

// capClaim returns how many jobs of queue this claim may take: max, or
// less when the queue's policy caps its running jobs. Claimers of a
// capped queue take turns, on its policy row's lock (LockCap), held until
// the claim commits, or on a single writer's lock, so each counts the
// claims of those before it.
func (e *Executor) capClaim(ctx context.Context, queue any, max int) (int, error) {
	var limit, active int
	capped, err := found(e.db.QueryRowContext(ctx, e.q.LockCap, queue).Scan(&limit))
	if err != nil {
		return 0, err
	}
	if !capped {
		return max, nil
	}
	if err := e.db.QueryRowContext(ctx, e.q.CountClaimed, queue).Scan(&active); err != nil {
		return 0, err
	}
	return min(max, limit-active), nil
}

// CompleteClaims ends the claims one by one; a dialect with RETURNING may
// do it set-wise instead.
func (e *Executor) CompleteClaims(ctx context.Context, claims []*driver.Claim, keep bool, now time.Time) ([]driver.Fenced, error) {
	var matched []driver.Fenced
	err := e.Atomic(ctx, func(x *Executor) error {
		matched = matched[:0]
		for _, c := range claims {
			ok, err := x.DeleteClaim(ctx, c.ID, c.Fence)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if keep {
				err = x.FinishJob(ctx, c.ID, now, false)
			} else {
				_, err = ExecIn(ctx, x, x.q.DeleteJobs, []int64{c.ID})
			}
			if err != nil {
				return err
			}
			matched = append(matched, driver.Fenced{JobID: c.ID, Fence: c.Fence})
		}
		return nil
	})
	if err != nil {
		return nil, CompleteError(len(claims), err)
	}
	return matched, nil
}

// CompleteError is the error of a CompleteClaims of n claims.
func CompleteError(n int, err error) error {
	return fmt.Errorf("complete %d jobs: %w", n, err)
}

func (e *Executor) DeleteClaim(ctx context.Context, jobID, fence int64) (bool, error) {
	n, err := e.exec(ctx, e.q.DeleteClaim, fence, jobID)
	if err != nil {
		return false, fmt.Errorf("delete claim of job %d: %w", jobID, err)
	}
	return n == 1, nil
}

func (e *Executor) LostClaims(ctx context.Context, now time.Time, deadAfter time.Duration, max int) ([]*driver.Claim, error) {
	claims, err := e.d.LostClaims(ctx, e, now, deadAfter, max)
	if err != nil {
		return nil, fmt.Errorf("find claims of dead processes: %w", err)
	}
	return claims, nil
}

func (e *Executor) LostClaimsOfKey(ctx context.Context, key string, now time.Time, silence time.Duration) ([]*driver.Claim, error) {
	claims, err := e.d.LostClaimsOfKey(ctx, e, key, now, silence)
	if err != nil {
		return nil, fmt.Errorf("find lost claims of %q: %w", key, err)
	}
	return claims, nil
}

func (e *Executor) ClaimsOfProcess(ctx context.Context, processID int64) ([]driver.OwnClaim, error) {
	out, err := Collect(ctx, e.db, func(rows *sql.Rows) (c driver.OwnClaim, err error) {
		var at int64
		err = rows.Scan(&c.JobID, &c.Fence, &at)
		c.ClaimedAt = FromMicros(at)
		return c, err
	}, e.q.ClaimsOfProcess, processID)
	if err != nil {
		return nil, fmt.Errorf("list claims of process %d: %w", processID, err)
	}
	return out, nil
}

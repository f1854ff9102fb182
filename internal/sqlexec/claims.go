package sqlexec

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// ReadyClaim picks, deletes and claims ready rows: several statements,
// so the engine runs it in a transaction (lifecycle.Claim).
func (e *Executor) ReadyClaim(ctx context.Context, p driver.ClaimParams) ([]*driver.Claim, error) {
	queue := e.d.Text(p.Queue)
	pick, args := e.q.PickReady, []any{queue, p.Max}
	if p.Among != nil {
		if len(p.Among) == 0 {
			return nil, nil
		}
		// The fair-share claim's pick: of the jobs Among, those ready.
		pick = e.d.List(e.q.PickAmong, len(p.Among))
		args = append(append([]any{queue}, e.d.ListArgs(Anys(p.Among))...), p.Max)
	}
	var claims []*driver.Claim
	err := e.Atomic(ctx, func(x *Executor) error {
		claims = nil
		picked, err := Column[int64](ctx, x.db, pick, args...)
		if err != nil {
			return err
		}
		claims, err = x.claimPicked(ctx, picked, queue, p.ProcessID, p.Now)
		return err
	})
	return claims, err
}

// ReadyClaimHandOff claims, of the jobs p.IDs, those ready in p.Queue
// with no rate key, from a queue with no cap that is not paused (the
// dialect's PickHandOff), as ReadyClaim claims what it picks.
func (e *Executor) ReadyClaimHandOff(ctx context.Context, p driver.HandOffParams) ([]*driver.Claim, error) {
	if len(p.IDs) == 0 || p.Max <= 0 {
		return nil, nil
	}
	queue := e.d.Text(p.Queue)
	var claims []*driver.Claim
	err := e.Atomic(ctx, func(x *Executor) error {
		claims = nil
		args := append([]any{queue}, x.d.ListArgs(Anys(p.IDs))...)
		args = append(args, queue, queue, p.Max)
		picked, err := Column[int64](ctx, x.db, x.d.List(x.q.PickHandOff, len(p.IDs)), args...)
		if err != nil {
			return err
		}
		claims, err = x.claimPicked(ctx, picked, queue, p.ProcessID, p.Now)
		return err
	})
	return claims, err
}

// claimPicked moves the ready jobs picked (locked by the pick where the
// dialect locks rows) to claimed for processID at now, and returns the
// claims.
func (x *Executor) claimPicked(ctx context.Context, picked []int64, queue any, processID int64, now time.Time) ([]*driver.Claim, error) {
	if len(picked) == 0 {
		return nil, nil
	}
	if _, err := ExecIn(ctx, x, x.q.DeleteReady, picked); err != nil {
		return nil, err
	}
	query, args := x.d.ListRows(x.q.InsertClaims, picked, queue, processID, Micros(now))
	if _, err := x.db.ExecContext(ctx, query, args...); err != nil {
		return nil, err
	}
	return ClaimsIn(ctx, x, x.q.SelectClaims, picked)
}

func (e *Executor) ReadyExists(ctx context.Context, queue string) (bool, error) {
	var ready bool
	err := e.db.QueryRowContext(ctx, e.q.HasReady, e.d.Text(queue)).Scan(&ready)
	return ready, err
}

// QueueGateGet reads the pause and the cap in one statement: on MySQL a
// locking read of the policy row, on a single writer a plain one under
// the write lock.
func (e *Executor) QueueGateGet(ctx context.Context, queue string) (driver.Gate, error) {
	var g driver.Gate
	if err := e.db.QueryRowContext(ctx, e.q.Gate, e.d.Text(queue)).Scan(&g.MaxActive, &g.Paused, &g.Fair, &g.Weight); err != nil {
		return g, fmt.Errorf("read the pause and cap of queue %q: %w", queue, err)
	}
	return g, nil
}

func (e *Executor) RunningSlots(ctx context.Context, queue string) (int, error) {
	var n int
	if err := e.db.QueryRowContext(ctx, e.q.RunningSlots, e.d.Text(queue)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the slots of queue %q's running jobs: %w", queue, err)
	}
	return n, nil
}

// ClaimCompleteMany ends the claims set-wise, in three statements per
// chunk of the dialect's MaxList claims whatever their number: a locking
// read of the claims by fence (the primary key, in its order), which
// keeps those whose job still matches; one DELETE of those claims; one
// UPDATE (or, keep false, DELETE) of their jobs. A stale fence locks and
// changes nothing. SQLite ends its claims its own way (RETURNING).
func (e *Executor) ClaimCompleteMany(ctx context.Context, claims []*driver.Claim, keep bool, now time.Time) ([]driver.Ended, error) {
	var matched []driver.Ended
	err := e.Atomic(ctx, func(x *Executor) error {
		matched = matched[:0]
		size := len(claims)
		if m := x.d.MaxList(); m > 0 {
			size = min(size, m)
		}
		for chunk := range slices.Chunk(claims, max(size, 1)) {
			ended, err := x.completeChunk(ctx, chunk, keep, now)
			if err != nil {
				return err
			}
			matched = append(matched, ended...)
		}
		return nil
	})
	if err != nil {
		return nil, CompleteError(len(claims), err)
	}
	return matched, nil
}

// completeChunk ends the claims of one chunk that still match and
// returns them in the chunk's order.
func (x *Executor) completeChunk(ctx context.Context, claims []*driver.Claim, keep bool, now time.Time) ([]driver.Ended, error) {
	fences := make([]int64, 0, len(claims))
	seen := make(map[int64]bool, len(claims))
	for _, c := range claims {
		if !seen[c.Fence] {
			seen[c.Fence] = true
			fences = append(fences, c.Fence)
		}
	}
	slices.Sort(fences)
	q, args := in(x, x.q.LockEnding, fences)
	rows, err := Collect(ctx, x.db, func(rows *sql.Rows) (f driver.Ended, err error) {
		err = rows.Scan(&f.Fence, &f.JobID, &f.HasDependents)
		return f, err
	}, q, args...)
	if err != nil {
		return nil, fmt.Errorf("lock the claims: %w", err)
	}
	locked := make(map[driver.Fenced]driver.Ended, len(rows))
	for _, f := range rows {
		locked[f.Fenced] = f
	}
	// A fence names one claim; a claim matches only with its own job, and
	// once however often the batch repeats it.
	var matched []driver.Ended
	var ended, jobs []int64
	for _, c := range claims {
		f := driver.Fenced{JobID: c.ID, Fence: c.Fence}
		if e, ok := locked[f]; ok {
			delete(locked, f)
			matched = append(matched, e)
			ended = append(ended, c.Fence)
			jobs = append(jobs, c.ID)
		}
	}
	if len(matched) == 0 {
		return nil, nil
	}
	slices.Sort(ended)
	slices.Sort(jobs)
	if _, err := ExecIn(ctx, x, x.q.DeleteClaims, ended); err != nil {
		return nil, fmt.Errorf("delete the claims: %w", err)
	}
	if !keep {
		if _, err := ExecIn(ctx, x, x.q.DeleteJobs, jobs); err != nil {
			return nil, fmt.Errorf("delete the jobs: %w", err)
		}
		return matched, nil
	}
	q, args = in(x, x.q.FinishJobs, jobs)
	if _, err := x.db.ExecContext(ctx, q, append([]any{Micros(now)}, args...)...); err != nil {
		return nil, fmt.Errorf("finish the jobs: %w", err)
	}
	return matched, nil
}

// CompleteError is the error of a ClaimCompleteMany of n claims.
func CompleteError(n int, err error) error {
	return fmt.Errorf("complete %d jobs: %w", n, err)
}

func (e *Executor) ClaimDelete(ctx context.Context, jobID, fence int64) (bool, error) {
	n, err := e.exec(ctx, e.q.DeleteClaim, fence, jobID)
	if err != nil {
		return false, fmt.Errorf("delete claim of job %d: %w", jobID, err)
	}
	return n == 1, nil
}

func (e *Executor) ClaimListReapable(ctx context.Context, now time.Time, deadAfter time.Duration, max int) ([]*driver.Claim, error) {
	claims, err := e.d.ClaimListReapable(ctx, e, now, deadAfter, max)
	if err != nil {
		return nil, fmt.Errorf("find claims of dead processes: %w", err)
	}
	return claims, nil
}

func (e *Executor) ClaimListReapableOfKey(ctx context.Context, key string, now time.Time, silence time.Duration) ([]*driver.Claim, error) {
	claims, err := e.d.ClaimListReapableOfKey(ctx, e, key, now, silence)
	if err != nil {
		return nil, fmt.Errorf("find lost claims of %q: %w", key, err)
	}
	return claims, nil
}

package driver

import (
	"context"
)

// ClaimWays are a driver's faster ways to claim; ClaimWithin applies the
// one claim rule with them. Each driver's Claim names its own, so the
// engine makes one call whatever the database (the driver suite pins
// that every way keeps the rule).
type ClaimWays struct {
	// OneStatement claims from a queue with no MaxActive that is not
	// paused in one statement, outside any transaction, and claims
	// nothing from any other (PostgreSQL's CTE): uncapped queues, the
	// common case, pay no BEGIN and COMMIT.
	OneStatement func(ctx context.Context, p ClaimParams) ([]*Claim, error)
	// InTx claims likewise inside the claim's transaction tx, checking
	// the gate in the locking read that picks the jobs (MySQL); the gate
	// is read only when it claims nothing.
	InTx func(ctx context.Context, tx Executor, p ClaimParams) ([]*Claim, error)
	// LookFirst looks for ready jobs before taking any lock: a driver
	// whose write transactions lock the whole database (SQLite) keeps
	// idle polls from holding up other writers.
	LookFirst bool
}

// ClaimWithin takes up to p.Max ready jobs of p.Queue for p.ProcessID,
// within the queue's MaxActive, and none while the queue is paused: the
// one claim rule, for every driver's Claim. A capped queue's policy row
// is locked for the claim's transaction, so its claimers take turns and
// each counts the claims committed before its turn; the count and the
// claim are in the same transaction, so no two claimers can both fill
// the last free run.
//
// The claims of a transaction that failed are not returned: it rolled
// back, or its COMMIT failed and may yet have landed (a connection lost
// in the reply); a claim that did land is a stray the process's claim
// check unclaims.
func ClaimWithin(ctx context.Context, d Driver, p ClaimParams, w ClaimWays) ([]*Claim, error) {
	ex := d.Exec()
	switch {
	case w.OneStatement != nil:
		claims, err := w.OneStatement(ctx, p)
		if err != nil || len(claims) > 0 {
			return claims, err
		}
		// Nothing: the queue is empty, paused or capped.
		gate, err := ex.QueueGateGet(ctx, p.Queue)
		if err != nil || gate.Paused || gate.MaxActive == 0 {
			return nil, err
		}
	case w.LookFirst:
		if any, err := ex.ReadyExists(ctx, p.Queue); err != nil || !any {
			return nil, err
		}
	}
	var claims []*Claim
	err := InTx(ctx, d, func(tx Executor) (err error) {
		claims = nil
		if w.InTx != nil {
			if claims, err = w.InTx(ctx, tx, p); err != nil || len(claims) > 0 {
				return err
			}
		}
		gate, err := tx.QueueGateGet(ctx, p.Queue)
		if err != nil || (w.InTx != nil && gate.MaxActive == 0) {
			// Uncapped and tried: empty, or paused.
			return err
		}
		n, err := claimable(ctx, tx, p, gate)
		if err != nil || n <= 0 {
			return err
		}
		claims, err = tx.ReadyClaim(ctx, ClaimParams{Queue: p.Queue, Max: n, ProcessID: p.ProcessID, Now: p.Now})
		return err
	})
	if err != nil {
		return nil, err
	}
	return claims, nil
}

// claimable is how many jobs a claim may take past the queue's gate,
// read in tx: none while the queue is paused, else p.Max, or less when
// the queue's MaxActive leaves less room beside its running jobs.
func claimable(ctx context.Context, tx ClaimStore, p ClaimParams, gate Gate) (int, error) {
	if gate.Paused {
		return 0, nil
	}
	limit := gate.MaxActive
	if limit == 0 {
		return p.Max, nil
	}
	active, err := tx.RunningCount(ctx, p.Queue)
	if err != nil {
		return 0, err
	}
	return min(p.Max, limit-active), nil
}

package lifecycle

import (
	"context"
	"fmt"

	"github.com/bqueue/bq/internal/driver"
)

// Claim takes up to p.Max ready jobs of p.Queue for p.ProcessID, within
// the queue's MaxActive, and none while the queue is paused. This is the
// one place the cap and the pause are enforced: a
// capped queue's policy row is locked for the claim's transaction, so its
// claimers take turns and each counts the claims committed before its
// turn; the count and the claim are in the same transaction, so no two
// claimers can both fill the last free run.
//
// Drivers that can claim from an uncapped queue in one statement
// (driver.OneStatementClaimer) do so without a transaction; those whose
// claim can check the gate itself (driver.TxUncappedClaimer) try that
// first in the transaction, and read the gate only when it claims
// nothing; a single writer (driver.SingleWriter) looks for ready jobs
// first, so an idle poll takes no database-wide lock.
func Claim(ctx context.Context, d driver.Driver, p driver.ClaimParams) ([]*driver.Claim, error) {
	ex := d.Exec()
	one, oneStatement := ex.(driver.OneStatementClaimer)
	if oneStatement {
		claims, err := one.ClaimUncapped(ctx, p)
		if err != nil {
			return nil, err
		}
		if len(claims) > 0 {
			return claims, nil
		}
		// Nothing: the queue is empty, paused or capped.
		gate, err := ex.QueueGate(ctx, p.Queue)
		if err != nil || gate.Paused || gate.MaxActive == 0 {
			return nil, wrapClaim(p, err)
		}
	} else if _, single := d.(driver.SingleWriter); single {
		if any, err := ex.HasReady(ctx, p.Queue); err != nil || !any {
			return nil, wrapClaim(p, err)
		}
	}
	var claims []*driver.Claim
	err := driver.InTx(ctx, d, func(tx driver.Executor) (err error) {
		claims = nil
		uncapped, tried := tx.(driver.TxUncappedClaimer)
		if tried {
			if claims, err = uncapped.ClaimUncappedTx(ctx, p); err != nil || len(claims) > 0 {
				return err
			}
		}
		gate, err := tx.QueueGate(ctx, p.Queue)
		if err != nil || (tried && gate.MaxActive == 0) {
			// Uncapped and tried: empty, or paused.
			return err
		}
		n, err := claimable(ctx, tx, p, gate)
		if err != nil || n <= 0 {
			return err
		}
		claims, err = tx.ClaimReady(ctx, driver.ClaimParams{Queue: p.Queue, Max: n, ProcessID: p.ProcessID, Now: p.Now})
		return err
	})
	if err != nil {
		// The transaction's claims are not ours to run: it rolled back, or
		// its COMMIT failed and may yet have landed (a connection lost in
		// the reply). Run them and a job whose claim rolled back runs
		// twice; a claim that did land is an orphan, which the process's
		// claim check returns to ready.
		return nil, wrapClaim(p, err)
	}
	return claims, nil
}

// claimable is how many jobs a claim may take past the queue's gate,
// read in tx: none while the queue is paused, else p.Max, or less when
// the queue's MaxActive leaves less room beside its claimed jobs.
func claimable(ctx context.Context, tx driver.ClaimStore, p driver.ClaimParams, gate driver.Gate) (int, error) {
	if gate.Paused {
		return 0, nil
	}
	limit := gate.MaxActive
	if limit == 0 {
		return p.Max, nil
	}
	active, err := tx.CountClaimed(ctx, p.Queue)
	if err != nil {
		return 0, err
	}
	return min(p.Max, limit-active), nil
}

func wrapClaim(p driver.ClaimParams, err error) error {
	if err != nil {
		return fmt.Errorf("claim jobs of queue %q: %w", p.Queue, err)
	}
	return nil
}

package driver

// The one claim rule every driver's Claim applies (ClaimWithin): the
// queue's gate, its cap and its fair share, with the driver's faster ways
// where they apply.

import (
	"context"
	"fmt"
	"sync"
	"time"
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
	// ByRule, when set, remembers the queues whose last gate said they
	// are claimed by the rule's transaction (capped or fair), so their
	// claims go straight to it rather than first trying OneStatement or
	// InTx, which leave such queues alone. The transaction reads the gate
	// anyway: a stale memory costs one claim its shortcut, never a rule.
	ByRule *RuleQueues
}

// RuleQueues is ClaimWays.ByRule: queue -> its last gate, when that
// said it is claimed by the rule's transaction.
type RuleQueues struct{ m sync.Map }

// fair reports whether queue's last gate said fair and uncapped.
func (r *RuleQueues) fair(queue string) bool {
	if r == nil {
		return false
	}
	g, ok := r.m.Load(queue)
	return ok && g.(Gate).Fair && g.(Gate).MaxActive == 0
}

func (r *RuleQueues) is(queue string) bool {
	if r == nil {
		return false
	}
	g, ok := r.m.Load(queue)
	return ok && (g.(Gate).MaxActive > 0 || g.(Gate).Fair)
}

func (r *RuleQueues) set(queue string, g Gate) {
	if r != nil {
		r.m.Store(queue, g)
	}
}

// ClaimWithin takes up to p.Max ready jobs of p.Queue for p.ProcessID,
// within the queue's MaxActive, and none while the queue is paused: the
// one claim rule, for every driver's Claim. A capped queue's policy row
// is locked for the claim's transaction, so its claimers take turns and
// each counts the claims committed before its turn; the count and the
// claim are in the same transaction, so no two claimers can both fill
// the last free run. A fair-share queue's claimers take turns the same
// way, and each takes the jobs of the keys furthest below their share
// (claimFair).
//
// The claims of a transaction that failed are not returned: it rolled
// back, or its COMMIT failed and may yet have landed (a connection lost
// in the reply); a claim that did land is a stray the process's claim
// check unclaims.
func ClaimWithin(ctx context.Context, d Driver, p ClaimParams, w ClaimWays) ([]*Claim, error) {
	ex := d.Exec()
	byRule := w.ByRule.is(p.Queue)
	switch {
	case byRule:
	case w.OneStatement != nil:
		claims, err := w.OneStatement(ctx, p)
		if err != nil || len(claims) > 0 {
			return claims, err
		}
		// Nothing: the queue is empty, paused, capped or fair.
		gate, err := ex.QueueGateGet(ctx, p.Queue)
		if err != nil || gate.Paused || (gate.MaxActive == 0 && !gate.Fair) {
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
		tried := w.InTx != nil && !byRule
		if tried {
			if claims, err = w.InTx(ctx, tx, p); err != nil || len(claims) > 0 {
				return err
			}
		}
		q, queues := tx.(ClaimQueuer)
		if queues && !tried && w.ByRule.fair(p.Queue) {
			// Fair and uncapped at its last claim: the gate's read
			// goes out with the read of the ready jobs, and the claim
			// with the COMMIT, should the gate still say so.
			var gate Gate
			if err := q.QueueGateGetLater(ctx, p.Queue, &gate); err != nil {
				return err
			}
			among, err := pickFair(ctx, tx, p, &gate.Weight)
			if err != nil {
				return err
			}
			w.ByRule.set(p.Queue, gate)
			if gate.Fair && gate.MaxActive == 0 {
				if gate.Paused || len(among) == 0 {
					return nil
				}
				p := ClaimParams{Queue: p.Queue, Max: p.Max, ProcessID: p.ProcessID, Now: p.Now, Among: among}
				return q.ReadyClaimLater(ctx, p, &claims)
			}
			// The gate changed: claimed by it as below, its read done.
			return claimByGate(ctx, tx, p, gate, &claims)
		}
		gate, err := tx.QueueGateGet(ctx, p.Queue)
		if err != nil {
			return err
		}
		w.ByRule.set(p.Queue, gate)
		if tried && gate.MaxActive == 0 && !gate.Fair {
			// Uncapped and tried: empty, or paused.
			return nil
		}
		return claimByGate(ctx, tx, p, gate, &claims)
	})
	if err != nil {
		return nil, err
	}
	return claims, nil
}

// claimByGate is ClaimWithin's claim in tx once the queue's gate is
// read: up to p.Max jobs within the gate's cap, fair or in line order,
// into *claims (set at tx's COMMIT when the claim goes out with it).
func claimByGate(ctx context.Context, tx Executor, p ClaimParams, gate Gate, claims *[]*Claim) error {
	n, room, err := claimable(ctx, tx, p, gate)
	if err != nil || n <= 0 {
		return err
	}
	p = ClaimParams{Queue: p.Queue, Max: n, ProcessID: p.ProcessID, Now: p.Now}
	if q, ok := tx.(ClaimQueuer); ok && gate.Fair && gate.MaxActive == 0 {
		// Nothing follows the claim: it goes out with the COMMIT, and
		// the queue's gate is held one round trip less.
		if p.Among, err = pickFair(ctx, tx, p, &gate.Weight); err != nil || len(p.Among) == 0 {
			return err
		}
		return q.ReadyClaimLater(ctx, p, claims)
	}
	if gate.Fair {
		*claims, err = claimFair(ctx, tx, p, gate.Weight)
	} else {
		*claims, err = tx.ReadyClaim(ctx, p)
	}
	if err != nil || gate.MaxActive == 0 {
		return err
	}
	*claims, err = fitSlots(ctx, tx, *claims, room, p.Now)
	return err
}

// claimable is how many jobs a claim may take past the queue's gate,
// read in tx: none while the queue is paused, else p.Max, or less when
// the queue's MaxActive leaves less room beside the slots its running
// jobs take; room is that room in slots (fitSlots), 0 when uncapped.
func claimable(ctx context.Context, tx ClaimStore, p ClaimParams, gate Gate) (n, room int, err error) {
	if gate.Paused {
		return 0, 0, nil
	}
	limit := gate.MaxActive
	if limit == 0 {
		return p.Max, 0, nil
	}
	active, err := tx.RunningSlots(ctx, p.Queue)
	if err != nil {
		return 0, 0, err
	}
	if limit-active < p.Max && p.Capped != nil {
		*p.Capped = true
	}
	return min(p.Max, limit-active), limit - active, nil
}

// fitSlots keeps, of claims (in claim order), those whose slots fit in
// room, the room a queue's MaxActive leaves: the first that does not
// fit and every claim after it go back to ready in tx, at their places
// (priority, then id), ready since now, as lifecycle.Unclaim puts a claim
// back (it cannot be called from here), so a job of several slots at
// the head of its queue is not passed by lighter jobs behind it. A claim
// of one-slot jobs within room is returned whole, with no write.
func fitSlots(ctx context.Context, tx Executor, claims []*Claim, room int, now time.Time) ([]*Claim, error) {
	used, keep := 0, len(claims)
	for i, c := range claims {
		if used += SlotsOf(c.Slots); used > room {
			keep = i
			break
		}
	}
	if keep == len(claims) {
		return claims, nil
	}
	back := make([]Execution, 0, len(claims)-keep)
	for _, c := range claims[keep:] {
		ok, err := tx.ClaimDelete(ctx, c.ID, c.Fence)
		if err != nil {
			return nil, fmt.Errorf("put job %d back to ready: %w", c.ID, err)
		}
		if !ok {
			return nil, fmt.Errorf("put job %d back to ready: its claim of this transaction is gone", c.ID)
		}
		back = append(back, Execution{JobID: c.ID, Queue: c.Queue, Priority: c.Priority, At: now})
	}
	if err := tx.ExecutionInsertMany(ctx, StateReady, back); err != nil {
		return nil, fmt.Errorf("put %d jobs back to ready: %w", len(back), err)
	}
	return claims[:keep], nil
}

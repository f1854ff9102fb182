package driver

import (
	"context"
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

// RuleQueues is ClaimWays.ByRule: queue -> claimed by the rule's
// transaction at its last gate.
type RuleQueues struct{ m sync.Map }

func (r *RuleQueues) is(queue string) bool {
	if r == nil {
		return false
	}
	v, _ := r.m.Load(queue)
	return v == true
}

func (r *RuleQueues) set(queue string, g Gate) {
	if r != nil {
		r.m.Store(queue, g.MaxActive > 0 || g.Fair)
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
		gate, err := tx.QueueGateGet(ctx, p.Queue)
		if err != nil {
			return err
		}
		w.ByRule.set(p.Queue, gate)
		if tried && gate.MaxActive == 0 && !gate.Fair {
			// Uncapped and tried: empty, or paused.
			return nil
		}
		n, err := claimable(ctx, tx, p, gate)
		if err != nil || n <= 0 {
			return err
		}
		p := ClaimParams{Queue: p.Queue, Max: n, ProcessID: p.ProcessID, Now: p.Now}
		if gate.Fair {
			claims, err = claimFair(ctx, tx, p, gate.Weight)
			return err
		}
		claims, err = tx.ReadyClaim(ctx, p)
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

// Claim is a job taken by a worker; Fence identifies this claim alone, so a
// completion from an earlier claim of the same job matches nothing.
type Claim struct {
	Job
	Fence     int64
	ClaimedAt time.Time
	// StartBy: a run of a rated job must begin by then, or not at all
	// (lifecycle.StartRated); zero when unbounded. RateSlot is the slot
	// of its key's ring its start was stamped on.
	StartBy  time.Time
	RateSlot int
}

// Fenced names one claim: a job and the fence of that claim of it.
type Fenced struct {
	JobID, Fence int64
}

// Ended is a claim a completion ended: HasDependents, its job has jobs
// waiting for it (read as the job row was written, so a dependent
// enqueued while it ran is seen).
type Ended struct {
	Fenced
	HasDependents bool
}

// Gate is what decides whether and how much a claim of a queue may take:
// a paused queue claims nothing; a MaxActive above 0 caps its claimed
// jobs; a fair-share queue is claimed key by key (ClaimFair), its keys
// weighing Weight (0: 1) unless they have a weight of their own.
type Gate struct {
	MaxActive int
	Paused    bool
	Fair      bool
	Weight    int
}

// ClaimParams asks for up to Max ready jobs of Queue; with Among, only
// for those of the jobs it names (a fair-share claim's pick).
type ClaimParams struct {
	Queue     string
	Max       int
	ProcessID int64
	Now       time.Time
	Among     []int64
}

// KeyReady is one key's part of a fair-share queue's ready jobs
// (ReadyByKey): Key "" stands for the queue's jobs with no key.
type KeyReady struct {
	Key string
	// Weight is the key's own weight (KeyWeightSet); 0 when it has none.
	Weight int
	// Running counts the key's claimed jobs in the queue.
	Running int
	// Ready counts the key's ready jobs read of the queue's (JobIDs holds the
	// first of them).
	Ready int
	// JobIDs are the key's first ready jobs in claim order: priority
	// descending, then id.
	JobIDs []int64
	// Head is the place of the key's first ready job among the rows read,
	// in claim order (0 first); -1 when none of its jobs was read.
	Head int
}

// KeyViewParams asks ReadyByKey for a fair-share queue's view: each key's
// first Max ready jobs, from the queue's first Rows ready jobs in claim
// order (all of them when Rows is 0).
type KeyViewParams struct {
	Queue     string
	Max, Rows int
}

// KeyView is a fair-share queue's view by key (ReadyByKey).
type KeyView struct {
	// Keys are the keys with jobs read or running, ordered by key.
	Keys []KeyReady
	// Whole: the read reached the end of the queue's ready jobs, so Keys
	// hold every key with ready work.
	Whole bool
	// MaxWeight is the largest weight any key has of its own (0: none
	// has), read with the ready jobs.
	MaxWeight int
}

// HandOffParams asks a hand-off's claim: up to Max of the jobs IDs, just
// promoted in the same transaction, that are ready in Queue, for
// ProcessID at Now (ReadyClaimHandOff).
type HandOffParams struct {
	Queue     string
	IDs       []int64
	Max       int
	ProcessID int64
	Now       time.Time
}

// OwnClaim is a claim as its process sees it, to check that it still
// holds it.
type OwnClaim struct {
	JobID, Fence int64
	ClaimedAt    time.Time
	// ClaimCancelRequested: a cancel marked the claim (ClaimMarkCancel); its run
	// is to be cancelled.
	CancelRequested bool
}

// ClaimStore takes ready jobs for a worker and ends claims by their fence.
type ClaimStore interface {
	// ReadyExists reports whether queue has ready jobs: a claimer looks
	// before it takes any lock, since most idle polls find nothing.
	ReadyExists(ctx context.Context, queue string) (bool, error)
	// QueueGateGet reads what the claim rule needs of queue: its MaxActive
	// (0 when it has none) and whether it is paused. Inside a transaction
	// it locks the queue's policy row until the transaction ends, so
	// claimers of a capped queue take turns and each counts the claims of
	// those before it; outside one it only reads.
	QueueGateGet(ctx context.Context, queue string) (Gate, error)
	// RunningCount counts the claimed jobs of queue.
	RunningCount(ctx context.Context, queue string) (int, error)
	// ReadyClaimHandOff is the claim of a hand-off: in the transaction
	// that promoted them, it moves up to p.Max of the jobs p.IDs that
	// are ready in p.Queue to claimed for p.ProcessID, highest priority
	// first, then oldest, as ReadyClaim would take them. It takes none
	// from a queue that is paused or has a MaxActive (those are claimed
	// by the rule's transaction, ClaimWithin), and no job with a rate key
	// (its start takes a slot of its key's ring first), so every rule of
	// a claim holds.
	ReadyClaimHandOff(ctx context.Context, p HandOffParams) ([]*Claim, error)
	// ReadyClaim moves up to p.Max ready jobs of p.Queue to claimed, in
	// priority then FIFO order, skipping rows other claimers hold; with
	// p.Among, only jobs it names. It knows no cap: the engine's claim
	// rule (lifecycle.Claim) decides p.Max. It may run several
	// statements: run it in a transaction.
	ReadyClaim(ctx context.Context, p ClaimParams) ([]*Claim, error)
	// ReadyByKey reads a fair-share claim's view of p.Queue from its first
	// p.Rows ready jobs in claim order (all when 0): each key with jobs
	// read or running, its weight (0 when it has none of its own; also
	// for a key with none read), its running jobs and its first p.Max
	// ready jobs read, ordered by key.
	ReadyByKey(ctx context.Context, p KeyViewParams) (KeyView, error)
	// ClaimDelete removes the claim matching both jobID and fence. It
	// reports false when the claim no longer exists (a stale fence).
	ClaimDelete(ctx context.Context, jobID, fence int64) (bool, error)
	// ClaimMarkCancel marks job id's claim as asked to cancel at now, keeping
	// an earlier mark, and returns the mark. ok is false when the job has
	// no claim (it is not running). It may run several statements: run
	// it in a transaction.
	ClaimMarkCancel(ctx context.Context, jobID int64, now time.Time) (requestedAt time.Time, ok bool, err error)
	// ClaimCancelRequested locks the claim matching jobID and fence until the
	// transaction ends and reports whether it carries a cancel mark; false
	// when the claim no longer exists. A run's end reads it before ending
	// the claim, so a cancel marked before that end is never lost, and
	// one marked after finds no claim.
	ClaimCancelRequested(ctx context.Context, jobID, fence int64) (bool, error)
	// ClaimCompleteMany ends many successful runs at once: each claim whose
	// fence still matches is deleted and its job finished (attempt+1,
	// finished_at) or, with keep false, deleted. It returns the claims
	// that matched.
	ClaimCompleteMany(ctx context.Context, claims []*Claim, keep bool, now time.Time) ([]Ended, error)
}

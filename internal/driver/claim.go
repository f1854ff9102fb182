package driver

import (
	"context"
	"time"
)

// Claim is a job taken by a worker; Fence identifies this claim alone, so a
// completion from an earlier claim of the same job matches nothing.
type Claim struct {
	Job
	Fence     int64
	ClaimedAt time.Time
	// StartBy: a run of a rated job must begin by then, or not at all
	// (lifecycle.StartRated); zero when unbounded. StartSlack is how long
	// after its claim's stamp that is (its start is counted at StartBy
	// plus StartSlack); RateSlot is the slot of its key's ring its start
	// was stamped on.
	StartBy    time.Time
	StartSlack time.Duration
	RateSlot   int
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
	// Capped, when not nil, is set to true when the queue's MaxActive
	// left room for fewer than Max jobs: a claim that comes back short
	// then says the cap binds, not that the queue has no ready job.
	Capped *bool
}

// KeyReady is one key's part of a fair-share queue's ready jobs
// (ReadyByKey): Key "" stands for the queue's jobs with no key.
type KeyReady struct {
	Key string
	// Weight is the key's own weight (KeyWeightSet); 0 when it has none.
	Weight int
	// Running sums the slots of the key's claimed jobs in the queue
	// (a job of k slots counts k).
	Running int
	// Ready counts the key's ready jobs read of the queue's (JobIDs holds the
	// first of them).
	Ready int
	// JobIDs are the key's first ready jobs in claim order: priority
	// descending, then id.
	JobIDs []int64
	// Slots are the slots each of JobIDs takes (JobOptions.Slots); nil
	// or short: 1 each.
	Slots []int
	// Head is the place of the key's first ready job among the rows read,
	// in claim order (0 first); -1 when none of its jobs was read.
	Head int
}

// KeyViewParams asks ReadyByKey for a fair-share queue's view: each key's
// first Max ready jobs, from the queue's first Rows ready jobs in claim
// order (all of them when Rows is 0).
//
// With PerKey, each key's first Max ready jobs, wherever they stand in
// the line (Rows is not read): Whole is true, and Ready counts the jobs
// read, at most Max a key. A driver whose ready rows do not carry their
// key reads the whole line then.
type KeyViewParams struct {
	Queue     string
	Max, Rows int
	PerKey    bool
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
	// PerKey: asked PerKey, the driver read each key's first jobs, not
	// the whole line.
	PerKey bool
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
	// RunningSlots sums the slots of queue's claimed jobs (Job.Slots: a
	// job of k slots counts k against its queue's MaxActive).
	RunningSlots(ctx context.Context, queue string) (int, error)
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

// ClaimQueuer is a ClaimStore that can send a claim with what follows it
// in the transaction, its COMMIT included: ReadyClaimLater and
// ReadyClaimHandOffLater queue the claim ReadyClaim or ReadyClaimHandOff
// would make and set *into to its claims once the statement has gone
// out, at the transaction's next statement or at its COMMIT at the
// latest; the claims hold only if that COMMIT succeeds, as any of the
// transaction's.
//
// QueueGateGetLater queues QueueGateGet's locking read likewise: a
// claim of a queue fair at its last claim sends it with the read of the
// ready jobs.
type ClaimQueuer interface {
	QueueGateGetLater(ctx context.Context, queue string, into *Gate) error
	ReadyClaimLater(ctx context.Context, p ClaimParams, into *[]*Claim) error
	ReadyClaimHandOffLater(ctx context.Context, p HandOffParams, into *[]*Claim) error
}

// CompleteReleaser is an Executor that can end a batch of runs and
// release their keys in one round trip: ClaimCompleteMany(claims, keep,
// now), then SemaphoreReleaseMany(keys, counts, now), in that order, in
// the caller's transaction, with the two results. The caller passes the
// counts of every claim as if all matched, and rolls the transaction
// back when fewer did (lifecycle.CompleteMany).
type CompleteReleaser interface {
	ClaimCompleteRelease(ctx context.Context, claims []*Claim, keep bool, keys []string, counts []int, now time.Time) ([]Ended, []Promotion, error)
}

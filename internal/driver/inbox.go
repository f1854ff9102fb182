package driver

import (
	"context"
	"time"
)

// The inbox holds jobs that clients in other languages enqueued
// (clients/python, clients/typescript): one row per job, written in the
// caller's own transaction. A Go process drains it, enqueueing each row
// through the Go enqueue and stamping its outcome in the same
// transaction (docs/clients.md).

// Outcomes of an inbox row, the words of bq.EnqueueResult: a job stored
// (ready, blocked, scheduled), not stored (discarded, duplicate), or the
// row refused (its args, options or key are bad).
const (
	InboxReady     = "ready"
	InboxBlocked   = "blocked"
	InboxScheduled = "scheduled"
	InboxDiscarded = "discarded"
	InboxDuplicate = "duplicate"
	InboxRefused   = "refused"
	// InboxApplied: a row of kind InboxPolicies was applied.
	InboxApplied = "applied"
)

// InboxPolicies is the kind of the row a client in another language
// writes beside the policies it synced, in the same transaction: args
// {"queues": [...]} name the queues whose MaxActivePerKey or rate it
// changed or removed, and a Go process applies their policies to the
// keys of their unfinished jobs, as SyncPolicies does in Go.
const InboxPolicies = "bq.policies"

// InboxWake is the "queue" a Notifier's Listen hands ready when a client
// wrote to the inbox (PostgreSQL's channel {prefix}inbox): no queue name
// holds a space.
const InboxWake = " inbox"

// InboxRow is a pending row of the inbox.
type InboxRow struct {
	ID      int64
	Kind    string
	Args    []byte
	Options []byte
}

// InboxOutcome is the decision on one row.
type InboxOutcome struct {
	ID      int64
	Outcome string
	// JobID is the stored job (ready, blocked, scheduled) or the job a
	// duplicate duplicates; 0 for none.
	JobID int64
	// Detail is the reason of a discard or duplicate, the error of a
	// refusal; "" for none.
	Detail string
}

// InboxLockParams selects the rows InboxLockPending takes.
type InboxLockParams struct {
	// Kinds: only rows of these kinds (those the process defines).
	Kinds []string
	// ID, when not 0, takes only that row.
	ID int64
	// Max rows, oldest first.
	Max int
}

// InboxStore is the inbox as the drain and the inspection see it.
type InboxStore interface {
	// InboxLockPending returns, oldest first and locked for the
	// transaction, up to p.Max pending rows of p.Kinds, skipping rows
	// other transactions hold (on a single writer the write transaction
	// is the lock). It needs a transaction.
	InboxLockPending(ctx context.Context, p InboxLockParams) ([]InboxRow, error)
	// InboxDecide stamps each row's outcome, with the database's clock as
	// its decided_at, if the row is still pending; it returns the rows
	// stamped.
	InboxDecide(ctx context.Context, outcomes []InboxOutcome) (int, error)
	// InboxHasPending reports whether a row of kinds is pending, without
	// locking: the drain's look before it begins a transaction.
	InboxHasPending(ctx context.Context, kinds []string) (bool, error)
	// InboxCountPending counts the pending rows, of every kind.
	InboxCountPending(ctx context.Context) (int, error)
	// InboxDeleteDecided removes up to max rows decided more than age ago
	// by the database's clock.
	InboxDeleteDecided(ctx context.Context, age time.Duration, max int) (int, error)
}

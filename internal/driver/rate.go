package driver

import (
	"context"
	"time"
)

// RateSpec is the rate limit a job carries in its row: at most Limit
// starts per Period of the jobs of Key, across every process.
type RateSpec struct {
	Key    string // full rate key, Group + "/" + Key(args); "" means none
	Limit  int
	Period time.Duration
}

// RateLinePrefix starts the blocked-line key of a rate key: the jobs
// waiting for a start of key K are blocked rows of key RateLinePrefix+K.
// No job's concurrency key starts with "/" (its group is never empty), so
// a rate line never mixes with a concurrency key's line.
const RateLinePrefix = "/rate/"

// RateLine is the blocked-line key of rate key key.
func RateLine(key string) string { return RateLinePrefix + key }

// Rate is a rate key's stored state. Its ring holds Limit slots, each
// the instant of one of the key's last Limit starts (see RateStore).
type Rate struct {
	Key     string
	Limit   int
	Period  time.Duration
	Waiting int       // jobs in the key's line
	NextAt  time.Time // when a slot frees while jobs wait; zero when none waits

	// Read by RateLock, never saved: the key's SetKeyRate override, zero
	// when none.
	Override RateSpec
}

// RateGroupStats sums one group's rate keys.
type RateGroupStats struct {
	Group string
	Keys  int // rows stored
	// Waiting counts jobs waiting for a start; Throttled the keys with
	// any.
	Waiting, Throttled int
}

// Reserved is the instant a slot reserved for a ready job carries: later
// than any start, so free slots sort before it.
var Reserved = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// RateStore keeps each rate key's row and its ring of start slots. Every
// change of a key's ring happens with its row locked (RateLock), so the
// slots are read and written by one transaction at a time.
type RateStore interface {
	// RateEnsure creates spec.Key's row and a ring of spec.Limit free
	// slots unless the row exists; it never fails on a concurrent create.
	RateEnsure(ctx context.Context, spec RateSpec, now time.Time) error
	// RateLock reads key's row and override and locks the row until the
	// transaction ends. ok is false when it does not exist.
	RateLock(ctx context.Context, key string) (r Rate, ok bool, err error)
	// RateTryLock is RateLock that skips a row another transaction holds
	// (ok false then, as for a missing row).
	RateTryLock(ctx context.Context, key string) (r Rate, ok bool, err error)
	// RateSave writes Limit, Period, Waiting and NextAt.
	RateSave(ctx context.Context, r Rate, now time.Time) error
	// ResizeRing changes key's ring from `from` slots to `to`: new slots
	// are free; shrinking drops the oldest starts first, so the newest
	// `to` starts stay counted.
	ResizeRing(ctx context.Context, key string, from, to int) error
	// FreeSlots returns up to max slots of key that no job reserved and
	// whose start is at or before notAfter, oldest first.
	FreeSlots(ctx context.Context, key string, notAfter time.Time, max int) ([]int, error)
	// SetSlots writes slots[i] of key: started_at at, and job_id jobIDs[i]
	// (0: none). A reservation is at Reserved with the job's id; a start
	// is its instant with no job.
	SetSlots(ctx context.Context, key string, slots []int, jobIDs []int64, at time.Time) error
	// UnstampSlot sets slot of key back from the start stamped to `to`,
	// if it still holds that start (no other start took it since): a
	// run that never began gives its start back. false when it did not.
	UnstampSlot(ctx context.Context, key string, slot int, stamped, to time.Time) (bool, error)
	// ReservedSlots returns the slots of key reserved for any of jobIDs,
	// by job.
	ReservedSlots(ctx context.Context, key string, jobIDs []int64) (map[int64]int, error)
	// CancelReservation frees the slot of key reserved for jobID, as if
	// never started (a ready job cancelled).
	CancelReservation(ctx context.Context, key string, jobID int64) error
	// RepairReservations frees the slots of key reserved for jobs that
	// are neither ready nor claimed (a job that failed for good between
	// its claim and its start) and returns how many.
	RepairReservations(ctx context.Context, key string) (int, error)
	// OldestSlot is the earliest instant of key's ring leaving out the
	// slots of except (the ones the caller is about to write); Reserved
	// when every slot left is reserved, or none is left.
	OldestSlot(ctx context.Context, key string, except []int) (time.Time, error)
	// DueRates lists up to max keys whose jobs wait and whose NextAt is
	// at or before now, earliest first.
	DueRates(ctx context.Context, now time.Time, max int) ([]string, error)
	// NextRateAt is the earliest NextAt of any key; ok false when no job
	// waits for a rate.
	NextRateAt(ctx context.Context) (at time.Time, ok bool, err error)
	// DeleteIdleRates removes up to max rows, and their rings, of keys
	// with no job waiting whose every slot is free at now and unreserved:
	// their ring holds nothing a new one would not. A row whose line
	// holds jobs is never deleted, whatever its waiting count says.
	DeleteIdleRates(ctx context.Context, now time.Time, max int) (int, error)
	// StrayLines lists up to max keys whose row counts no job waiting
	// while its line holds some: a count that drifted, which the
	// dispatcher recounts rather than leave the line stalled.
	StrayLines(ctx context.Context, max int) ([]string, error)
	// SetKeyRate stores (or replaces) key's override.
	SetKeyRate(ctx context.Context, spec RateSpec, now time.Time) error
	// DeleteKeyRate removes key's override; false when it had none.
	DeleteKeyRate(ctx context.Context, key string) (bool, error)
	// PolicyRate reads the default rate of queue's policy
	// (MaxStartsPerKey per StartsPeriod); a zero spec when the queue has
	// no policy or its policy no rate. It locks nothing.
	PolicyRate(ctx context.Context, queue string) (RateSpec, error)
	// LatestJobRate returns the rate spec of key's newest unfinished job,
	// its queue policy's (MaxStartsPerKey) when the job has none of its
	// own; ok is false when it has none.
	LatestJobRate(ctx context.Context, key string) (spec RateSpec, ok bool, err error)
	// ReadRate reads key's row and override without locking, and how
	// many of its ring's starts are after since.
	ReadRate(ctx context.Context, key string, since time.Time) (r Rate, recent int, ok bool, err error)
	// ListRates returns up to max rate rows in key order, after `after`.
	ListRates(ctx context.Context, after string, max int) ([]Rate, error)
	// RateGroups sums the rate rows of each group (the part of a key
	// before its first "/"), up to max groups in group order.
	RateGroups(ctx context.Context, max int) ([]RateGroupStats, error)
	// BlockedKey reads the line key of job id's blocked row; ok false
	// when the job is not blocked.
	BlockedKey(ctx context.Context, jobID int64) (key string, ok bool, err error)
}

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
	// Read by RateLock, never saved: the key's adaptive limit (the
	// KeyAdapt row of RateLine(Key)), which caps the resolved limit; 0
	// when none.
	Adapt int
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
	// RateResizeRing changes key's ring from `from` slots to `to`: new slots
	// are free; shrinking drops the oldest starts first, so the newest
	// `to` starts stay counted.
	RateResizeRing(ctx context.Context, key string, from, to int) error
	// RateSlotListFree returns up to max slots of key that no job reserved and
	// whose start is at or before notAfter, oldest first.
	RateSlotListFree(ctx context.Context, key string, notAfter time.Time, max int) ([]int, error)
	// RateSlotSetMany writes slots[i] of key: started_at at, and job_id jobIDs[i]
	// (0: none). A reservation is at Reserved with the job's id; a start
	// is its instant with no job.
	RateSlotSetMany(ctx context.Context, p RateSlotsParams) error
	// RateSlotUnstamp sets slot of key back from the start stamped to `to`,
	// if it still holds that start (no other start took it since): a
	// run that never began gives its start back. false when it did not.
	RateSlotUnstamp(ctx context.Context, p RateUnstampParams) (bool, error)
	// RateSlotListReserved returns the slots of key reserved for any of jobIDs,
	// by job.
	RateSlotListReserved(ctx context.Context, key string, jobIDs []int64) (map[int64]int, error)
	// RateSlotCancelReservation frees the slot of key reserved for jobID, as if
	// never started (a ready job cancelled).
	RateSlotCancelReservation(ctx context.Context, key string, jobID int64) error
	// RateSlotRepairReservations frees the slots of key reserved for jobs that
	// are neither ready nor claimed (a job that failed for good between
	// its claim and its start) and returns how many.
	RateSlotRepairReservations(ctx context.Context, key string) (int, error)
	// RateSlotGetOldest is the earliest instant of key's ring leaving out the
	// slots of except (the ones the caller is about to write); Reserved
	// when every slot left is reserved, or none is left.
	RateSlotGetOldest(ctx context.Context, key string, except []int) (time.Time, error)
	// RateListDue lists up to max keys whose jobs wait and whose NextAt is
	// at or before now, earliest first, and, in the same read, the
	// earliest NextAt after now of a key whose jobs wait (RateDue.Later).
	RateListDue(ctx context.Context, now time.Time, max int) (RateDue, error)
	// RateNextAt is the earliest NextAt of any key; ok false when no job
	// waits for a rate.
	RateNextAt(ctx context.Context) (at time.Time, ok bool, err error)
	// RateDeleteIdle removes up to max rows, and their rings, of keys
	// with no job waiting whose every slot is free at now and unreserved:
	// their ring holds nothing a new one would not. A row whose line
	// holds jobs is never deleted, whatever its waiting count says.
	RateDeleteIdle(ctx context.Context, now time.Time, max int) (int, error)
	// RateListStrayLines lists up to max keys whose row counts no job waiting
	// while its line holds some: a count that drifted, which the
	// dispatcher recounts rather than leave the line stalled.
	RateListStrayLines(ctx context.Context, max int) ([]string, error)
	// KeyRateSet stores (or replaces) key's override.
	KeyRateSet(ctx context.Context, spec RateSpec, now time.Time) error
	// KeyRateDelete removes key's override; false when it had none.
	KeyRateDelete(ctx context.Context, key string) (bool, error)
	// PolicyGetRate reads the default rate of queue's policy
	// (MaxStartsPerKey per StartsPeriod); a zero spec when the queue has
	// no policy or its policy no rate. It locks nothing.
	PolicyGetRate(ctx context.Context, queue string) (RateSpec, error)
	// JobRateGetLatest returns the rate spec of key's newest unfinished job,
	// its queue policy's (MaxStartsPerKey) when the job has none of its
	// own; ok is false when it has none.
	JobRateGetLatest(ctx context.Context, key string) (spec RateSpec, ok bool, err error)
	// RateGet reads key's row and override without locking, and how
	// many of its ring's starts are after since.
	RateGet(ctx context.Context, key string, since time.Time) (r Rate, recent int, ok bool, err error)
	// RateList returns up to max rate rows in key order, after `after`.
	RateList(ctx context.Context, after string, max int) ([]Rate, error)
	// RateListGroups sums the rate rows of each group (the part of a key
	// before its first "/"), up to max groups in group order.
	RateListGroups(ctx context.Context, max int) ([]RateGroupStats, error)
	// LineGetKey reads the line key of job id's blocked row; ok false
	// when the job is not blocked.
	LineGetKey(ctx context.Context, jobID int64) (key string, ok bool, err error)
}

// RateSlotsParams sets Slots of Key's ring to At, reserved for JobIDs (RateSlotSetMany).
type RateSlotsParams struct {
	Key    string
	Slots  []int
	JobIDs []int64
	At     time.Time
}

// RateUnstampParams puts Slot of Key's ring back to To if it still holds Stamped (RateSlotUnstamp).
type RateUnstampParams struct {
	Key     string
	Slot    int
	Stamped time.Time
	To      time.Time
}

// RateDue is what RateListDue reads: the keys due, and when the next key
// after them is due, so that a rate loop that finds none due knows how
// long to sleep without a second read.
type RateDue struct {
	Keys []string
	// Later is the earliest NextAt after now of a key whose jobs wait;
	// LaterOK false when there is none.
	Later   time.Time
	LaterOK bool
}

// Add takes one row of the read into d: a due key, or (key nil) the
// later NextAt, nil when there is none.
func (d *RateDue) Add(key *string, at *time.Time) {
	switch {
	case key != nil:
		d.Keys = append(d.Keys, *key)
	case at != nil:
		d.Later, d.LaterOK = *at, true
	}
}

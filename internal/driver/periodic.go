package driver

import (
	"context"
	"time"
)

// Periodic is one stored schedule of periodic jobs (bq.Config.Periodic).
type Periodic struct {
	Name     string
	Kind     string // the job kind each tick enqueues
	Schedule string // the schedule as written, e.g. "@every 1m0s"
	// NextRunAt is the next tick: its identity. Whoever moves it on, by
	// PeriodicAdvance, enqueues that tick.
	NextRunAt time.Time
	LastRunAt *time.Time // the last tick enqueued; nil before the first
	LastJobID int64      // its job; 0 when none was stored (discarded)
	LastState JobState   // where its job went
	CreatedAt time.Time
	// SeenAt is when a live process with this schedule in its code last
	// said so; a row not seen for long is pruned.
	SeenAt time.Time
}

// AdvanceParams moves a periodic schedule past the tick Was.
type AdvanceParams struct {
	Name, Schedule string
	Was, Next      time.Time
}

// PeriodicStore keeps the periodic schedules; each tick is enqueued by
// the one transaction whose PeriodicAdvance moved its row on.
type PeriodicStore interface {
	// PeriodicLockMany returns the stored rows of names, locked until the
	// transaction ends (a single writer's transaction is the lock).
	PeriodicLockMany(ctx context.Context, names []string) ([]Periodic, error)
	// PeriodicInsert stores p unless its name exists; false then.
	PeriodicInsert(ctx context.Context, p Periodic) (bool, error)
	// PeriodicUpdate sets p's kind, schedule, next run and seen time.
	PeriodicUpdate(ctx context.Context, p Periodic) error
	// PeriodicPrune deletes the rows not seen since before.
	PeriodicPrune(ctx context.Context, before time.Time) (int, error)
	// PeriodicListDue returns the rows whose next run is at or before now.
	PeriodicListDue(ctx context.Context, now time.Time) ([]Periodic, error)
	// PeriodicAdvance moves p.Name's next run from p.Was to p.Next if it
	// is still p.Was under p.Schedule: true for the one caller that wins
	// the tick, false for every other.
	PeriodicAdvance(ctx context.Context, p AdvanceParams) (bool, error)
	// PeriodicSetLastRun notes the tick enqueued at: its job and state.
	PeriodicSetLastRun(ctx context.Context, p PeriodicRunParams) error
	// PeriodicList returns every row, ordered by name.
	PeriodicList(ctx context.Context) ([]Periodic, error)
}

// PeriodicPass runs one pass of a *bq.Client's periodic scheduler, for
// bq's own tests (set by package bq).
var PeriodicPass func(ctx context.Context, client any) error

// PeriodicRunParams records the job a periodic schedule enqueued for its
// tick At (PeriodicSetLastRun).
type PeriodicRunParams struct {
	Name  string
	At    time.Time
	JobID int64
	State JobState
}

package driver

import (
	"context"
	"errors"
	"time"
)

// Process is a registered worker or dispatcher.
type Process struct {
	ID                int64
	Kind              string // "worker", "dispatcher", "worker+dispatcher"
	Name              string
	Hostname          string
	PID               int
	Queues            string
	HeartbeatInterval time.Duration
	// DeadAfter is the silence after which the process expects to be
	// declared dead: it stops its own runs before then. A dispatcher
	// waits for the longer of this and its own ProcessDeadAfter.
	DeadAfter       time.Duration
	StartedAt       time.Time
	LastHeartbeatAt time.Time
	// BeatingSince is when the process's current run of heartbeats, none
	// missed, began: while it beats, the database is writable, so another
	// process's silence over that time is its own.
	BeatingSince time.Time
}

// Beat is one heartbeat of a process.
type Beat struct {
	ProcessID int64
	// At is when the beat was sent; it is what the row records, so a beat
	// that lands late never claims more life than the process had.
	At           time.Time
	BeatingSince time.Time
}

// ProcessStore keeps the process rows heartbeats prove alive.
type ProcessStore interface {
	// ProcessRegister inserts p and returns its ID.
	ProcessRegister(ctx context.Context, p Process) (int64, error)
	// ProcessHeartbeat records the beat in the process row, in a statement of
	// its own that waits on no lock but the row's. It reports false with
	// a nil err when the row is gone (the process was declared dead).
	ProcessHeartbeat(ctx context.Context, b Beat) (landed bool, err error)
	// SemaphoreRenewHeld renews the semaphores that processID's claims hold and
	// whose expiry is less than renewBelow (a fraction) of their Duration
	// after at: each then expires Duration after at. It skips rows others
	// hold (a skipped key is renewed next beat) and locks keys in order,
	// so two renewals never deadlock. It may run several statements: run
	// it in a transaction.
	SemaphoreRenewHeld(ctx context.Context, processID int64, at time.Time, renewBelow float64) error
	// ClaimListOfProcess lists the process's claims.
	ClaimListOfProcess(ctx context.Context, processID int64) ([]OwnClaim, error)
	// ProcessDeregister removes the process row.
	ProcessDeregister(ctx context.Context, processID int64) error
	// ProcessDeleteDead removes dead processes (see ClaimListReapable) that
	// hold no claims.
	ProcessDeleteDead(ctx context.Context, now time.Time, deadAfter time.Duration) (int, error)
	// ProcessList returns the registered processes.
	ProcessList(ctx context.Context) ([]Process, error)
}

// Beaconer is a driver whose processes also show they are alive through a
// channel that no database lock can hold up (SQLite, where a process
// frozen inside a write transaction blocks every other process's
// heartbeat: a file per process beside the database, which every process
// sharing the file can see, since SQLite's WAL needs them on one host).
// Its ClaimListReapable, ClaimListReapableOfKey and ProcessDeleteDead count a beacon
// as a heartbeat.
type Beaconer interface {
	// Beacon records that the process is alive at `at`; ErrNoBeacon when
	// this database keeps none (an in-memory one: one process).
	Beacon(processID int64, at time.Time) error
}

// ErrNoBeacon: see Beaconer.
var ErrNoBeacon = errors.New("this database keeps no process beacons")

// Notifier is a driver that can wake other processes when jobs become
// ready (PostgreSQL's LISTEN/NOTIFY). Drivers without it rely on polling.
type Notifier interface {
	// Notify tells listeners that queues have ready jobs. The sender has
	// woken its own workers already: a listener whose self is origin may
	// skip it ("" skips nowhere).
	Notify(ctx context.Context, origin string, queues []string) error
	// NotifyTx notifies inside the caller's transaction, delivered only
	// if it commits.
	NotifyTx(ctx context.Context, tx any, queues []string) error
	// Listen calls ready with each notified queue until ctx ends,
	// reconnecting (with backoff, telling failed) when its connection
	// breaks; callers poll meanwhile. Each time it starts or restarts
	// listening it calls ready with "" (every queue): what was notified
	// before then may be lost, so every worker looks once. It may skip what
	// Notify sent with origin self (never what NotifyTx sent).
	Listen(ctx context.Context, self string, ready func(queue string), failed func(error)) error
}

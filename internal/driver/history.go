package driver

import (
	"context"
	"strings"
	"time"
)

// HistoryStore is a driver's per-minute history of the queue, which the
// dashboard charts and `bq status --watch` draw: completed and failed
// runs, the depth of each state and the most blocked keys. Every driver
// bq ships implements it (drivers/*/history.go).
//
// It is written cheaply and bounded: each worker process adds what it
// counted once a minute (one statement), the first dispatcher of a
// minute snapshots the depth (the others write nothing), and dispatchers
// prune minutes past a day. Every dashboard process reads the same rows.
type HistoryStore interface {
	// HistoryAddThroughput adds each count to its minute and queue, creating
	// the row when missing; (Minute, Queue) pairs are distinct.
	HistoryAddThroughput(ctx context.Context, counts []Throughput) error
	// HistoryInsertSnapshot records the depth of each queue and the most
	// blocked keys for s.Minute, unless that minute already has a
	// snapshot: the first writer wins, atomically. It reports whether
	// this call wrote it.
	HistoryInsertSnapshot(ctx context.Context, s HistorySnapshot) (bool, error)
	// HistoryPrune deletes up to max rows of each history table older
	// than before, oldest first, and returns how many it deleted.
	HistoryPrune(ctx context.Context, before time.Time, max int) (int, error)
	// HistoryList returns the minutes from `from` on, summed over every
	// queue or for one queue ("" for all), oldest first, and the blocked
	// keys recorded for them.
	HistoryList(ctx context.Context, from time.Time, queue string) (History, error)
}

// HistoryKeep is how long the history is kept: dispatchers prune older
// minutes.
const HistoryKeep = 24 * time.Hour

// MaxHistoryKeys is how many of the most blocked keys a snapshot keeps.
const MaxHistoryKeys = 10

// HistoryMinutes bounds a read: a day of minutes, and one more.
const HistoryMinutes = 24*60 + 1

// Throughput is what one process counted in one minute of one queue.
type Throughput struct {
	Minute    time.Time // truncated to the minute
	Queue     string
	Completed int
	// Failed counts runs that ended in an error, whether retried or
	// failed for good.
	Failed int
}

// HistorySnapshot is the depth of the queue early in Minute (at the
// first dispatcher pass in it).
type HistorySnapshot struct {
	Minute  time.Time
	TakenAt time.Time
	Queues  []QueueCounts
	// Keys: up to MaxHistoryKeys keys with blocked jobs, most blocked
	// first.
	Keys []Semaphore
}

// HistoryRow is one minute of history.
type HistoryRow struct {
	Minute                             time.Time
	Completed, Failed                  int
	Ready, Running, Blocked, Scheduled int
}

// HistoryKey is one key's blocked jobs in one minute's snapshot.
type HistoryKey struct {
	Minute  time.Time
	Key     string
	Blocked int
}

// History is what HistoryList returns. Rows has only the minutes that
// have a row; Snapped lists the minutes a dispatcher snapshotted (their
// depth is known, zero where a queue has no row).
type History struct {
	Rows    []HistoryRow
	Snapped []time.Time
	Keys    []HistoryKey
}

// KeySearcher finds keys in use (those with a semaphore) by a part of
// their name. Every driver bq ships implements it.
type KeySearcher interface {
	// KeySearch returns up to max semaphores whose key starts with
	// prefix and ends with suffix, compared byte for byte (no case
	// folding, no wildcards: '%' and '_' match themselves), in key byte
	// order.
	KeySearch(ctx context.Context, prefix, suffix string, max int) ([]Semaphore, error)
}

// LikePattern is the LIKE pattern (with ESCAPE '!') of a search for the
// keys that start with prefix and end with suffix (the two never
// overlap: a match is at least as long as both): every '%', '_' and '!'
// in them stands for itself.
func LikePattern(prefix, suffix string) string {
	esc := strings.NewReplacer("!", "!!", "%", "!%", "_", "!_")
	return esc.Replace(prefix) + "%" + esc.Replace(suffix)
}

// HistoryOf returns d's history store with each write run as the engine
// runs every write: in a transaction where d needs one (Atomic). ok is
// false when d keeps no history.
func HistoryOf(d Driver) (hs HistoryStore, ok bool) {
	if _, ok := d.Exec().(HistoryStore); !ok {
		return nil, false
	}
	return atomicHistory{d}, true
}

type atomicHistory struct{ d Driver }

func (h atomicHistory) HistoryAddThroughput(ctx context.Context, counts []Throughput) error {
	return Atomic(ctx, h.d, func(ex Executor) error { return ex.(HistoryStore).HistoryAddThroughput(ctx, counts) })
}

func (h atomicHistory) HistoryInsertSnapshot(ctx context.Context, s HistorySnapshot) (wrote bool, err error) {
	err = Atomic(ctx, h.d, func(ex Executor) (err error) {
		wrote, err = ex.(HistoryStore).HistoryInsertSnapshot(ctx, s)
		return err
	})
	return wrote, err
}

func (h atomicHistory) HistoryPrune(ctx context.Context, before time.Time, max int) (n int, err error) {
	err = Atomic(ctx, h.d, func(ex Executor) (err error) {
		n, err = ex.(HistoryStore).HistoryPrune(ctx, before, max)
		return err
	})
	return n, err
}

func (h atomicHistory) HistoryList(ctx context.Context, from time.Time, queue string) (History, error) {
	return h.d.Exec().(HistoryStore).HistoryList(ctx, from, queue)
}

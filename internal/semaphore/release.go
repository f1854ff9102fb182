package semaphore

// Giving slots back: a holder's release (passed straight to the next
// blocked job), the dispatcher's promotion of a key with both, the
// Duration failsafe's recount, and a blocked job leaving its line.

import (
	"context"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Release gives back one slot of key, as a holder finishes, fails or leaves
// for a later retry, and passes it straight to the next blocked job. The
// free count never rises above the limit, so a second release of the same
// holder cannot create a slot. Callers release only after deleting the
// holder's claim (fence matched) in the same transaction.
func Release(ctx context.Context, ex driver.SemaphoreStore, key string, now time.Time) (driver.Promotion, error) {
	return ReleaseN(ctx, ex, key, 1, now)
}

// ReleaseN gives back n slots of key at once (n holders finished in one
// transaction), capped at the limit like Release.
func ReleaseN(ctx context.Context, ex driver.SemaphoreStore, key string, n int, now time.Time) (driver.Promotion, error) {
	out, err := ReleaseMany(ctx, ex, []string{key}, []int{n}, now)
	if err != nil {
		return driver.Promotion{}, err
	}
	return out[0], nil
}

// ReleaseMany gives back counts[i] slots of each of keys (sorted,
// distinct) in one transaction, as ReleaseN does for one key, and returns
// what each promoted: one call to the driver, which releases its best
// way (driver.SemaphoreStore's SemaphoreReleaseMany). A key whose line
// holds multi-key jobs is handed back (LineLeft) and promoted here, after
// every key is released (all the blocking locks first).
func ReleaseMany(ctx context.Context, ex driver.SemaphoreStore, keys []string, counts []int, now time.Time) ([]driver.Promotion, error) {
	if len(keys) == 0 {
		return nil, nil // an unkeyed batch: no statement
	}
	out, err := ex.SemaphoreReleaseMany(ctx, keys, counts, now)
	if err != nil {
		return nil, err
	}
	return PromoteLeft(ctx, ex, keys, out, now)
}

// PromoteLeft follows the driver's SemaphoreReleaseMany of keys, which
// returned out: it promotes the lines the release left to this package
// (Promotion.LineLeft), head by head, and returns out with their
// promotions.
func PromoteLeft(ctx context.Context, ex driver.SemaphoreStore, keys []string, out []driver.Promotion, now time.Time) ([]driver.Promotion, error) {
	var left []int // keys whose line is ours to promote
	for i, p := range out {
		if p.LineLeft {
			left = append(left, i)
		}
	}
	if len(left) == 0 {
		return out, nil
	}
	set := NewSet(ex, now)
	// Locked by the release: read back in one statement, waiting for no
	// one.
	if err := set.readHeld(ctx, pick(keys, left)); err != nil {
		return nil, err
	}
	var lines []*Semaphore
	for _, i := range left {
		if s := set.Get(keys[i]); s != nil {
			lines = append(lines, s)
		}
	}
	if err := set.PromoteBlocked(ctx, lines); err != nil {
		return nil, err
	}
	for _, i := range left {
		out[i].LineLeft = false
		if s := set.Get(keys[i]); s != nil {
			out[i].Add(s.promoted)
		}
	}
	return out, set.Save(ctx)
}

// Promote hands a key's free slots to its blocked jobs; the dispatcher
// runs it for keys that have both, so nothing waits beside a free slot
// for longer than one dispatcher interval.
func Promote(ctx context.Context, ex driver.SemaphoreStore, key string, now time.Time) (driver.Promotion, error) {
	row, ok, err := ex.SemaphoreLock(ctx, key, "")
	if err != nil || !ok {
		return driver.Promotion{}, err
	}
	set := NewSet(ex, now)
	s := &Semaphore{ex: ex, row: row, now: now}
	set.add(s)
	if err := s.PromoteBlocked(ctx); err != nil {
		return driver.Promotion{}, err
	}
	if p := set.Promoted(); p.Jobs == 0 && len(set.keys) == 1 {
		return p, nil // nothing changed
	}
	return set.Promoted(), set.Save(ctx)
}

// Reclaim recounts an expired semaphore from the rows it stands for:
// free = limit - (ready + claimed jobs of the key), and blocked from the
// blocked table. Slots whose holders are gone come back and pass to
// blocked jobs; slots of live holders stay taken, so reclaiming never lets
// a job start beside one that still runs. Callers first return the claims
// of dead processes to ready (they keep their slots) or fail them.
func Reclaim(ctx context.Context, ex driver.SemaphoreStore, key string, now time.Time) (driver.Promotion, error) {
	row, ok, err := ex.SemaphoreLock(ctx, key, "")
	if err != nil || !ok {
		return driver.Promotion{}, err
	}
	n, err := ex.HolderCount(ctx, key)
	if err != nil {
		return driver.Promotion{}, err
	}
	s := &Semaphore{ex: ex, row: row, now: now}
	s.row.Value = s.row.Limit - n.Holders
	s.row.Blocked, s.row.Multi = n.Blocked, n.Multi
	s.row.ExpiresAt = now.Add(s.row.Duration)
	set := NewSet(ex, now)
	set.add(s)
	if err := s.PromoteBlocked(ctx); err != nil {
		return driver.Promotion{}, err
	}
	return set.Promoted(), set.Save(ctx)
}

// Leave takes a blocked job of key out of the line, as it is cancelled:
// with the semaphore locked (before the blocked row, the order promotion
// locks them in), take deletes the job's blocked row, and if it did, the
// blocked count drops by one (and the multi count, for a job promoted
// head by head: driver.HeadByHead). The job held no slot, so the free
// value is unchanged; but such a job may have kept the jobs behind it
// waiting beside free slots (a head of several slots), so its line is
// promoted then, and Leave returns what that promoted.
func Leave(ctx context.Context, ex driver.SemaphoreStore, key string, multi bool, take func() (bool, error), now time.Time) (bool, driver.Promotion, error) {
	row, ok, err := ex.SemaphoreLock(ctx, key, "")
	if err != nil {
		return false, driver.Promotion{}, err
	}
	if took, err := take(); !took || err != nil {
		return false, driver.Promotion{}, err
	}
	if !ok {
		return true, driver.Promotion{}, nil
	}
	row.Blocked = max(row.Blocked-1, 0)
	if !multi {
		return true, driver.Promotion{}, ex.SemaphoreSave(ctx, row)
	}
	row.Multi = max(row.Multi-1, 0)
	set := NewSet(ex, now)
	s := &Semaphore{ex: ex, row: row, now: now}
	set.add(s)
	if err := s.PromoteBlocked(ctx); err != nil {
		return false, driver.Promotion{}, err
	}
	return true, set.Promoted(), set.Save(ctx)
}

// A multi-key job (driver.MaxKeys) takes a slot of every one of its keys
// at once or none: it never holds one key's slot while it waits for
// another's (no hold-and-wait). It waits in the line of one key at a time.
// When that key's slot frees, the promotion of its line reaches the job
// at its place (priority, then id: it overtakes no one) and looks at its
// other keys:
//
//   - every other key has a free slot and an empty line: the job takes a
//     slot of each and becomes ready;
//   - some other key is full, or its line is not empty: the job moves to
//     that key's line, at its place there by priority and id, and the
//     slot goes on to the next in line;
//   - another transaction holds one of its other keys: the promotion stops
//     and leaves the line to the dispatcher, which tries again.
//
// A job of several slots (driver.HeadByHead) waits the same way: its
// line is promoted head by head, and a head takes its Slots of its key
// and of each other key, or, with fewer free on its own line's key, stops
// the walk: the jobs behind it wait for it (no barging), however many
// slots they would need.
//
// Deadlock: the keys a transaction waits for are locked in sorted order,
// all before its first try-lock; the other keys of a line's head are only
// ever try-locked (a try-lock never waits), so no chain of waits can
// close. The dispatcher try-locks every key, so a transaction frozen
// holding one never stalls it.

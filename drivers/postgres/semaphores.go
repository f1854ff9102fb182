package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq/internal/driver"
)

func (e *executor) SemaphoreEnsure(ctx context.Context, l driver.Limit, now time.Time) error {
	if err := checkKey(l.Key); err != nil {
		return fmt.Errorf("create semaphore: %w", err)
	}
	if err := e.write(ctx, e.q.semEnsure, l.Key, max(l.To, 1), l.Duration.Milliseconds(), now.Add(l.Duration)); err != nil {
		return fmt.Errorf("create semaphore %q: %w", l.Key, err)
	}
	return nil
}

func (e *executor) SemaphoreLock(ctx context.Context, key, queue string) (driver.Semaphore, bool, error) {
	s := driver.Semaphore{Key: key}
	var durMS int64
	ok, err := found(e.db.QueryRow(ctx, e.q.semLock, key, queue).Scan(&s.Value, &s.Limit, &s.Blocked, &s.Multi, &durMS, &s.ExpiresAt,
		&s.Override, &s.Policy.Queue, &s.Policy.MaxActivePerKey, &s.Policy.MaxBlocked))
	if err != nil {
		return s, false, fmt.Errorf("lock semaphore %q: %w", key, err)
	}
	s.Duration = time.Duration(durMS) * time.Millisecond
	return s, ok, nil
}

func (e *executor) SemaphoreTryLock(ctx context.Context, key string) (bool, error) {
	var one int
	ok, err := found(e.db.QueryRow(ctx, e.q.semTryLock, key).Scan(&one))
	if err != nil {
		return false, fmt.Errorf("lock semaphore %q: %w", key, err)
	}
	return ok, nil
}

func (e *executor) SemaphoreSave(ctx context.Context, s driver.Semaphore) error {
	err := e.write(ctx, e.q.semSave, s.Key, s.Value, s.Limit, s.Blocked, s.Multi, s.Duration.Milliseconds(), s.ExpiresAt)
	if err != nil {
		return fmt.Errorf("save semaphore %q: %w", s.Key, err)
	}
	return nil
}

func (e *executor) PromoteBlocked(ctx context.Context, key string, n int, now time.Time) (driver.Promotion, error) {
	var p driver.Promotion
	type moved struct {
		ID    int64
		Queue string
	}
	rows, err := collect(ctx, e.db, pgx.RowToStructByPos[moved], e.q.promoteBlocked, key, n, now)
	if err != nil {
		return p, fmt.Errorf("promote blocked jobs of %q: %w", key, err)
	}
	for _, r := range rows {
		p.Jobs++
		p.AddQueue(r.Queue)
		p.JobIDs = append(p.JobIDs, r.ID)
	}
	return p, nil
}

// ReleasesOneKey: one key's release is [lockSems, releasePromote] too,
// one round trip.
func (e *executor) ReleasesOneKey() {}

var _ driver.OneKeyReleaser = (*executor)(nil)

func (e *executor) ReleaseMany(ctx context.Context, keys []string, counts []int, now time.Time) ([]driver.Promotion, error) {
	n := make([]int32, len(counts))
	for i, c := range counts {
		n[i] = int32(c)
	}
	// Queued in bq's pipelined transaction: the lock goes out in one
	// round trip with the release that follows.
	if err := e.lockSems(ctx, keys); err != nil {
		return nil, err
	}
	type promoted struct {
		key string
		p   driver.Promotion
	}
	rows, err := collect(ctx, e.db, func(r pgx.CollectableRow) (k promoted, err error) {
		err = r.Scan(&k.key, &k.p.Jobs, &k.p.Queues, &k.p.LineLeft)
		return k, err
	}, e.q.releasePromote, keys, n, now)
	if err != nil {
		return nil, fmt.Errorf("release %d keys: %w", len(keys), err)
	}
	moved := make(map[string]driver.Promotion, len(rows))
	for _, r := range rows {
		if r.p.Jobs > 0 || r.p.LineLeft {
			moved[r.key] = r.p
		}
	}
	out := make([]driver.Promotion, len(keys))
	for i, k := range keys {
		out[i] = moved[k]
	}
	return out, nil
}

func (e *executor) CountHolders(ctx context.Context, key string) (driver.HolderCount, error) {
	var n driver.HolderCount
	if err := e.db.QueryRow(ctx, e.q.countHolders, key).Scan(&n.Holders, &n.Blocked, &n.Multi); err != nil {
		return driver.HolderCount{}, fmt.Errorf("count holders of %q: %w", key, err)
	}
	return n, nil
}

func (e *executor) LineHeads(ctx context.Context, key string, n int) ([]driver.LineHead, error) {
	out, err := collect(ctx, e.db, func(r pgx.CollectableRow) (driver.LineHead, error) {
		return scanLineHead(r)
	}, e.q.lineHeads, key, n)
	if err != nil {
		return nil, fmt.Errorf("read the first %d of the line of %q: %w", n, key, err)
	}
	return out, nil
}

// scanLineHead reads a line head's columns (lineHeads), after extra.
func scanLineHead(r pgx.Row, extra ...any) (driver.LineHead, error) {
	var h driver.LineHead
	var j driver.Job
	var durMS int64
	var conflict int16
	var more []byte
	dest := append(extra, &h.JobID, &h.Queue, &h.Priority, &j.Limit.Key, &j.Limit.To, &durMS, &conflict,
		&j.Limit.MaxBlocked, &more)
	if err := r.Scan(dest...); err != nil {
		return h, err
	}
	j.Limit.Duration = time.Duration(durMS) * time.Millisecond
	j.Limit.OnConflict = driver.OnConflict(conflict)
	var err error
	if j.More, err = driver.DecodeMore(more); err != nil {
		return h, fmt.Errorf("job %d: %w", h.JobID, err)
	}
	h.Keys = j.Keys()
	return h, nil
}

// counts32 is counts as the int[] a statement reads; a negative count is
// none.
func counts32(keys []string, counts []int) ([]int32, error) {
	if len(counts) != len(keys) {
		return nil, fmt.Errorf("%d counts given for %d keys, want one a key", len(counts), len(keys))
	}
	out := make([]int32, len(counts))
	for i, c := range counts {
		out[i] = int32(min(max(c, 0), math.MaxInt32))
	}
	return out, nil
}

// The executor promotes multi-key lines set-wise (package semaphore).
var _ driver.MultiBatcher = (*executor)(nil)

func (e *executor) LineHeadsMany(ctx context.Context, keys []string, ns []int) ([][]driver.LineHead, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	n, err := counts32(keys, ns)
	if err != nil {
		return nil, fmt.Errorf("read the lines of %d keys: %w", len(keys), err)
	}
	out := make([][]driver.LineHead, len(keys))
	rows, err := e.db.Query(ctx, e.q.lineHeadsMany, keys, n)
	if err != nil {
		return nil, fmt.Errorf("read the lines of %d keys: %w", len(keys), err)
	}
	defer rows.Close()
	for rows.Next() {
		var ord int64
		h, err := scanLineHead(rows, &ord)
		if err != nil {
			return nil, fmt.Errorf("read the lines of %d keys: %w", len(keys), err)
		}
		if ord < 1 || ord > int64(len(keys)) {
			return nil, fmt.Errorf("read the lines of %d keys: a head of key number %d", len(keys), ord)
		}
		out[ord-1] = append(out[ord-1], h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the lines of %d keys: %w", len(keys), err)
	}
	return out, nil
}

func (e *executor) SemaphoreTryLockMany(ctx context.Context, keys []string) ([]driver.Semaphore, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	got, err := collect(ctx, e.db, func(r pgx.CollectableRow) (s driver.Semaphore, err error) {
		var durMS int64
		err = r.Scan(&s.Key, &s.Value, &s.Limit, &s.Blocked, &s.Multi, &durMS, &s.ExpiresAt)
		s.Duration = time.Duration(durMS) * time.Millisecond
		return s, err
	}, e.q.semTryLockMany, keys)
	if err != nil {
		return nil, fmt.Errorf("try to lock %d semaphores: %w", len(keys), err)
	}
	// The database sorts by its collation; the caller's order is keys'.
	byKey := make(map[string]driver.Semaphore, len(got))
	for _, s := range got {
		byKey[s.Key] = s
	}
	out := make([]driver.Semaphore, 0, len(got))
	for _, k := range keys {
		if s, ok := byKey[k]; ok {
			out = append(out, s)
		}
	}
	return out, nil
}

func (e *executor) PromoteFirst(ctx context.Context, keys []string, counts []int, now time.Time) ([]driver.Promotion, error) {
	n, err := counts32(keys, counts)
	if err != nil {
		return nil, fmt.Errorf("promote blocked jobs of %d keys: %w", len(keys), err)
	}
	at := make(map[string]int, len(keys))
	for i, k := range keys {
		at[k] = i
	}
	out := make([]driver.Promotion, len(keys))
	rows, err := e.db.Query(ctx, e.q.promoteFirst, keys, n, now)
	if err != nil {
		return nil, fmt.Errorf("promote blocked jobs of %d keys: %w", len(keys), err)
	}
	var key, queue string
	var id int64
	// Rows come in promotion order, so each key's JobIDs are in its own.
	_, err = pgx.ForEachRow(rows, []any{&key, &id, &queue}, func() error {
		i, ok := at[key]
		if !ok {
			return fmt.Errorf("job %d moved from the line of %q, a key not asked for", id, key)
		}
		p := &out[i]
		p.Jobs++
		p.AddQueue(queue)
		p.JobIDs = append(p.JobIDs, id)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("promote blocked jobs of %d keys: %w", len(keys), err)
	}
	return out, nil
}

// MoveToLine runs at once, not queued: whether a row moved is its answer.
func (e *executor) MoveToLine(ctx context.Context, id int64, from, to string) error {
	if err := checkKey(to); err != nil {
		return fmt.Errorf("move job %d to another line: %w", id, err)
	}
	tag, err := e.db.Exec(ctx, e.q.moveToLine, id, from, to)
	if err != nil {
		return fmt.Errorf("move job %d from the line of %q to that of %q: %w", id, from, to, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("move job %d from the line of %q to that of %q: it is not blocked in the line of %q", id, from, to, from)
	}
	return nil
}

func (e *executor) keys(ctx context.Context, what, query string, args ...any) ([]string, error) {
	keys, err := collect(ctx, e.db, pgx.RowTo[string], query, args...)
	if err != nil {
		return nil, fmt.Errorf("list %s semaphores: %w", what, err)
	}
	return keys, nil
}

func (e *executor) ExpiredSemaphores(ctx context.Context, now time.Time, after string, max int) ([]string, error) {
	return e.keys(ctx, "expired", e.q.expiredSems, now, after, max)
}

func (e *executor) PromotableSemaphores(ctx context.Context, after string, max int) ([]string, error) {
	return e.keys(ctx, "promotable", e.q.promotableSems, after, max)
}

func (e *executor) DeleteIdleSemaphores(ctx context.Context, now time.Time, max int) (int, error) {
	tag, err := e.db.Exec(ctx, e.q.deleteIdleSems, now, max)
	if err != nil {
		return 0, fmt.Errorf("delete idle semaphores: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

func (e *executor) SemaphoreLockMany(ctx context.Context, limits []driver.Limit, queues []string, now time.Time) ([]driver.Semaphore, error) {
	if len(limits) != len(queues) {
		return nil, fmt.Errorf("lock %d semaphores: %d queues given, want one a key", len(limits), len(queues))
	}
	out := make([]driver.Semaphore, len(limits))
	at := make(map[string]int, len(limits))
	for i, l := range limits {
		if err := checkKey(l.Key); err != nil {
			return nil, fmt.Errorf("lock semaphores: %w", err)
		}
		at[l.Key] = i
	}
	// The dispatcher deletes idle semaphores; one may vanish between the
	// create and the lock, so the missing ones are tried again.
	want, wantQueues := limits, queues
	for range 3 {
		missing, err := e.lockMany(ctx, want, wantQueues, now, out, at)
		if err != nil {
			return nil, err
		}
		if len(missing) == 0 {
			return out, nil
		}
		want, wantQueues = want[:0:0], wantQueues[:0:0]
		for _, i := range missing {
			want, wantQueues = append(want, limits[i]), append(wantQueues, queues[i])
		}
	}
	return nil, fmt.Errorf("lock semaphore %q: it keeps disappearing", want[0].Key)
}

// lockMany creates and locks limits' semaphores, writing each row into
// out at its key's index in at, and returns the indexes it found no row
// for.
func (e *executor) lockMany(ctx context.Context, limits []driver.Limit, queues []string, now time.Time,
	out []driver.Semaphore, at map[string]int) ([]int, error) {
	keys := make([]string, len(limits))
	lims := make([]int32, len(limits))
	durs := make([]int64, len(limits))
	exps := make([]time.Time, len(limits))
	for i, l := range limits {
		keys[i], lims[i], durs[i], exps[i] = l.Key, int32(max(l.To, 1)), l.Duration.Milliseconds(), now.Add(l.Duration)
	}
	// Queued in bq's pipelined transaction: the create and the locks go
	// out in one round trip with the read that follows.
	if err := e.write(ctx, e.q.semEnsureMany, keys, lims, durs, exps); err != nil {
		return nil, fmt.Errorf("create %d semaphores: %w", len(keys), err)
	}
	if err := e.lockSems(ctx, keys); err != nil {
		return nil, err
	}
	rows, err := e.db.Query(ctx, e.q.semReadMany, keys, queues)
	if err != nil {
		return nil, fmt.Errorf("lock %d semaphores: %w", len(keys), err)
	}
	seen := make(map[string]bool, len(keys))
	var s driver.Semaphore
	var durMS int64
	_, err = pgx.ForEachRow(rows, []any{&s.Key, &s.Value, &s.Limit, &s.Blocked, &s.Multi, &durMS, &s.ExpiresAt,
		&s.Override, &s.Policy.Queue, &s.Policy.MaxActivePerKey, &s.Policy.MaxBlocked}, func() error {
		s.Duration = time.Duration(durMS) * time.Millisecond
		out[at[s.Key]] = s
		seen[s.Key] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lock %d semaphores: %w", len(keys), err)
	}
	var missing []int
	for _, k := range keys {
		if !seen[k] {
			missing = append(missing, at[k])
		}
	}
	return missing, nil
}

func (e *executor) SemaphoreSaveMany(ctx context.Context, sems []driver.Semaphore) error {
	keys := make([]string, len(sems))
	values, lims, blocked := make([]int32, len(sems)), make([]int32, len(sems)), make([]int32, len(sems))
	multi := make([]int32, len(sems))
	durs, exps := make([]int64, len(sems)), make([]time.Time, len(sems))
	for i, s := range sems {
		keys[i], values[i], lims[i], blocked[i] = s.Key, int32(s.Value), int32(s.Limit), int32(s.Blocked)
		multi[i], durs[i], exps[i] = int32(s.Multi), s.Duration.Milliseconds(), s.ExpiresAt
	}
	if err := e.write(ctx, e.q.semSaveMany, keys, values, lims, blocked, multi, durs, exps); err != nil {
		return fmt.Errorf("save %d semaphores: %w", len(sems), err)
	}
	return nil
}

// lockSems queues the locks of keys' semaphores, in key order, writing
// nothing. The smallest key is locked first, in a statement of its own:
// a batch over the keys another transaction holds then waits there, and
// locks the rest in a statement begun after that transaction ended.
// Locked in one statement, every row the other transaction updated was
// newer than the statement's snapshot, and each was checked again
// against the whole key list (EvalPlanQual, linear in the list): two
// producers admitting over the same 1,000 keys took 35-55 ms a batch to
// lock instead of 12, half the keyed EnqueueMany's throughput.
func (e *executor) lockSems(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	if len(keys) > 1 {
		if err := e.write(ctx, e.q.lockFirstSem, keys); err != nil {
			return fmt.Errorf("lock %d semaphores: %w", len(keys), err)
		}
	}
	if err := e.write(ctx, e.q.lockSems, keys); err != nil {
		return fmt.Errorf("lock %d semaphores: %w", len(keys), err)
	}
	return nil
}

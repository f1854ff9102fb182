package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq/internal/driver"
)

// admitQueries are the statements of an admission over many keys
// (driver.BatchLocker).
type admitQueries struct {
	semEnsureMany, semReadMany, semSaveMany string
}

func newAdmitQueries(p func(string) string) admitQueries {
	return admitQueries{
		// Admit over many keys at once: create the missing semaphores in
		// key order (a concurrent create of the same key waits for the
		// other transaction, then does nothing, never a unique violation),
		// then lock them all in key order, so two batches never deadlock.
		// The keys that exist are passed over by an index probe (NOT
		// EXISTS) rather than ON CONFLICT's insertion attempt: 0.5-1.3 ms
		// where it took 1.7-8 ms for a batch of 1,000 existing keys.
		// ON CONFLICT still settles a key created meanwhile, and a key
		// deleted meanwhile is missing from the lock and created again.
		semEnsureMany: p(`
INSERT INTO {p}semaphores (key, value, lim, blocked, duration_ms, expires_at)
SELECT t.key, t.lim, t.lim, 0, t.duration_ms, t.expires_at
FROM unnest($1::text[], $2::int[], $3::bigint[], $4::timestamptz[]) AS t(key, lim, duration_ms, expires_at)
WHERE NOT EXISTS (SELECT 1 FROM {p}semaphores s WHERE s.key = t.key)
ORDER BY t.key
ON CONFLICT (key) DO NOTHING`),
		// Read once executor.lockSems holds the rows, in a statement of
		// its own: its snapshot, taken after the locks, sees each row as
		// the transaction it waited for left it, with no row checked
		// again (it locked them itself, FOR UPDATE OF s, before).
		semReadMany: p(`
SELECT s.key, s.value, s.lim, s.blocked, s.multi, s.duration_ms, s.expires_at, s.release_interval_us,
	coalesce(k.lim, 0), coalesce((SELECT a.lim FROM {p}key_adapt a WHERE a.key = s.key), 0), coalesce(p.queue, ''), coalesce(p.max_active_per_key, 0), coalesce(p.max_blocked, 0),
	coalesce(p.max_wait_us, 0), coalesce(p.adaptive_min, 0)
FROM {p}semaphores s
JOIN unnest($1::text[], $2::text[]) AS r(key, queue) ON r.key = s.key
LEFT JOIN {p}key_limits k ON k.key = s.key
LEFT JOIN {p}policies p ON p.queue = r.queue
WHERE s.key = ANY($1::text[])`),
		// The ANY makes the rows an index scan: joined to the unnest alone,
		// the planner hashes the whole table.
		semSaveMany: p(`
UPDATE {p}semaphores s SET value = t.value, lim = t.lim, blocked = t.blocked, multi = t.multi,
	duration_ms = t.duration_ms, expires_at = t.expires_at
FROM unnest($1::text[], $2::int[], $3::int[], $4::int[], $5::int[], $6::bigint[], $7::timestamptz[])
	AS t(key, value, lim, blocked, multi, duration_ms, expires_at)
WHERE s.key = t.key AND s.key = ANY($1::text[])`),
	}
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
	var durMS, intervalUS, waitUS int64
	_, err = pgx.ForEachRow(rows, []any{&s.Key, &s.Value, &s.Limit, &s.Blocked, &s.Multi, &durMS, &s.ExpiresAt, &intervalUS,
		&s.Override, &s.Adapt, &s.Policy.Queue, &s.Policy.MaxActivePerKey, &s.Policy.MaxBlocked, &waitUS, &s.Policy.AdaptiveMin}, func() error {
		s.Duration, s.Interval = time.Duration(durMS)*time.Millisecond, time.Duration(intervalUS)*time.Microsecond
		s.Policy.MaxWait = time.Duration(waitUS) * time.Microsecond
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

package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlexec"
	"github.com/bqueue/bq/internal/sqltext"
)

type uniqueQueries struct {
	lock, find, set, of string
	prefix              string // in the advisory lock's id
}

func newUniqueQueries(prefix string) uniqueQueries {
	p := sqltext.Spelling(prefix, "unique_key = ?", "unique_key = $1", "IN "+sqlexec.ListMarker, "= ANY($2::text[])")
	return uniqueQueries{
		// The isolation is read first and the lock taken only at READ
		// COMMITTED: a snapshot older than the lock would miss the job its
		// previous holder committed, and two enqueues would both insert.
		lock: `SELECT s.iso, CASE WHEN s.iso IN ('read committed', 'read uncommitted')
	THEN pg_advisory_xact_lock($1)::text END
FROM (SELECT current_setting('transaction_isolation') AS iso) s`,
		find:   p(sqltext.FindUnique),
		set:    p(`UPDATE {p}jobs SET unique_key = $1 WHERE id = $2`),
		of:     p(`SELECT coalesce(max(unique_key), '') FROM {p}jobs WHERE id = $1`),
		prefix: prefix,
	}
}

// lockID is the advisory lock of unique key: 64 bits of its hash, the
// prefix included so two bq schemas in one database keep apart.
func (e *executor) lockID(key string) int64 {
	h := sha256.Sum256([]byte(e.q.unique.prefix + key))
	return int64(binary.BigEndian.Uint64(h[:8]))
}

func (e *executor) UniqueLock(ctx context.Context, key string) error {
	var iso string
	var locked *string
	if err := e.db.QueryRow(ctx, e.q.unique.lock, e.lockID(key)).Scan(&iso, &locked); err != nil {
		return fmt.Errorf("lock unique key: %w", err)
	}
	if locked == nil {
		return fmt.Errorf("%w: this transaction is %s, whose snapshot would miss a duplicate committed after it began: "+
			"begin it at READ COMMITTED (PostgreSQL's default) or enqueue the unique job outside it", driver.ErrUniqueIsolation, iso)
	}
	return nil
}

func (e *executor) UniqueGet(ctx context.Context, key string, states []driver.JobState) (int64, driver.JobState, bool, error) {
	if len(states) == 0 {
		return 0, "", false, nil
	}
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = string(s)
	}
	var id int64
	var state string
	ok, err := found(e.db.QueryRow(ctx, e.q.unique.find, key, names).Scan(&id, &state))
	if err != nil {
		return 0, "", false, fmt.Errorf("find job of unique key: %w", err)
	}
	return id, driver.JobState(state), ok, nil
}

func (e *executor) UniqueSet(ctx context.Context, id int64, key string) error {
	if _, err := e.db.Exec(ctx, e.q.unique.set, key, id); err != nil {
		return fmt.Errorf("set unique key of job %d: %w", id, err)
	}
	return nil
}

func (e *executor) UniqueGetKey(ctx context.Context, id int64) (string, error) {
	var key string
	if err := e.db.QueryRow(ctx, e.q.unique.of, id).Scan(&key); err != nil {
		return "", fmt.Errorf("read unique key of job %d: %w", id, err)
	}
	return key, nil
}

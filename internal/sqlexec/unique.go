package sqlexec

import (
	"context"
	"fmt"
	"strconv"

	"github.com/bqueue/bq/internal/driver"
)

// UniqueLock runs the dialect's lock statement: MySQL upserts the lock
// row of the key's stripe (X-locking it until the transaction ends);
// SQLite has none, since its write transactions are BEGIN IMMEDIATE and
// so already one at a time.
func (e *Executor) UniqueLock(ctx context.Context, key string) error {
	if e.q.LockUnique == "" {
		return nil
	}
	if _, err := e.db.ExecContext(ctx, e.q.LockUnique, stripe(key)); err != nil {
		return fmt.Errorf("lock unique key: %w", err)
	}
	return nil
}

// stripe is the lock row of unique key (a hex SHA-256): its first two
// bytes, so the lock table never holds more than 65,536 rows.
func stripe(key string) int {
	n, _ := strconv.ParseUint(key[:min(4, len(key))], 16, 16)
	return int(n)
}

func (e *Executor) UniqueGet(ctx context.Context, key string, states []driver.JobState) (int64, driver.JobState, bool, error) {
	if len(states) == 0 {
		return 0, "", false, nil
	}
	q, list := in(e, e.q.FindUnique, states)
	var id int64
	var state string
	ok, err := found(e.db.QueryRowContext(ctx, q, append([]any{e.d.Text(key)}, list...)...).Scan(&id, &state))
	if err != nil {
		return 0, "", false, fmt.Errorf("find job of unique key: %w", err)
	}
	return id, driver.JobState(state), ok, nil
}

func (e *Executor) UniqueSet(ctx context.Context, id int64, key string) error {
	if _, err := e.db.ExecContext(ctx, e.q.SetUniqueKey, e.d.Text(key), id); err != nil {
		return fmt.Errorf("set unique key of job %d: %w", id, err)
	}
	return nil
}

func (e *Executor) UniqueGetKey(ctx context.Context, id int64) (string, error) {
	var key string
	if err := e.db.QueryRowContext(ctx, e.q.UniqueKeyOf, id).Scan(&key); err != nil {
		return "", fmt.Errorf("read unique key of job %d: %w", id, err)
	}
	return key, nil
}

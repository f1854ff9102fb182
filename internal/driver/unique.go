package driver

import (
	"context"
	"errors"
)

// UniqueStore enforces unique jobs (bq.Unique): the enqueuers of one
// unique key take turns on the database's own lock, each looking the key
// up only once it holds the lock, so two transactions never both find no
// job and both insert one. lifecycle.Enqueue runs the three in order, in
// the enqueue's transaction.
type UniqueStore interface {
	// UniqueLock serialises, until the transaction ends, the transactions
	// enqueuing a job of unique key (a hex SHA-256): PostgreSQL's
	// advisory transaction lock, MySQL's lock row, SQLite's single
	// writer. It refuses, with ErrUniqueIsolation and no lock taken, a
	// transaction whose reads would not see jobs committed after it
	// began (PostgreSQL at REPEATABLE READ or SERIALIZABLE).
	UniqueLock(ctx context.Context, key string) error
	// UniqueGet returns the newest job of unique key whose state is one
	// of states, reading the latest committed rows; ok is false when there
	// is none. On MySQL inside a caller's REPEATABLE READ transaction, a
	// job committed after its snapshot is found with state "": its state
	// is not visible there, and it counts as a duplicate.
	UniqueGet(ctx context.Context, key string, states []JobState) (id int64, state JobState, ok bool, err error)
	// UniqueSet records key as the unique key of job id, just inserted.
	UniqueSet(ctx context.Context, id int64, key string) error
	// UniqueGetKey returns job id's unique key, "" when it has none (or
	// does not exist), for inspection.
	UniqueGetKey(ctx context.Context, id int64) (string, error)
}

// ErrUniqueIsolation: see UniqueStore.UniqueLock.
var ErrUniqueIsolation = errors.New("a unique job needs a transaction whose reads see the latest commits")

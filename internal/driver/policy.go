package driver

import (
	"context"
	"time"
)

// Policy is a queue's stored operations policy; zero fields mean none.
type Policy struct {
	Queue           string
	Namespace       string
	MaxActive       int
	MaxActivePerKey int
	MaxBlocked      int
	// MaxStartsPerKey starts per StartsPeriod is the rate of the queue's
	// rated jobs whose own Rate sets no Limit; 0 for none.
	MaxStartsPerKey int
	StartsPeriod    time.Duration
	// FairShare claims the queue key by key, the key furthest below its
	// weighted share of the running jobs first (ClaimWithin).
	FairShare bool
	// KeyWeight is the weight of the queue's keys that have none of
	// their own (KeyWeightSet); 0 for 1.
	KeyWeight int
	// MaxWait is the default Limit.MaxWait of the queue's keyed jobs due
	// now whose own is 0 (stored in whole microseconds); 0 for none.
	MaxWait time.Duration
	// AdaptiveMin turns adaptive limits on for the first keys of the
	// queue's jobs whose kind sets none, with that floor; 0 for off.
	AdaptiveMin int
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// KeyWeight is a key's fair-share weight (KeyWeightSet).
type KeyWeight struct {
	Key       string
	Weight    int
	UpdatedAt time.Time
}

// PausedQueue is a queue PauseQueue stopped: it claims nothing until resumed.
type PausedQueue struct {
	Queue    string
	PausedAt time.Time
}

// PolicyStore keeps queue policies and key overrides.
type PolicyStore interface {
	// PolicyLockMany returns, locked and ordered by queue, the policies of
	// namespace and of the named queues.
	PolicyLockMany(ctx context.Context, namespace string, queues []string) ([]Policy, error)
	// PolicyInsert stores a new policy; false when its queue already has one.
	PolicyInsert(ctx context.Context, p Policy) (bool, error)
	// PolicyUpdate rewrites a policy's limits and UpdatedAt.
	PolicyUpdate(ctx context.Context, p Policy) error
	// PolicyDelete removes a queue's policy.
	PolicyDelete(ctx context.Context, queue string) error
	// PolicyList returns every policy, ordered by queue.
	PolicyList(ctx context.Context) ([]Policy, error)
	// PolicyListKeys lists, in key order, the keys of the queue's unfinished
	// jobs that leave their limit to the queue's policy (To 0).
	PolicyListKeys(ctx context.Context, queue string) ([]string, error)
	// PolicyListRateKeys lists, in key order, the rate keys of the queue's
	// unfinished jobs that leave their rate to the queue's policy (no
	// rate limit of their own).
	PolicyListRateKeys(ctx context.Context, queue string) ([]string, error)
	// KeyLimitSet stores (or replaces) key's override.
	KeyLimitSet(ctx context.Context, key string, limit int, now time.Time) error
	// KeyLimitDelete removes key's override; false when it had none.
	KeyLimitDelete(ctx context.Context, key string) (bool, error)
	// KeyWeightSet stores (or replaces) key's fair-share weight.
	KeyWeightSet(ctx context.Context, key string, weight int, now time.Time) error
	// KeyWeightDelete removes key's weight; false when it had none.
	KeyWeightDelete(ctx context.Context, key string) (bool, error)
	// KeyWeightList returns every key's weight, ordered by key.
	KeyWeightList(ctx context.Context) ([]KeyWeight, error)
	// JobLimitGetLatest returns the limit and queue of key's newest unfinished
	// job; ok is false when it has none.
	JobLimitGetLatest(ctx context.Context, key string) (l Limit, queue string, ok bool, err error)
}

// PauseStore keeps the paused queues, which claim nothing in any process
// (lifecycle.Claim reads them through QueueGateGet).
type PauseStore interface {
	// QueuePause marks queue paused at now; false when it already was
	// (its first paused_at is kept).
	QueuePause(ctx context.Context, queue string, now time.Time) (bool, error)
	// QueueResume removes queue's pause; false when it was not paused.
	QueueResume(ctx context.Context, queue string) (bool, error)
	// QueueListPaused returns the paused queues, ordered by queue.
	QueueListPaused(ctx context.Context) ([]PausedQueue, error)
	// KeyPause marks the full key paused at now; false when it already
	// was (its first paused_at is kept).
	KeyPause(ctx context.Context, key string, now time.Time) (bool, error)
	// KeyResume removes key's pause; false when it was not paused.
	KeyResume(ctx context.Context, key string) (bool, error)
	// KeyListPaused returns the paused keys, ordered by key.
	KeyListPaused(ctx context.Context) ([]PausedKey, error)
}

// PausedKey is a key PauseKey stopped.
type PausedKey struct {
	Key      string
	PausedAt time.Time
}

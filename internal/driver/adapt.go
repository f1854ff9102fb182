package driver

import (
	"context"
	"time"
)

// KeyAdapt is the adaptive limit of a throttled key (bq.Adaptive): the
// limit it runs at now, lowered by throttles and raised back by
// successes, never below Min nor above the key's own limit (its
// override, its jobs' To or their policy's MaxActivePerKey). A key with no
// row runs at its own limit.
type KeyAdapt struct {
	Key   string
	Limit int
	Min   int
	// Successes counts the key's completions since its last change,
	// towards the next raise.
	Successes int
	AdaptedAt time.Time
}

// AdaptStore keeps the keys' adaptive limits. Callers hold the key's
// semaphore lock, so a key's row changes with its semaphore's limit, in
// one transaction.
type AdaptStore interface {
	// KeyAdaptGet reads key's adaptive limit; ok is false when it has none.
	KeyAdaptGet(ctx context.Context, key string) (a KeyAdapt, ok bool, err error)
	// KeyAdaptSet stores (or replaces) a key's adaptive limit.
	KeyAdaptSet(ctx context.Context, a KeyAdapt) error
	// KeyAdaptDelete removes key's adaptive limit; false when it had none.
	KeyAdaptDelete(ctx context.Context, key string) (bool, error)
	// KeyAdaptList returns up to max adaptive limits, ordered by key.
	KeyAdaptList(ctx context.Context, max int) ([]KeyAdapt, error)
}

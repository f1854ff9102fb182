package memstore

import (
	"context"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

var _ driver.MultiBatcher = (*Store)(nil)

func (s *Store) LineHeadsMany(ctx context.Context, keys []string, ns []int) ([][]driver.LineHead, error) {
	out := make([][]driver.LineHead, len(keys))
	for i, k := range keys {
		var err error
		if out[i], err = s.LineHeads(ctx, k, ns[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SemaphoreTryLockMany returns every existing key: the store has no other
// transactions.
func (s *Store) SemaphoreTryLockMany(_ context.Context, keys []string) ([]driver.Semaphore, error) {
	var out []driver.Semaphore
	for _, k := range keys {
		if row, ok := s.Semaphores[k]; ok {
			out = append(out, *row)
		}
	}
	return out, nil
}

func (s *Store) PromoteFirst(ctx context.Context, keys []string, counts []int, now time.Time) ([]driver.Promotion, error) {
	out := make([]driver.Promotion, len(keys))
	for i, k := range keys {
		var err error
		if out[i], err = s.PromoteBlocked(ctx, k, counts[i], now); err != nil {
			return nil, err
		}
	}
	return out, nil
}

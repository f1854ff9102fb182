package sqlinspect

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// scanSemaphore reads key, value, lim, blocked, duration_ms, expires_at.
func scanSemaphore(row *sql.Rows) (s driver.Semaphore, err error) {
	var durMS, expires int64
	err = row.Scan(&s.Key, &s.Value, &s.Limit, &s.Blocked, &durMS, &expires)
	s.Duration, s.ExpiresAt = time.Duration(durMS)*time.Millisecond, fromMicros(expires)
	return s, err
}

// SearchKeys runs a driver's key search: query selects the semaphore
// columns scanSemaphore reads of the keys matching pattern, in key order,
// up to max.
func (r Reader) SearchKeys(ctx context.Context, query string, pattern any, max int) ([]driver.Semaphore, error) {
	out, err := collect(ctx, r, scanSemaphore, query, pattern, max)
	if err != nil {
		return nil, fmt.Errorf("search keys: %w", err)
	}
	return out, nil
}

package postgres

import (
	"context"
	"fmt"

	"github.com/bqueue/bq/internal/driver"
)

func (e *executor) PolicyListKeys(ctx context.Context, queue string) ([]string, error) {
	return e.keys(ctx, "policy-limited", e.q.policyKeys, queue)
}

func (e *executor) JobLimitGetLatest(ctx context.Context, key string) (driver.Limit, string, bool, error) {
	var j driver.Job
	ok, err := found(scanJob(e.db.QueryRow(ctx, e.q.latestJobLimit, key), &j))
	if err != nil {
		return driver.Limit{}, "", false, fmt.Errorf("read the newest job of key %q: %w", key, err)
	}
	if !ok {
		return driver.Limit{}, "", false, nil
	}
	// A multi-key job may name the key among its More.
	for _, l := range j.Keys() {
		if l.Key == key {
			return l, j.Queue, true, nil
		}
	}
	return driver.Limit{}, "", false, fmt.Errorf("read the newest job of key %q: job %d does not name it", key, j.ID)
}

package bq

import (
	"context"
	"fmt"

	"github.com/bqueue/bq/internal/metrics"
)

// The wiring of bq's metrics: internal/metrics holds the instruments,
// docs/observability.md describes them.

// gaugeSnapshot feeds the observable gauges: three aggregate queries per
// collection, bounded by the number of queues and groups.
func (c *Client) gaugeSnapshot(ctx context.Context) (metrics.Snapshot, error) {
	ex := c.drv.Exec()
	queues, err := ex.CountByQueue(ctx)
	if err != nil {
		return metrics.Snapshot{}, fmt.Errorf("bq gauges: %w", err)
	}
	groups, err := ex.GroupStats(ctx, maxGroups)
	if err != nil {
		return metrics.Snapshot{}, fmt.Errorf("bq gauges: %w", err)
	}
	rates, err := ex.RateGroups(ctx, maxGroups)
	if err != nil {
		return metrics.Snapshot{}, fmt.Errorf("bq gauges: %w", err)
	}
	return metrics.Snapshot{Queues: queues, Groups: groups, Rates: rates}, nil
}

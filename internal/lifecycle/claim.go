package lifecycle

import (
	"context"
	"fmt"

	"github.com/bqueue/bq/internal/driver"
)

// Claim takes up to p.Max ready jobs of p.Queue for p.ProcessID, within
// the queue's MaxActive, and none while the queue is paused: the driver
// claims its best way, by the one rule (driver.ClaimWithin). No claim of
// a claim that failed is returned: a job whose claim rolled back would
// run twice.
func Claim(ctx context.Context, d driver.Driver, p driver.ClaimParams) ([]*driver.Claim, error) {
	claims, err := d.Claim(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("claim jobs of queue %q: %w", p.Queue, err)
	}
	return claims, nil
}

package lifecycle

import (
	"context"
	"fmt"
	"slices"
	"time"

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

// HandOff claims for processID, in the transaction of ex that finished
// runs and promoted blocked jobs into the slots they released, up to
// room[queue] of the jobs promoted in each queue the process works
// (results' Promoted.JobIDs): blocked becomes running with no claim
// transaction of its own and no wake-up in between. The driver's
// ReadyClaimHandOff keeps every rule of a claim (none from a paused or
// capped queue, none with a rate key, priority first).
//
// The claims are known once the transaction has committed: a driver may
// send them with its COMMIT (driver.ClaimQueuer). Call the returned
// handed then, and only if the COMMIT succeeded: it returns the claims by
// queue, and a result whose promoted jobs were all handed off wakes no
// queue (its Promoted.Queues is cleared): nothing is left ready for other
// workers to look for.
func HandOff(ctx context.Context, ex driver.ClaimStore, results []Result, room map[string]int, processID int64, now time.Time) (handed func() map[string][]*driver.Claim, err error) {
	var ids []int64
	for _, r := range results {
		ids = append(ids, r.Promoted.JobIDs...)
	}
	if len(ids) == 0 {
		return func() map[string][]*driver.Claim { return nil }, nil
	}
	queues := make([]string, 0, len(room))
	for q, n := range room {
		if n > 0 {
			queues = append(queues, q)
		}
	}
	slices.Sort(queues) // a fixed order of statements
	claims := make([][]*driver.Claim, len(queues))
	later, _ := ex.(driver.ClaimQueuer)
	for i, q := range queues {
		p := driver.HandOffParams{Queue: q, IDs: ids, Max: room[q], ProcessID: processID, Now: now}
		if later != nil {
			err = later.ReadyClaimHandOffLater(ctx, p, &claims[i])
		} else {
			claims[i], err = ex.ReadyClaimHandOff(ctx, p)
		}
		if err != nil {
			return nil, fmt.Errorf("hand off jobs of queue %q: %w", q, err)
		}
	}
	return func() map[string][]*driver.Claim {
		out := map[string][]*driver.Claim{}
		taken := map[int64]bool{}
		for i, q := range queues {
			if len(claims[i]) > 0 {
				out[q] = claims[i]
			}
			for _, c := range claims[i] {
				taken[c.ID] = true
			}
		}
		for i := range results {
			p := &results[i].Promoted
			if len(p.JobIDs) > 0 && !slices.ContainsFunc(p.JobIDs, func(id int64) bool { return !taken[id] }) {
				p.Queues = nil
			}
		}
		return out
	}, nil
}

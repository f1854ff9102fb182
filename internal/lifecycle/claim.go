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
// capped queue, none with a rate key, priority first). A result whose
// promoted jobs were all handed off wakes no queue (Promoted.Queues is
// cleared): nothing is left ready for other workers to look for.
func HandOff(ctx context.Context, ex driver.ClaimStore, results []Result, room map[string]int, processID int64, now time.Time) (map[string][]*driver.Claim, error) {
	var ids []int64
	for _, r := range results {
		ids = append(ids, r.Promoted.JobIDs...)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	out := map[string][]*driver.Claim{}
	handed := map[int64]bool{}
	queues := make([]string, 0, len(room))
	for q := range room {
		queues = append(queues, q)
	}
	slices.Sort(queues) // a fixed order of statements
	for _, q := range queues {
		if room[q] <= 0 {
			continue
		}
		claims, err := ex.ReadyClaimHandOff(ctx, driver.HandOffParams{Queue: q, IDs: ids, Max: room[q], ProcessID: processID, Now: now})
		if err != nil {
			return nil, fmt.Errorf("hand off jobs of queue %q: %w", q, err)
		}
		if len(claims) > 0 {
			out[q] = claims
		}
		for _, c := range claims {
			handed[c.ID] = true
		}
	}
	for i := range results {
		p := &results[i].Promoted
		if len(p.JobIDs) > 0 && !slices.ContainsFunc(p.JobIDs, func(id int64) bool { return !handed[id] }) {
			p.Queues = nil
		}
	}
	return out, nil
}

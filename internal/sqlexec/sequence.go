package sqlexec

import (
	"context"
	"fmt"

	"github.com/bqueue/bq/internal/driver"
)

// JobHoldSlot marks a sequence's job as holding its key's slot while
// scheduled or failed (the SequenceHeld bit of jobs.sequence), or no
// longer.
func (s Shared) JobHoldSlot(ctx context.Context, id int64, held bool) error {
	v := 0
	if held {
		v = driver.SequenceHeld
	}
	if _, err := s.c.Write(ctx, s.q.HoldSlot, v, id); err != nil {
		return fmt.Errorf("mark job %d of a sequence (holding its slot: %t): %w", id, held, err)
	}
	return nil
}

package dispatcher

import (
	"context"

	"github.com/bqueue/bq/internal/driver"
)

// Hooks tell the embedding program what the dispatcher did, so it can
// count it without this package depending on a metrics library. Each is
// called after the transaction that did it commits; a nil hook is skipped.
type Hooks struct {
	// Admitted: a due scheduled job (a first run or a retry) went through
	// admission and is now ready, blocked or discarded.
	Admitted func(ctx context.Context, j *driver.Job, state driver.JobState)
	// Promoted: n blocked jobs of key took free slots.
	Promoted func(ctx context.Context, key string, n int)
	// Reaped: the claim of a lost process went back to ready or failed.
	Reaped func(ctx context.Context, c *driver.Claim, state driver.JobState)
}

func (h Hooks) admitted(ctx context.Context, j *driver.Job, state driver.JobState) {
	if h.Admitted != nil {
		h.Admitted(ctx, j, state)
	}
}

func (h Hooks) promoted(ctx context.Context, key string, n int) {
	if h.Promoted != nil && n > 0 {
		h.Promoted(ctx, key, n)
	}
}

func (h Hooks) reaped(ctx context.Context, c *driver.Claim, state driver.JobState) {
	if h.Reaped != nil {
		h.Reaped(ctx, c, state)
	}
}

package bq

import (
	"context"
	"errors"
	"time"
)

// errStartedLate ends a rated run that did not begin by its claim's
// StartBy: it is not run, and goes back to its rate key's line
// (lifecycle.StartedLate).
var errStartedLate = errors.New("bq: the rate-limited run did not begin within its start slack of its claim")

type startByKey struct{}

// startBy is when a rated run must begin by, on the client's clock.
type startBy struct {
	by  time.Time
	now func() time.Time
}

// late reports whether ctx is a rated run's and its start is past due:
// checked just before the job's own function, after every middleware, so
// no start the job sees comes later than the one its key's ring counts.
func late(ctx context.Context) bool {
	s, ok := ctx.Value(startByKey{}).(startBy)
	return ok && s.now().After(s.by)
}

// rateWaits tells this process's dispatcher, if it runs one, that a job
// went to a rate line, so it looks at the lines now rather than at its
// next poll.
func (c *Client) rateWaits() {
	select {
	case c.rateWake <- struct{}{}:
	default:
	}
}

package lifecycle

import (
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/semaphore"
)

// Wait is a blocked job's expected wait in its line, from its key's
// release interval (zero when unknown), and whether its MaxWait refused
// it.
type Wait struct {
	Key      string
	Expected time.Duration
	Interval time.Duration
	MaxWait  time.Duration // the bound that refused it; 0 when accepted
	// Policy: that bound is the queue policy's (Policy.MaxWait), the
	// job's definition setting none.
	Policy bool
}

// maxWait is the MaxWait of key among keys, the limits of a job.
func maxWait(keys []driver.Limit, key string) time.Duration {
	for _, l := range keys {
		if l.Key == key {
			return l.MaxWait
		}
	}
	return 0
}

// waitTooLong sets c's expected wait, joining the line of key (line, held
// locked), and reports whether its MaxWait refuses it: then nothing is
// kept, as for a discard, and the caller turns it into the enqueue's
// error. A job whose definition sets no MaxWait has its queue policy's,
// read with the key's lock, when it is fresh (a new job that does not
// replace).
func (c *candidate) waitTooLong(line *semaphore.Semaphore, key string) bool {
	c.wait = Wait{Key: key, Expected: line.ExpectedWait(), Interval: line.Interval()}
	mw, whose := maxWait(c.keys, key), "its MaxWait"
	if mw == 0 && c.fresh {
		mw, whose, c.wait.Policy = line.PolicyMaxWait(), "its queue policy's MaxWait", true
	}
	if mw <= 0 || c.wait.Expected <= mw {
		c.wait.Policy = false
		return false
	}
	c.wait.MaxWait = mw
	c.outcome = driver.StateDiscarded
	c.reason = fmt.Sprintf("concurrency key %q has no free slot and a job joining its line now is expected to wait %s, above %s %s",
		key, c.wait.Expected, whose, mw)
	return true
}

package bq

import (
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/worker"
)

// Adaptive makes a key's limit adapt to its downstream (see
// Concurrency.Adaptive): a throttled run lowers it, completions raise it
// back, within [Min, the key's own limit].
type Adaptive struct {
	// Min is the lowest the limit goes, 1 or more, at most Concurrency.To
	// when To is set. Required.
	Min int
}

// DefaultThrottleDelay is how long a run that returned Throttled with
// no delay of its own waits before it runs again.
const DefaultThrottleDelay = time.Second

// Throttled returns an error that ends the run as its downstream pushed
// back (an HTTP 429 or 503, a quota error): the job runs again after
// retryAfter (DefaultThrottleDelay when 0) without spending an attempt,
// as with Snooze, its slot released; and when its kind's
// Concurrency.Adaptive is set, its key's limit is lowered fleet-wide in
// the same transaction (see docs/flow-control.md). err says what the
// downstream answered, for logs; it may be nil. As with Snooze, the
// error handler (Config.ErrorHandler) is not told of it. A negative
// retryAfter fails the run with an error saying so, as any error would.
func Throttled(err error, retryAfter time.Duration) error {
	if retryAfter < 0 {
		return fmt.Errorf("%w: bq.Throttled: retryAfter is %s: pass how long the downstream asked to wait (its Retry-After), or 0 for %s",
			ErrInvalidArgument, retryAfter, DefaultThrottleDelay)
	}
	if retryAfter == 0 {
		retryAfter = DefaultThrottleDelay
	}
	return &worker.ThrottleError{Err: err, Delay: retryAfter}
}

// adaptiveProblems refuses an Adaptive with bounds no limit can keep,
// and one on a further limit.
func adaptiveProblems[A any](first *Concurrency[A], more []Concurrency[A]) []error {
	var errs []error
	if first != nil && first.Adaptive != nil {
		switch a := first.Adaptive; {
		case a.Min < 1:
			errs = append(errs, fmt.Errorf("Concurrency.Adaptive.Min is %d: give the lowest limit the key may fall to, 1 or more", a.Min))
		case first.To > 0 && a.Min > first.To:
			errs = append(errs, fmt.Errorf("Concurrency.Adaptive.Min %d is above Concurrency.To %d, the most the limit rises to: lower Min or raise To", a.Min, first.To))
		}
	}
	for i, c := range more {
		if c.Adaptive != nil {
			errs = append(errs, fmt.Errorf("MoreConcurrency[%d].Adaptive: only Concurrency, a job's first key, adapts: move Adaptive to Concurrency or drop it", i))
		}
	}
	return errs
}

// AdaptedKey is a key whose adaptive limit throttles lowered: it runs at
// Limit (never below Min) until Successes reach Limit, when it rises by
// one, up to the key's own limit, where the row goes.
type AdaptedKey struct {
	Key       string    `json:"key"`
	Limit     int       `json:"limit"`
	Min       int       `json:"min"`
	Successes int       `json:"successes"`
	AdaptedAt time.Time `json:"adapted_at"`
}

// maxAdaptedKeys bounds Health.AdaptedKeys.
const maxAdaptedKeys = 100

// adaptedSummary is the sentence Explain adds for a job whose key runs
// at a lowered adaptive limit.
func adaptedSummary(k *KeyState) string {
	if k == nil || k.Adaptive == nil {
		return ""
	}
	a := k.Adaptive
	return fmt.Sprintf(" Its key's limit adapts to its downstream (bq.Adaptive): throttled runs lowered it to %d (min %d) %s; it rises by one after %d more completions.",
		a.Limit, a.Min, "at "+a.AdaptedAt.UTC().Format(time.RFC3339), max(a.Limit-a.Successes, 1))
}

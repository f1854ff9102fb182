package worker

import (
	"errors"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/lifecycle"
)

// What a run's error asks of its end: never retried (Permanent), run
// again later without spending an attempt (Snooze, Throttled), or
// cancelled (Cancel).

// PermanentError marks an error that must not be retried (bq.Permanent).
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err so its job fails at once.
func Permanent(err error) error { return &PermanentError{Err: err} }

// IsPermanent reports whether err asks for no retry.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// SnoozeError asks for the job to run again after Delay (bq.Snooze).
type SnoozeError struct{ Delay time.Duration }

func (e *SnoozeError) Error() string { return fmt.Sprintf("bq.Snooze: run again in %s", e.Delay) }

// SnoozeOf is the delay a run asked for with a SnoozeError, if it did.
func SnoozeOf(err error) (time.Duration, bool) {
	var s *SnoozeError
	if errors.As(err, &s) {
		return s.Delay, true
	}
	return 0, false
}

// CancelError is a run's own request to end cancelled (bq.Cancel); it
// unwraps to Sentinel (bq.ErrCancelled) and to Err.
type CancelError struct {
	Err      error
	Sentinel error
}

func (e *CancelError) Error() string {
	if e.Err == nil {
		return "bq.Cancel"
	}
	return e.Err.Error()
}

// Unwrap lets errors.Is and errors.As see both the sentinel and the
// wrapped error.
func (e *CancelError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Sentinel}
	}
	return []error{e.Sentinel, e.Err}
}

// CancelOf reports whether a run asked to be cancelled.
func CancelOf(err error) bool {
	var c *CancelError
	return errors.As(err, &c)
}

// ThrottleError asks for the job to run again after Delay, its key's
// limit lowered if it adapts (bq.Throttled); Err is what the downstream
// answered, maybe nil.
type ThrottleError struct {
	Err   error
	Delay time.Duration
}

func (e *ThrottleError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("bq.Throttled: run again in %s", e.Delay)
	}
	return fmt.Sprintf("bq.Throttled: run again in %s: %v", e.Delay, e.Err)
}

func (e *ThrottleError) Unwrap() error { return e.Err }

// ThrottleOf is the delay a run asked for with a ThrottleError, if it
// did.
func ThrottleOf(err error) (time.Duration, bool) {
	var t *ThrottleError
	if errors.As(err, &t) {
		return t.Delay, true
	}
	return 0, false
}

// Adaptive is a Job whose key's limit or rate adapts (bq.Adaptive).
type Adaptive interface {
	// AdaptiveMin is the floor of its key's limit; 0 when it does not
	// adapt.
	AdaptiveMin() int
	// RateAdaptiveMin is the floor of its rate; 0 when it does not adapt.
	RateAdaptiveMin() int
}

// adaptiveOf is what of def adapts, nothing for a Job that is not
// Adaptive.
func adaptiveOf(def Job) lifecycle.Adaptive {
	if a, ok := def.(Adaptive); ok {
		return lifecycle.Adaptive{Key: a.AdaptiveMin(), Rate: a.RateAdaptiveMin()}
	}
	return lifecycle.Adaptive{}
}

package bq

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Unique makes a job unique: an enqueue finding a job of the same unique
// key in one of ByStates inserts nothing, and its result says Duplicate
// with the id of that job (DuplicateOf). Uniqueness is always within the
// job kind; each field set narrows the key further. At least one field
// must be set. The check is the database's, made under a lock on the key
// in the enqueue's transaction, so it holds across processes.
type Unique struct {
	// ByArgs adds the args to the key, as encoding/json encodes them: a
	// map's keys sorted, a struct's fields in the type's order, so two
	// args equal as JSON are the same key.
	ByArgs bool
	// ByPeriod adds the period of the job's scheduled time (its run-at,
	// else the enqueue's now), floored to a multiple of ByPeriod in UTC:
	// with 1h, one job per kind per hour. At least 1s; 0 leaves time out.
	ByPeriod time.Duration
	// ByQueue adds the queue the job is enqueued on.
	ByQueue bool
	// ByStates are the states of an existing job that make a new one a
	// duplicate. Default: scheduled, ready, blocked, running, completed;
	// a failed, discarded or cancelled job does not count.
	ByStates []JobState
}

// WithUnique makes this enqueue unique by u, replacing the definition's
// Unique (JobOptions.Unique).
func WithUnique(u Unique) EnqueueOption {
	return func(o *enqueueOptions) { o.unique = &u }
}

// defaultUniqueStates are River's: every state but the endings that did
// not do the job's work.
var defaultUniqueStates = []JobState{StateScheduled, StateReady, StateBlocked, StateRunning, StateCompleted}

// uniqueStates are the states ByStates may name.
var uniqueStates = []JobState{StateScheduled, StateReady, StateBlocked, StateRunning, StateCompleted,
	StateFailed, StateDiscarded, StateCancelled}

// validate refuses a spec that names nothing, a bad period or an unknown
// or repeated state.
func (u *Unique) validate() error {
	var errs []error
	if !u.ByArgs && u.ByPeriod == 0 && !u.ByQueue && len(u.ByStates) == 0 {
		errs = append(errs, errors.New("Unique sets no field: set ByArgs, ByPeriod, ByQueue or ByStates (or use no Unique)"))
	}
	if u.ByPeriod < 0 || (u.ByPeriod > 0 && u.ByPeriod < time.Second) {
		errs = append(errs, fmt.Errorf("Unique.ByPeriod is %s: use 1s or more, or 0 to leave time out of the key", u.ByPeriod))
	}
	for i, s := range u.ByStates {
		if !slices.Contains(uniqueStates, s) {
			errs = append(errs, fmt.Errorf("Unique.ByStates[%d] is %q, no job state: use %v", i, s, uniqueStates))
		} else if slices.Contains(u.ByStates[:i], s) {
			errs = append(errs, fmt.Errorf("Unique.ByStates[%d] repeats %q: name each state once", i, s))
		}
	}
	return errors.Join(errs...)
}

// key is the unique key of a job of kind: the SHA-256, in hex, of the
// parts the spec names, each length-prefixed so no two sets of parts
// spell the same text.
func (u *Unique) key(kind, queue string, args []byte, at time.Time) string {
	h := sha256.New()
	part := func(name, v string) {
		fmt.Fprintf(h, "%s:%d:%s|", name, len(v), v)
	}
	part("kind", kind)
	if u.ByQueue {
		part("queue", queue)
	}
	if u.ByArgs {
		part("args", string(args))
	}
	if u.ByPeriod > 0 {
		p := u.ByPeriod.Nanoseconds()
		ns := at.UTC().UnixNano()
		bucket := ns / p
		if ns < 0 && ns%p != 0 {
			bucket--
		}
		part("period", strconv.FormatInt(bucket*p, 10))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// states returns ByStates, or the default, as the driver spells them.
func (u *Unique) states() []driver.JobState {
	states := u.ByStates
	if len(states) == 0 {
		states = defaultUniqueStates
	}
	out := make([]driver.JobState, len(states))
	for i, s := range states {
		out[i] = driver.JobState(s)
	}
	return out
}

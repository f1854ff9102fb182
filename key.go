package bq

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/worker"
)

// Bounds of a key report.
const (
	maxHolders  = 100
	maxLineShow = 50
)

// Holder is a job holding one slot of a concurrency key: ready (waiting
// for a worker) or running, or, a sequence's job (Concurrency.Sequence),
// scheduled for its retry, or failed in a sequence that halts, keeping its
// place.
type Holder struct {
	JobID int64    `json:"job_id"`
	Kind  string   `json:"kind"`
	Queue string   `json:"queue"`
	State JobState `json:"state"` // ready, running, or scheduled or failed (a sequence's)
	// The process running it; zero unless running.
	ProcessID   int64  `json:"process_id,omitzero"`
	ProcessName string `json:"process_name,omitzero"`
	// ProcessAlive: the process heartbeats; false also when it is gone.
	ProcessAlive bool      `json:"process_alive,omitzero"`
	RunningSince time.Time `json:"running_since,omitzero"`
}

// BlockedJob is one job in a key's blocked line.
type BlockedJob struct {
	JobID    int64     `json:"job_id"`
	Kind     string    `json:"kind"`
	Queue    string    `json:"queue"`
	Priority int       `json:"priority"`
	Since    time.Time `json:"since"`
}

// KeyState is one concurrency key: its limit, its holders and its line.
type KeyState struct {
	Key   string `json:"key"`
	Group string `json:"group"`
	// Exists: the key has a semaphore (it is in use or was lately).
	Exists bool `json:"exists"`
	Limit  int  `json:"limit"`
	// Free is the semaphore's free value: its limit minus its holders.
	// It may be 0 or below when the limit was lowered under the holders.
	Free int `json:"free"`
	// Taken counts the slots held, Holders lists up to 100 of them.
	Taken   int      `json:"taken"`
	Holders []Holder `json:"holders"`
	// Blocked counts jobs waiting for a slot; Line lists the first 50 in
	// promotion order.
	Blocked   int          `json:"blocked"`
	Line      []BlockedJob `json:"line"`
	ExpiresAt time.Time    `json:"expires_at,omitzero"`
	// Sequence: the key's newest unfinished job is a sequence's
	// (Concurrency.Sequence): its jobs run one at a time in enqueue
	// order, a failing job keeping its place (a scheduled holder).
	Sequence bool `json:"sequence,omitzero"`
	// Adaptive: throttles (bq.Throttled) lowered the key's limit, now
	// Limit; nil while it runs at its own.
	Adaptive *AdaptedKey `json:"adaptive,omitempty"`
	// ReleaseInterval is the key's recent mean time between two releases
	// of its slots while jobs waited in its line: a job p-th in line is
	// expected to start p × ReleaseInterval from now (EnqueueResult and
	// Explanation's ExpectedStart, Concurrency.MaxWait). 0 until one was
	// measured.
	ReleaseInterval time.Duration `json:"release_interval,omitzero"`
}

// expect is the sentence on a blocked job's expected start (setting
// ExpectedStart), "" while its key has no release interval measured.
func (e *Explanation) expect(now time.Time) string {
	iv := e.Key.ReleaseInterval
	if iv <= 0 || e.Position == 0 {
		return ""
	}
	wait := driver.ExpectedWait(e.Position, iv)
	e.ExpectedStart = now.Add(wait)
	about := "about"
	if e.PositionAtLeast {
		about = "at least"
	}
	return fmt.Sprintf(" It is expected to start in %s %s (at %s): its place in line, %s, × the key's recent release interval %s.",
		about, roundWait(wait), e.ExpectedStart.UTC().Format("15:04:05.000 UTC"), e.Place(), roundWait(iv))
}

// roundWait rounds an expected wait for a person: to the millisecond
// below a second, else to a tenth of a second.
func roundWait(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

// KeyState reports a full concurrency key (Group + "/" + Key).
func (c *Client) KeyState(ctx context.Context, key string) (*KeyState, error) {
	if err := checkKeyArg("KeyState", key); err != nil {
		return nil, err
	}
	k, err := c.keyState(ctx, key, maxLineShow)
	if err != nil {
		return nil, fmt.Errorf("key %q: %w", key, c.explainErr(ctx, err))
	}
	return k, nil
}

func (c *Client) keyState(ctx context.Context, key string, line int) (*KeyState, error) {
	ex := c.drv.Exec()
	k := &KeyState{Key: key, Group: driver.GroupOf(key), Holders: []Holder{}, Line: []BlockedJob{}}
	s, ok, err := ex.SemaphoreGet(ctx, key)
	if err != nil {
		return nil, err
	}
	if ok {
		k.Exists, k.Limit, k.Free, k.Taken, k.Blocked, k.ExpiresAt = true, s.Limit, s.Value, s.Limit-s.Value, s.Blocked, s.ExpiresAt
		k.ReleaseInterval = s.Interval
		l, _, found, err := ex.JobLimitGetLatest(ctx, key)
		if err != nil {
			return nil, err
		}
		k.Sequence = found && l.Sequence
	}
	if a, ok, err := ex.KeyAdaptGet(ctx, key); err != nil {
		return nil, err
	} else if ok {
		ak := adaptedKey(a)
		k.Adaptive = &ak
	}
	holders, err := ex.HolderList(ctx, key, maxHolders)
	if err != nil {
		return nil, err
	}
	now := c.cfg.Now()
	for _, h := range holders {
		out := c.holder(h, now)
		if h.Held {
			// A sequence's job keeping its slot: scheduled or failed.
			info, ok, err := ex.JobGet(ctx, h.JobID)
			if err != nil {
				return nil, err
			}
			if ok {
				out.State = JobState(info.State)
			}
		}
		k.Holders = append(k.Holders, out)
	}
	if line > 0 && k.Blocked > 0 {
		blocked, err := ex.LineList(ctx, key, line)
		if err != nil {
			return nil, err
		}
		for _, b := range blocked {
			k.Line = append(k.Line, BlockedJob(b))
		}
	}
	return k, nil
}

func (c *Client) holder(h driver.Holder, now time.Time) Holder {
	out := Holder{JobID: h.JobID, Kind: h.Kind, Queue: h.Queue, State: StateReady}
	if h.Held {
		out.State = StateScheduled // or failed: keyState reads which
	}
	if h.Running {
		out.State, out.ProcessID, out.ProcessName, out.RunningSince = StateRunning, h.ProcessID, h.ProcessName, h.ClaimedAt
		// The claim's process interval is not read back: judge by the
		// reaper's threshold alone.
		out.ProcessAlive = c.alive(h.ProcessBeat, 0, now)
	}
	return out
}

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
// one, up to the key's own limit, where the row goes. With Rate, Key is a
// rate key (Rate.Adaptive) and Limit counts starts per its period.
type AdaptedKey struct {
	Key       string    `json:"key"`
	Rate      bool      `json:"rate,omitzero"`
	Limit     int       `json:"limit"`
	Min       int       `json:"min"`
	Successes int       `json:"successes"`
	AdaptedAt time.Time `json:"adapted_at"`
}

// adaptedKey is a stored adaptive limit as reported: a rate key's row,
// filed under its line key (driver.RateLine), names the rate key.
func adaptedKey(a driver.KeyAdapt) AdaptedKey {
	k := AdaptedKey{Key: a.Key, Limit: a.Limit, Min: a.Min, Successes: a.Successes, AdaptedAt: a.AdaptedAt}
	if rate, ok := strings.CutPrefix(a.Key, driver.RateLinePrefix); ok {
		k.Key, k.Rate = rate, true
	}
	return k
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

// blockedSummary says what would release a blocked job.
func (c *Client) blockedSummary(k *KeyState, ahead int, procs []driver.Process, paused map[string]bool, now time.Time) string {
	line := aheadOf(ahead)
	dispatcher := c.dispatcherAlive(procs, now)
	// Only a dispatcher recreates, promotes and reclaims: say it will
	// only when one is alive.
	tail := ""
	if !dispatcher {
		tail = noDispatcher
	}
	switch {
	case !k.Exists:
		s := fmt.Sprintf("Blocked on key %q, which has no semaphore", k.Key)
		if dispatcher {
			return s + ": the dispatcher recreates and promotes it within one interval."
		}
		return s + "." + tail
	case k.Free > 0:
		s := fmt.Sprintf("Blocked on key %q, which has %s of %d", k.Key, count(k.Free, "free slot"), k.Limit)
		if dispatcher {
			return fmt.Sprintf("%s: the dispatcher promotes blocked jobs into them within one interval; %s.", s, line)
		}
		return fmt.Sprintf("%s; %s.%s", s, line, tail)
	case len(k.Holders) == 0:
		return fmt.Sprintf("Blocked on key %q (limit %d): no ready or running job holds its slots, which were lost; they come back when its semaphore expires at %s; %s.%s",
			k.Key, k.Limit, when(k.ExpiresAt, now), line, tail)
	}
	var running, ready int
	var dead []string                // processes that stopped heartbeating, in order
	deadJobs := map[string][]int64{} // their running holders
	readyIn := map[string]int{}      // ready holders by queue
	var queues []string
	for _, h := range k.Holders {
		if h.State != StateRunning {
			ready++
			if readyIn[h.Queue] == 0 {
				queues = append(queues, h.Queue)
			}
			readyIn[h.Queue]++
			continue
		}
		running++
		if !h.ProcessAlive {
			p := processLabel(h.ProcessID, h.ProcessName)
			if deadJobs[p] == nil {
				dead = append(dead, p)
			}
			deadJobs[p] = append(deadJobs[p], h.JobID)
		}
	}
	var s string
	switch {
	case ready == 0 && running == 1:
		s = fmt.Sprintf("Waiting for the running job of key %q to finish (limit %d); %s.", k.Key, k.Limit, line)
	case ready == 0:
		s = fmt.Sprintf("Waiting for one of %s of key %q to finish (limit %d); %s.", count(running, "running job"), k.Key, k.Limit, line)
	case running+ready == 1:
		s = fmt.Sprintf("Waiting for the holder of key %q, a ready job waiting for a worker, to run and finish (limit %d); %s.", k.Key, k.Limit, line)
	default:
		s = fmt.Sprintf("Waiting for one of the %s of key %q to finish (limit %d: %d running, %d ready and waiting for a worker); %s.",
			count(running+ready, "holder"), k.Key, k.Limit, running, ready, line)
	}
	for _, q := range queues {
		switch {
		case paused[q]:
			keep := "they keep their slots"
			if readyIn[q] == 1 {
				keep = "it keeps its slot"
			}
			s += fmt.Sprintf(" Queue %q, where %s, is paused: %s until the queue is resumed.", q, waits(readyIn[q]), keep)
		case !c.worksQueue(procs, q, now):
			s += fmt.Sprintf(" No live process works queue %q, where %s: start a worker that does.", q, waits(readyIn[q]))
		}
	}
	// One sentence per process: only the dispatcher's reaper frees these
	// slots.
	for _, p := range dead {
		jobs := deadJobs[p]
		claims := "its claim"
		if len(jobs) > 1 {
			claims = "their claims"
		}
		reap := "the dispatcher will reap " + claims
		if !dispatcher {
			reap = claims + " will be reaped once a dispatcher runs"
		}
		s += fmt.Sprintf(" Process %s stopped heartbeating while running %s: %s.", p, jobList(jobs), reap)
	}
	if len(dead) > 0 {
		s += tail
	}
	return s
}

// waits writes "1 ready holder waits", "2 ready holders wait".
func waits(n int) string {
	if n == 1 {
		return "1 ready holder waits"
	}
	return fmt.Sprintf("%d ready holders wait", n)
}

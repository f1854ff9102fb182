package bq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/ratelimit"
)

// Rate limits how many jobs of a key start per Period, across every
// worker of every process: never more than Limit starts within any
// window of length Period, counted from the starts themselves (a retry is
// a new start; a start counts once however its run ends). A job over the
// rate waits, in its key's line (state blocked), until a start frees; it
// never delays jobs of other keys. See docs/limits.md, "Rate limits".
type Rate[A any] struct {
	// Key returns the job's rate key; jobs whose full key (Group + "/" +
	// Key) matches share the rate. An empty key means no rate limit for
	// that job. Required.
	Key func(args A) string
	// Limit is the number of starts per Period, 1 to MaxRateLimit. A
	// runtime override (SetKeyRate) beats it. Limit and Period both 0
	// leave the rate to the job's queue policy (Policy.MaxStartsPerKey
	// per StartsPeriod), read at each admission and start; enqueueing
	// such a job into a queue whose policy sets no rate is refused.
	Limit int
	// Period is the window the Limit counts starts in: whole
	// milliseconds, at least 1ms; 0 with a Limit of 0.
	Period time.Duration
	// Group names the rate; job kinds with the same Group share keys.
	// Default: the job's name. A rate key and a concurrency key of the
	// same name are different limits.
	Group string
	// RequireKey refuses an enqueue whose rate key is empty (from Key or
	// WithRateKey) with ErrInvalidJob, where an empty key otherwise means
	// no rate limit for the job. Default false.
	RequireKey bool
	// Adaptive lets the rate follow its downstream: a run that returns
	// Throttled lowers the key's starts per Period fleet-wide
	// (multiplicatively, not below Adaptive.Min), completions raise it
	// back by one at a time up to its own limit (Limit, its SetKeyRate
	// override or its queue policy's MaxStartsPerKey). Min is the fewest
	// starts per Period, at most Limit when Limit is set. See
	// docs/flow-control.md, "Limits that adapt". Default: nil, the rate
	// stays put.
	Adaptive *Adaptive
}

// MaxRateLimit is the most starts per period a rate may allow: each is a
// row of its key's ring. For more, count over a shorter period (10,000
// per 100ms rather than 100,000 per second).
const MaxRateLimit = 10_000

// rateOption is WithRateKey's.
type rateOption struct {
	key    string
	limit  int
	period time.Duration
}

// WithRateKey rate-limits this job under key, replacing the definition's
// Rate key (its Group still applies; the job's name without one). A limit
// and period of 0 keep the definition's, or, for a job kind with no Rate
// or a Rate with no Limit, leave the rate to the queue policy's
// MaxStartsPerKey. An empty key means no rate limit for this job.
func WithRateKey(key string, limit int, period time.Duration) EnqueueOption {
	return func(o *enqueueOptions) { o.rate = &rateOption{key: key, limit: limit, period: period} }
}

// validateRate checks a limit and period as Rate and WithRateKey take
// them: one rule, one wording, on every database.
func validateRate(what string, limit int, period time.Duration) error {
	return validateRateNamed(what, "Limit", "Period", limit, period)
}

// validateRateNamed is validateRate for fields named limitName and
// periodName (a Policy's MaxStartsPerKey and StartsPeriod).
func validateRateNamed(what, limitName, periodName string, limit int, period time.Duration) error {
	var errs []error
	switch {
	case limit < 1:
		errs = append(errs, fmt.Errorf("%s %s is %d: use 1 to %d starts per period", what, limitName, limit, MaxRateLimit))
	case limit > MaxRateLimit:
		errs = append(errs, fmt.Errorf("%s %s is %d: at most %d starts per period (bq.MaxRateLimit); count over a shorter period",
			what, limitName, limit, MaxRateLimit))
	}
	switch {
	case period == 0 && limit >= 1 && limit <= MaxRateLimit:
		// A limit with no window: name the window, not "0s".
		errs = append(errs, fmt.Errorf("%s %s is 0: set it to the window the %d starts count in, e.g. time.Second for %d starts a second",
			what, periodName, limit, limit))
	case period < time.Millisecond:
		errs = append(errs, fmt.Errorf("%s %s is %s: use 1ms or more", what, periodName, period))
	case period%time.Millisecond != 0:
		errs = append(errs, fmt.Errorf("%s %s is %s: use whole milliseconds, which the databases count", what, periodName, period))
	}
	return errors.Join(errs...)
}

// validateRateSpec checks a definition's Rate.
func validateRateSpec[A any](r *Rate[A]) error {
	var errs []error
	if r.Key == nil {
		errs = append(errs, errors.New("Rate.Key is nil: set Key to a func(args) string that returns the key to rate-limit by, or remove Rate"))
	}
	// Both 0: the queue policy's rate (checked at enqueue).
	if r.Limit != 0 || r.Period != 0 {
		if err := validateRate("Rate", r.Limit, r.Period); err != nil {
			errs = append(errs, fmt.Errorf("%w (or set Limit and Period both to 0 for the queue policy's MaxStartsPerKey)", err))
		}
	}
	if err := validateGroup(r.Group); err != nil {
		errs = append(errs, fmt.Errorf("Rate: %w", err))
	}
	switch a := r.Adaptive; {
	case a == nil:
	case a.Min < 1:
		errs = append(errs, fmt.Errorf("Rate.Adaptive.Min is %d: give the fewest starts per period the rate may fall to, 1 or more", a.Min))
	case r.Limit > 0 && a.Min > r.Limit:
		errs = append(errs, fmt.Errorf("Rate.Adaptive.Min %d is above Rate.Limit %d, the most the rate rises to: lower Min or raise Limit", a.Min, r.Limit))
	}
	return errors.Join(errs...)
}

// rateOf returns the rate spec of one job: the enqueue-time key if
// given, else the definition's.
func (j *Job[A]) rateOf(args A, o *enqueueOptions) (driver.RateSpec, error) {
	r := j.opts.Rate
	var spec driver.RateSpec
	group := j.name
	if r != nil {
		group, spec.Limit, spec.Period = r.Group, r.Limit, r.Period
	}
	key := ""
	switch k := o.rate; {
	case k != nil:
		if k.limit != 0 || k.period != 0 {
			if err := validateRate("WithRateKey", k.limit, k.period); err != nil {
				return driver.RateSpec{}, fmt.Errorf("%w: WithRateKey(%s, %d, %s): %w", ErrInvalidJob, quoted(k.key), k.limit, k.period, err)
			}
			spec.Limit, spec.Period = k.limit, k.period
		}
		if bare, full := fullOfGroup(group, k.key); full {
			return driver.RateSpec{}, fmt.Errorf("%w: WithRateKey(%s, %d, %s): the key starts with its Group, %s: WithRateKey takes the bare key, %s, and adds the Group (SetKeyRate and RateState take the full key)",
				ErrInvalidJob, quoted(k.key), k.limit, k.period, quoted(groupInKey.Replace(group)+"/"), quoted(bare))
		}
		key = k.key
		if key == "" && r != nil && r.RequireKey {
			return driver.RateSpec{}, fmt.Errorf("%w: WithRateKey gave an empty key and Rate.RequireKey is set: the job would run without the rate; pass the key to rate-limit by", ErrInvalidJob)
		}
	case r != nil:
		key = r.Key(args)
		if key == "" && r.RequireKey {
			return driver.RateSpec{}, fmt.Errorf("%w: Rate.Key returned an empty key and Rate.RequireKey is set: the job would run without the rate; return the key to rate-limit by, or leave RequireKey unset for such jobs to run unlimited", ErrInvalidJob)
		}
	}
	if key == "" {
		return driver.RateSpec{}, nil
	}
	spec.Key = fullKey(group, key)
	if err := validateRateKey(spec.Key); err != nil {
		return driver.RateSpec{}, fmt.Errorf("%w: %w", ErrInvalidJob, err)
	}
	return spec, nil
}

// validateRateKey checks a full rate key: a concurrency key's rule, with
// room for the line prefix its waiting jobs are filed under.
func validateRateKey(key string) error {
	if n := len(key) + len(driver.RateLinePrefix); n > MaxKeyBytes {
		return fmt.Errorf("rate key %s is %d bytes long: a full rate key (Group + \"/\" + Key) is at most %d bytes; hash a longer key",
			quoted(key), len(key), MaxKeyBytes-len(driver.RateLinePrefix))
	}
	if err := validateKey(key); err != nil {
		return fmt.Errorf("rate %w", err)
	}
	return nil
}

// SetKeyRate overrides the rate of a full rate key (bq.Key(group, key))
// until ClearKeyRate: at most limit starts per period, beating every
// job's own Rate. It applies at once: a raised rate makes waiting jobs
// ready now; a lowered one keeps the key's newest starts counted, so no
// window holds more than the new limit from then on.
func (c *Client) SetKeyRate(ctx context.Context, key string, limit int, period time.Duration) error {
	if err := checkRateKeyArg("SetKeyRate", key); err != nil {
		return err
	}
	if err := validateRate("SetKeyRate", limit, period); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	spec := driver.RateSpec{Key: key, Limit: limit, Period: period}
	return c.applyRate(ctx, "set the rate of key "+quoted(key), func(ex driver.Executor, now time.Time) error {
		return ex.KeyRateSet(ctx, spec, now)
	}, spec)
}

// ClearKeyRate removes key's override: the key goes back to the rate of
// its newest waiting job, its queue policy's when the job has none of its
// own (or keeps its stored one when none waits).
func (c *Client) ClearKeyRate(ctx context.Context, key string) error {
	if err := checkRateKeyArg("ClearKeyRate", key); err != nil {
		return err
	}
	return c.applyRate(ctx, "clear the rate of key "+quoted(key), func(ex driver.Executor, now time.Time) error {
		_, err := ex.KeyRateDelete(ctx, key)
		return err
	}, driver.RateSpec{Key: key})
}

// applyRate changes key's override with change, then applies the key's
// rate at once in the same transaction, and wakes the queues that got
// ready jobs.
func (c *Client) applyRate(ctx context.Context, what string, change func(driver.Executor, time.Time) error, spec driver.RateSpec) error {
	var promoted driver.Promotion
	err := driver.InTx(ctx, c.drv, func(ex driver.Executor) error {
		now := c.cfg.Now()
		promoted = driver.Promotion{}
		if err := change(ex, now); err != nil {
			return err
		}
		if spec.Limit == 0 {
			latest, ok, err := ex.JobRateGetLatest(ctx, spec.Key)
			if err != nil {
				return err
			}
			if ok {
				spec.Limit, spec.Period = latest.Limit, latest.Period
			}
		}
		p, err := lifecycle.ApplyRate(ctx, ex, spec, now)
		promoted = p
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, c.explainErr(ctx, err))
	}
	c.rt.ReadyAll(promoted.Queues)
	return nil
}

func checkRateKeyArg(fn, key string) error {
	check := checkKeyArg
	if fn == "SetKeyRate" || fn == "ClearKeyRate" {
		check = checkFullKeyArg
	}
	if err := check(fn, key); err != nil {
		return err
	}
	if err := validateRateKey(key); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidArgument, fn, err)
	}
	return nil
}

// RateState is one rate key: its rate, its recent starts and its line.
type RateState struct {
	Key   string `json:"key"`
	Group string `json:"group"`
	// Exists: the key has a stored row (it is in use or was lately).
	Exists bool          `json:"exists"`
	Limit  int           `json:"limit"`
	Period time.Duration `json:"period"`
	// Overridden: SetKeyRate set Limit and Period.
	Overridden bool `json:"overridden"`
	// Recent counts the starts in the last Period (as the ring counts
	// them: each at its claim plus the start slack).
	Recent int `json:"recent"`
	// Waiting counts jobs waiting for a start; Line lists the first 50
	// in start order.
	Waiting int          `json:"waiting"`
	Line    []BlockedJob `json:"line"`
	// NextStartAt is when the next waiting job may start; zero when none
	// waits.
	NextStartAt time.Time `json:"next_start_at,omitzero"`
	// Adaptive: throttles (bq.Throttled) lowered the rate (Rate.Adaptive),
	// now Limit per Period; nil while it runs at its own.
	Adaptive *AdaptedKey `json:"adaptive,omitempty"`
}

// RateState reports a full rate key (bq.Key(group, key)).
func (c *Client) RateState(ctx context.Context, key string) (*RateState, error) {
	if err := checkRateKeyArg("RateState", key); err != nil {
		return nil, err
	}
	r, err := c.rateState(ctx, key, maxLineShow)
	if err != nil {
		return nil, fmt.Errorf("rate key %q: %w", key, c.explainErr(ctx, err))
	}
	return r, nil
}

func (c *Client) rateState(ctx context.Context, key string, line int) (*RateState, error) {
	row, _, ok, err := c.drv.Exec().RateGet(ctx, key, c.cfg.Now())
	if err != nil {
		return nil, err
	}
	if !ok {
		return &RateState{Key: key, Group: driver.GroupOf(key), Line: []BlockedJob{}}, nil
	}
	return c.rateOf(ctx, row, line)
}

// rateOf reports a stored rate row: its starts in its own last period
// (one read of its ring) and, with line, the first jobs of its line.
func (c *Client) rateOf(ctx context.Context, row driver.Rate, line int) (*RateState, error) {
	ex := c.drv.Exec()
	out := &RateState{Key: row.Key, Group: driver.GroupOf(row.Key), Line: []BlockedJob{},
		Exists: true, Waiting: row.Waiting, NextStartAt: row.NextAt, Overridden: row.Override.Limit > 0}
	base, period := ratelimit.Resolve(driver.RateSpec{}, row)
	out.Limit, out.Period = driver.Adapted(base, row.Adapt), period
	_, recent, _, err := ex.RateGet(ctx, row.Key, c.cfg.Now().Add(-out.Period))
	if err != nil {
		return nil, err
	}
	if row.Adapt > 0 {
		a, ok, err := ex.KeyAdaptGet(ctx, driver.RateLine(row.Key))
		if err != nil {
			return nil, err
		}
		if ok {
			ak := adaptedKey(a)
			out.Adaptive = &ak
			// Read after the row: a change in between shows in both.
			out.Limit = driver.Adapted(base, a.Limit)
		}
	}
	out.Recent = recent
	if line > 0 && out.Waiting > 0 {
		blocked, err := ex.LineList(ctx, driver.RateLine(row.Key), line)
		if err != nil {
			return nil, err
		}
		for _, b := range blocked {
			out.Line = append(out.Line, BlockedJob(b))
		}
	}
	return out, nil
}

// maxRatesListed bounds ListRates.
const maxRatesListed = 1000

// ListRates returns up to max stored rate keys (at most 1,000) after
// `after` in key order, each with its recent starts and waiting jobs but
// not its line: a page for the CLI and the dashboard.
func (c *Client) ListRates(ctx context.Context, after string, max int) ([]*RateState, error) {
	if max <= 0 || max > maxRatesListed {
		max = maxRatesListed
	}
	rows, err := c.drv.Exec().RateList(ctx, after, max)
	if err != nil {
		return nil, fmt.Errorf("list rate keys: %w", c.explainErr(ctx, err))
	}
	out := make([]*RateState, 0, len(rows))
	for _, r := range rows {
		st, err := c.rateOf(ctx, r, 0)
		if err != nil {
			return nil, fmt.Errorf("list rate keys: %w", c.explainErr(ctx, err))
		}
		out = append(out, st)
	}
	return out, nil
}

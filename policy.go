package bq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/semaphore"
)

// Policy is an operations limit for one queue, stored in the database so
// that a change takes effect without redeploying workers. Zero fields set
// no limit.
type Policy struct {
	Queue string
	// MaxActive caps the queue's running jobs across every process. It is
	// enforced while claiming, in the database, so adding processes never
	// raises the total.
	MaxActive int
	// MaxActivePerKey is the limit of keyed jobs of the queue whose
	// definition sets no Concurrency.To.
	MaxActivePerKey int
	// MaxBlocked caps each key's backlog for keyed jobs of the queue whose
	// definition sets no Concurrency.MaxBlocked: further enqueues of a key
	// with that many jobs waiting are discarded.
	MaxBlocked int
	// MaxStartsPerKey starts per StartsPeriod is the default rate of the
	// queue's rated jobs whose Rate (or WithRateKey) sets no Limit and
	// Period: no window of StartsPeriod holds more starts of one rate
	// key. A key's SetKeyRate override beats it, and a job's own Limit
	// does. Set both (1 to MaxRateLimit, whole milliseconds of at least
	// 1ms) or neither. A change applies at once to the rate keys of the
	// queue's unfinished jobs that rely on it, as SetKeyRate does (each
	// key's ring resized, keeping its newest starts), and to every later
	// admission and start. Removing it refuses new such jobs; those stored
	// keep their key's last rate.
	MaxStartsPerKey int
	StartsPeriod    time.Duration
	// FairShare shares the queue's slots among its keys: while its
	// ready jobs outnumber its free slots, each claim takes the jobs of
	// the keys furthest below their weighted share of the queue's running
	// jobs first, so a key's first job starts when a slot frees, whatever
	// the other keys' backlogs; uncontended, one key may take every free
	// slot. Keyless jobs share as one key. Each key stays within its own
	// limit (To). See docs/limits.md, "Fair share".
	FairShare bool
	// KeyWeight is the weight of the queue's keys under FairShare that
	// have none of their own (SetKeyWeight): a key of weight 3 gets three
	// times the slots of a key of weight 1. 0 means 1; at most
	// MaxKeyWeight.
	KeyWeight int
	// MaxWait is the backpressure bound of keyed jobs of the queue whose
	// definition sets no Concurrency.MaxWait: an enqueue of a job due now
	// that would be blocked and is expected to wait longer than MaxWait
	// for its slot is refused (WaitTooLongError), decided under the key's
	// lock. Scheduled jobs, retries, promotions and replacing jobs are
	// never refused. 0 for no bound; whole microseconds.
	MaxWait time.Duration
	// Adaptive turns adaptive limits on for the keyed jobs of the queue
	// whose definition sets no Concurrency.Adaptive: a run returning
	// Throttled lowers its first key's limit fleet-wide, not below
	// Adaptive.Min, and completions raise it back (see
	// docs/flow-control.md, "Limits that adapt"). The kind's own Adaptive
	// beats it. nil: off.
	Adaptive *Adaptive
}

// StoredPolicy is a policy as the database holds it.
type StoredPolicy struct {
	Policy
	Namespace string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ErrPolicyConflict is returned by SyncPolicies for a queue whose policy
// another namespace owns.
var ErrPolicyConflict = errors.New("queue policy owned by another namespace")

// Key returns the full concurrency key of a job: its limit Group (by
// default the job's name) and the key its Concurrency.Key returned. Full
// keys name keys in SetKeyLimit, Health and the blocked table. A '/' or
// '%' in the group is escaped (%2F, %25), so the first '/' of a full key
// always ends its group.
func Key(group, key string) string { return fullKey(group, key) }

// SyncPolicies makes the database's policies of namespace exactly
// policies, in one transaction: new ones are created, changed ones
// updated, and those of namespace not listed deleted. A queue whose policy
// belongs to another namespace is refused with ErrPolicyConflict. Syncing
// the same set again writes nothing. A changed MaxActivePerKey applies at
// once to the keys of the queue's waiting and running jobs, and a changed
// MaxStartsPerKey or StartsPeriod to the rate keys of its unfinished jobs
// that leave their rate to it. A changed MaxWait applies to the next
// enqueue and a changed Adaptive to the next throttle (each reads the
// policy under the key's lock); a worker process counts completions
// towards an adaptive policy's recovery within 10s. A policy that stops
// adapting gives the keys it lowered their own limits back at once.
func (c *Client) SyncPolicies(ctx context.Context, namespace string, policies []Policy) error {
	if err := validatePolicies(namespace, policies); err != nil {
		return fmt.Errorf("sync policies: %w", err)
	}
	queues := make([]string, len(policies))
	for i, p := range policies {
		queues[i] = p.Queue
	}
	var woken driver.Promotion
	err := driver.InTx(ctx, c.drv, func(ex driver.Executor) error {
		woken = driver.Promotion{}
		now := c.cfg.Now()
		stored, err := ex.PolicyLockMany(ctx, namespace, queues)
		if err != nil {
			return err
		}
		byQueue := map[string]driver.Policy{}
		for _, s := range stored {
			byQueue[s.Queue] = s
		}
		var relimit, unadapt []string
		var rerate []driver.Policy
		for _, p := range policies {
			want := driver.Policy{Queue: p.Queue, Namespace: namespace, MaxActive: p.MaxActive,
				MaxActivePerKey: p.MaxActivePerKey, MaxBlocked: p.MaxBlocked,
				MaxStartsPerKey: p.MaxStartsPerKey, StartsPeriod: p.StartsPeriod, FairShare: p.FairShare,
				KeyWeight: p.KeyWeight, MaxWait: p.MaxWait, AdaptiveMin: adaptiveMinOf(p.Adaptive), UpdatedAt: now}
			have, exists := byQueue[p.Queue]
			switch {
			case exists && have.Namespace != namespace:
				return fmt.Errorf("%w: queue %q belongs to namespace %q, so namespace %q cannot set it: remove it from %q's policies first",
					ErrPolicyConflict, p.Queue, have.Namespace, namespace, have.Namespace)
			case exists && samePolicy(have, want):
				continue
			case exists:
				err = ex.PolicyUpdate(ctx, want)
			default:
				var inserted bool
				if inserted, err = ex.PolicyInsert(ctx, want); err == nil && !inserted {
					err = fmt.Errorf("%w: queue %q got a policy from another namespace meanwhile", ErrPolicyConflict, p.Queue)
				}
			}
			if err != nil {
				return err
			}
			if have.MaxActivePerKey != p.MaxActivePerKey {
				relimit = append(relimit, p.Queue)
			}
			if have.AdaptiveMin > 0 && p.Adaptive == nil {
				unadapt = append(unadapt, p.Queue)
			}
			// A removed rate leaves each key its stored one: nothing to apply.
			if p.MaxStartsPerKey > 0 && (have.MaxStartsPerKey != p.MaxStartsPerKey || have.StartsPeriod != p.StartsPeriod) {
				rerate = append(rerate, want)
			}
		}
		for _, s := range stored {
			if s.Namespace == namespace && !slices.Contains(queues, s.Queue) {
				if err := ex.PolicyDelete(ctx, s.Queue); err != nil {
					return err
				}
				if s.MaxActivePerKey != 0 {
					relimit = append(relimit, s.Queue)
				}
				if s.AdaptiveMin > 0 {
					unadapt = append(unadapt, s.Queue)
				}
			}
		}
		if woken, err = c.relimitQueues(ctx, ex, relimit, now); err != nil {
			return err
		}
		raised, err := c.unadaptQueues(ctx, ex, unadapt, now)
		if err != nil {
			return err
		}
		woken.Add(raised)
		// Rate rows after semaphores, as admission locks them.
		rated, err := c.rerateQueues(ctx, ex, rerate, now)
		woken.Add(rated)
		return err
	})
	if err != nil {
		return fmt.Errorf("sync policies of namespace %q: %w", namespace, c.explainErr(ctx, err))
	}
	// A raised MaxActivePerKey promoted blocked jobs; a raised or removed
	// MaxActive lets more of a queue's ready jobs be claimed.
	for _, q := range queues {
		woken.AddQueue(q)
	}
	c.rt.ReadyAll(woken.Queues)
	return nil
}

// samePolicy reports whether a stored policy already has want's limits.
func samePolicy(have, want driver.Policy) bool {
	return have.MaxActive == want.MaxActive && have.MaxActivePerKey == want.MaxActivePerKey &&
		have.MaxBlocked == want.MaxBlocked && have.MaxStartsPerKey == want.MaxStartsPerKey &&
		have.StartsPeriod == want.StartsPeriod && have.FairShare == want.FairShare && have.KeyWeight == want.KeyWeight &&
		have.MaxWait == want.MaxWait && have.AdaptiveMin == want.AdaptiveMin
}

// adaptiveMinOf is a's floor as the policy stores it; 0 for nil.
func adaptiveMinOf(a *Adaptive) int {
	if a == nil {
		return 0
	}
	return a.Min
}

// relimitQueues applies a changed MaxActivePerKey to the keys of the
// queues' jobs that leave their limit to the policy, in key order, and
// returns what raised limits promoted.
func (c *Client) relimitQueues(ctx context.Context, ex driver.Executor, queues []string, now time.Time) (driver.Promotion, error) {
	var promoted driver.Promotion
	type keyOf struct{ key, queue string }
	var keys []keyOf
	for _, q := range queues {
		ks, err := ex.PolicyListKeys(ctx, q)
		if err != nil {
			return promoted, err
		}
		for _, k := range ks {
			keys = append(keys, keyOf{k, q})
		}
	}
	slices.SortFunc(keys, func(a, b keyOf) int { return strings.Compare(a.key, b.key) })
	for _, k := range keys {
		p, err := semaphore.Resolve(ctx, ex, driver.Limit{Key: k.key}, k.queue, now)
		if err != nil {
			return promoted, err
		}
		promoted.Add(p)
	}
	return promoted, nil
}

// maxUnadapt bounds the lowered keys unadaptQueues reads.
const maxUnadapt = 10000

// unadaptQueues restores the own limits of the keys lowered under the
// queues' policies, which stop adapting (Adaptive removed, or the policy
// deleted): with no policy counting their completions, nothing would
// raise them again. A lowered key whose newest waiting or running job
// is of one of the queues, or that has none (an idle key, whose queue
// no job says), has its adaptive row deleted under its lock and its
// limit resolved, promoting what the raise lets in; a key whose kind
// adapts itself starts again from its own limit. It returns what the
// raises promoted.
func (c *Client) unadaptQueues(ctx context.Context, ex driver.Executor, queues []string, now time.Time) (driver.Promotion, error) {
	var promoted driver.Promotion
	if len(queues) == 0 {
		return promoted, nil
	}
	lowered, err := ex.KeyAdaptList(ctx, maxUnadapt)
	if err != nil {
		return promoted, err
	}
	for _, a := range lowered { // in key order, as admission locks keys
		l, queue, ok, err := ex.JobLimitGetLatest(ctx, a.Key)
		if err != nil {
			return promoted, err
		}
		if ok && !slices.Contains(queues, queue) {
			continue
		}
		if !ok {
			l = driver.Limit{Key: a.Key}
		}
		// The semaphore's lock first, as a throttle and a recovery take it.
		if _, _, err := ex.SemaphoreLock(ctx, a.Key, queue); err != nil {
			return promoted, err
		}
		if _, err := ex.KeyAdaptDelete(ctx, a.Key); err != nil {
			return promoted, err
		}
		if !ok {
			continue // no job of the key: its next admission resolves its limit
		}
		p, err := semaphore.Resolve(ctx, ex, l, queue, now)
		if err != nil {
			return promoted, err
		}
		promoted.Add(p)
	}
	return promoted, nil
}

// rerateQueues applies a changed policy rate to the rate keys of the
// queues' jobs that leave their rate to the policy, in key order, as
// SetKeyRate applies an override (an override still beats it), and
// returns what raised rates made ready.
func (c *Client) rerateQueues(ctx context.Context, ex driver.Executor, policies []driver.Policy, now time.Time) (driver.Promotion, error) {
	var promoted driver.Promotion
	var specs []driver.RateSpec
	for _, p := range policies {
		ks, err := ex.PolicyListRateKeys(ctx, p.Queue)
		if err != nil {
			return promoted, err
		}
		for _, k := range ks {
			specs = append(specs, driver.RateSpec{Key: k, Limit: p.MaxStartsPerKey, Period: p.StartsPeriod})
		}
	}
	slices.SortFunc(specs, func(a, b driver.RateSpec) int { return strings.Compare(a.Key, b.Key) })
	for i, s := range specs {
		if i > 0 && specs[i-1].Key == s.Key {
			continue // a key of two queues: the first policy's, until a job's own admission
		}
		p, err := lifecycle.ApplyRate(ctx, ex, s, now)
		if err != nil {
			return promoted, err
		}
		promoted.Add(p)
	}
	return promoted, nil
}

func validatePolicies(namespace string, policies []Policy) error {
	var errs []error
	if namespace == "" {
		errs = append(errs, errors.New("the namespace is empty: name the owner of these policies, e.g. the service that syncs them"))
	}
	seen := map[string]bool{}
	for _, p := range policies {
		if seen[p.Queue] {
			errs = append(errs, fmt.Errorf("queue %q has two policies: give each queue one", p.Queue))
		}
		seen[p.Queue] = true
		if err := validateQueue(p.Queue); err != nil {
			errs = append(errs, fmt.Errorf("Policy.Queue: %w", err))
		}
		if p.MaxActive < 0 || p.MaxActivePerKey < 0 || p.MaxBlocked < 0 {
			errs = append(errs, fmt.Errorf("queue %q: MaxActive %d, MaxActivePerKey %d, MaxBlocked %d: use 0 (no limit) or more",
				p.Queue, p.MaxActive, p.MaxActivePerKey, p.MaxBlocked))
		}
		if p.KeyWeight < 0 || p.KeyWeight > MaxKeyWeight {
			errs = append(errs, fmt.Errorf("queue %q: KeyWeight %d: use 1 to %d (0 means 1)", p.Queue, p.KeyWeight, MaxKeyWeight))
		} else if p.KeyWeight > 0 && !p.FairShare {
			errs = append(errs, fmt.Errorf("queue %q: KeyWeight %d without FairShare: set FairShare too, or leave KeyWeight 0", p.Queue, p.KeyWeight))
		}
		if p.MaxWait < 0 || p.MaxWait%time.Microsecond != 0 {
			errs = append(errs, fmt.Errorf("queue %q: MaxWait %s: use a positive duration of whole microseconds (the longest a job may be expected to wait for its slot), or 0 for no bound",
				p.Queue, p.MaxWait))
		}
		if a := p.Adaptive; a != nil {
			switch {
			case a.Min < 1:
				errs = append(errs, fmt.Errorf("queue %q: Adaptive.Min %d: use 1 or more (the lowest a throttled key's limit falls to), or leave Adaptive nil for no adaptive limits",
					p.Queue, a.Min))
			case p.MaxActivePerKey > 0 && a.Min > p.MaxActivePerKey:
				errs = append(errs, fmt.Errorf("queue %q: Adaptive.Min %d is above MaxActivePerKey %d: the limit could never fall; set Min at most %d",
					p.Queue, a.Min, p.MaxActivePerKey, p.MaxActivePerKey))
			}
		}
		if p.MaxStartsPerKey != 0 || p.StartsPeriod != 0 {
			if err := validateRateNamed(fmt.Sprintf("queue %q: Policy", p.Queue), "MaxStartsPerKey", "StartsPeriod",
				p.MaxStartsPerKey, p.StartsPeriod); err != nil {
				errs = append(errs, fmt.Errorf("%w (or set MaxStartsPerKey and StartsPeriod both to 0 for no default rate)", err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return nil
}

// ListPolicies returns every stored policy, ordered by queue.
func (c *Client) ListPolicies(ctx context.Context) ([]StoredPolicy, error) {
	ps, err := c.drv.Exec().PolicyList(ctx)
	if err != nil {
		return nil, c.explainErr(ctx, err)
	}
	out := make([]StoredPolicy, len(ps))
	for i, p := range ps {
		out[i] = StoredPolicy{
			Policy: Policy{Queue: p.Queue, MaxActive: p.MaxActive, MaxActivePerKey: p.MaxActivePerKey, MaxBlocked: p.MaxBlocked,
				MaxStartsPerKey: p.MaxStartsPerKey, StartsPeriod: p.StartsPeriod, FairShare: p.FairShare, KeyWeight: p.KeyWeight,
				MaxWait: p.MaxWait},
			Namespace: p.Namespace, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt,
		}
		if p.AdaptiveMin > 0 {
			out[i].Adaptive = &Adaptive{Min: p.AdaptiveMin}
		}
	}
	return out, nil
}

// SetKeyLimit overrides the limit of one full key (see Key) at once,
// beating every job's own limit and policy: raising it promotes blocked
// jobs now; lowering it lets running jobs finish and admits no more until
// the key is under the new limit.
func (c *Client) SetKeyLimit(ctx context.Context, key string, limit int) error {
	if err := checkFullKeyArg("SetKeyLimit", key); err != nil {
		return err
	}
	if limit < 1 {
		return fmt.Errorf("%w: SetKeyLimit(%s, %d): the limit is %d: give a limit of 1 or more jobs at once per key (ClearKeyLimit removes the override)",
			ErrInvalidArgument, quoted(key), limit, limit)
	}
	var woken driver.Promotion
	err := driver.InTx(ctx, c.drv, func(ex driver.Executor) (err error) {
		now := c.cfg.Now()
		if err := ex.KeyLimitSet(ctx, key, limit, now); err != nil {
			return err
		}
		woken, err = semaphore.Resolve(ctx, ex, driver.Limit{Key: key, To: limit}, "", now)
		return err
	})
	if err != nil {
		return fmt.Errorf("set limit of key %q: %w", key, c.explainErr(ctx, err))
	}
	c.rt.ReadyAll(woken.Queues)
	return nil
}

// ClearKeyLimit removes a key's override: the key's limit is again its
// jobs' own (or their queue policy's), from now on.
func (c *Client) ClearKeyLimit(ctx context.Context, key string) error {
	if err := checkFullKeyArg("ClearKeyLimit", key); err != nil {
		return err
	}
	var woken driver.Promotion
	err := driver.InTx(ctx, c.drv, func(ex driver.Executor) error {
		woken = driver.Promotion{}
		if ok, err := ex.KeyLimitDelete(ctx, key); err != nil || !ok {
			return err
		}
		l, queue, ok, err := ex.JobLimitGetLatest(ctx, key)
		if err != nil || !ok {
			return err // no job of the key waits: its next admission resolves the limit
		}
		woken, err = semaphore.Resolve(ctx, ex, l, queue, c.cfg.Now())
		return err
	})
	if err != nil {
		return fmt.Errorf("clear limit of key %q: %w", key, c.explainErr(ctx, err))
	}
	c.rt.ReadyAll(woken.Queues)
	return nil
}

// checkKeyArg refuses a full key given to fn that no job could have.
func checkKeyArg(fn, key string) error {
	if key == "" {
		return fmt.Errorf("%w: %s: the key is empty: name a full key, bq.Key(group, key)", ErrInvalidArgument, fn)
	}
	if err := validateKey(key); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidArgument, fn, err)
	}
	return nil
}

// checkFullKeyArg is checkKeyArg for fn, which changes what the key's
// jobs see: a key without a group (a bare key, where a full one is
// wanted) is refused too, since no job holds it and the change would
// apply to nothing.
func checkFullKeyArg(fn, key string) error {
	if err := checkKeyArg(fn, key); err != nil {
		return err
	}
	if strings.IndexByte(key, '/') < 1 {
		return fmt.Errorf("%w: %s(%s): the key has no group, so no job holds it: %s takes a full key, Group + \"/\" + key, as bq status shows it: bq.Key(group, %s)",
			ErrInvalidArgument, fn, quoted(key), fn, quoted(key))
	}
	return nil
}

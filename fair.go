package bq

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/metrics"
)

// MaxKeyWeight is the largest fair-share weight of a key (SetKeyWeight,
// Policy.KeyWeight).
const MaxKeyWeight = 1000

// KeyWeight is a key's stored fair-share weight (SetKeyWeight).
type KeyWeight struct {
	Key       string
	Weight    int
	UpdatedAt time.Time
}

// SetKeyWeight sets the fair-share weight of one full key (see Key), for
// every queue whose policy has FairShare, beating the policy's KeyWeight:
// from the next claim on, the key gets weight shares of those queues'
// slots for each share of a key of weight 1. Its limit (To) still caps
// it.
func (c *Client) SetKeyWeight(ctx context.Context, key string, weight int) error {
	if err := checkFullKeyArg("SetKeyWeight", key); err != nil {
		return err
	}
	if weight < 1 || weight > MaxKeyWeight {
		return fmt.Errorf("%w: SetKeyWeight(%s, %d): the weight is %d: give a weight of 1 to %d (ClearKeyWeight goes back to the policy's)",
			ErrInvalidArgument, quoted(key), weight, weight, MaxKeyWeight)
	}
	if err := c.drv.Exec().KeyWeightSet(ctx, key, weight, c.cfg.Now()); err != nil {
		return fmt.Errorf("set weight of key %q: %w", key, c.explainErr(ctx, err))
	}
	return nil
}

// ClearKeyWeight removes a key's weight: it weighs its queue policy's
// KeyWeight again (1 if none) from the next claim on.
func (c *Client) ClearKeyWeight(ctx context.Context, key string) error {
	if err := checkFullKeyArg("ClearKeyWeight", key); err != nil {
		return err
	}
	if _, err := c.drv.Exec().KeyWeightDelete(ctx, key); err != nil {
		return fmt.Errorf("clear weight of key %q: %w", key, c.explainErr(ctx, err))
	}
	return nil
}

// KeyWeights returns every key's stored weight, ordered by key.
func (c *Client) KeyWeights(ctx context.Context) ([]KeyWeight, error) {
	ws, err := c.drv.Exec().KeyWeightList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list key weights: %w", c.explainErr(ctx, err))
	}
	out := make([]KeyWeight, len(ws))
	for i, w := range ws {
		out[i] = KeyWeight{Key: w.Key, Weight: w.Weight, UpdatedAt: w.UpdatedAt}
	}
	return out, nil
}

// KeyShare is one key's part of a fair-share queue (FairShareHealth).
type KeyShare struct {
	// Key is the full key; "" stands for the queue's jobs with no key,
	// which share as one key.
	Key string `json:"key"`
	// Weight is the key's weight: its own (SetKeyWeight), else its queue
	// policy's KeyWeight, else 1.
	Weight int `json:"weight"`
	// Running is the slots its running jobs take (JobOptions.Slots: a
	// job of k slots counts k, as against the queue's MaxActive).
	Running int `json:"running"`
	Ready   int `json:"ready"`
	// Share is the key's part of the queue's capacity by weight among the
	// keys with jobs ready or running: capacity x Weight / their total
	// weight. The capacity is the queue's MaxActive, else the jobs it runs
	// now (the slots of its workers are not stored).
	Share float64 `json:"share"`
}

// maxShares bounds the keys QueueHealth.Shares lists.
const maxShares = 100

// fairShares reads a fair-share queue's keys with their shares, the
// furthest below its share first, at most max; capacity is what the
// shares divide.
func (c *Client) fairShares(ctx context.Context, p driver.Policy, max int) (shares []KeyShare, capacity int, err error) {
	view, err := c.drv.Exec().ReadyByKey(ctx, driver.KeyViewParams{Queue: p.Queue})
	if err != nil {
		return nil, 0, err
	}
	keys := view.Keys
	stored, err := c.drv.Exec().KeyWeightList(ctx)
	if err != nil {
		return nil, 0, err
	}
	own := make(map[string]int, len(stored))
	for _, w := range stored {
		own[w.Key] = w.Weight
	}
	total, running := 0, 0
	for _, k := range keys {
		w := cmp.Or(own[k.Key], p.KeyWeight, 1)
		shares = append(shares, KeyShare{Key: k.Key, Weight: w, Running: k.Running, Ready: k.Ready})
		total += w
		running += k.Running
	}
	capacity = cmp.Or(p.MaxActive, running)
	for i := range shares {
		shares[i].Share = float64(capacity) * float64(shares[i].Weight) / float64(total)
	}
	slices.SortStableFunc(shares, func(a, b KeyShare) int {
		return cmp.Compare(float64(a.Running)-a.Share, float64(b.Running)-b.Share)
	})
	if len(shares) > max {
		shares = shares[:max]
	}
	return shares, capacity, nil
}

// fairHealth fills the fair-share queues' shares into h.
func (c *Client) fairHealth(ctx context.Context, h *Health) error {
	policies, err := c.drv.Exec().PolicyList(ctx)
	if err != nil {
		return err
	}
	for _, p := range policies {
		if !p.FairShare {
			continue
		}
		i := slices.IndexFunc(h.Queues, func(q QueueHealth) bool { return q.Queue == p.Queue })
		if i < 0 {
			continue // no live jobs
		}
		h.Queues[i].FairShare = true
		f := FairShareHealth{Queue: p.Queue}
		if f.Keys, f.Capacity, err = c.fairShares(ctx, p, maxShares); err != nil {
			return err
		}
		h.FairShares = append(h.FairShares, f)
	}
	return nil
}

// fairWait says where a ready job of a fair-share queue stands: its
// key's running jobs against its share; "" when the queue has no
// fair-share policy.
func (c *Client) fairWait(ctx context.Context, info *JobInfo) (string, error) {
	policies, err := c.drv.Exec().PolicyList(ctx)
	if err != nil {
		return "", err
	}
	i := slices.IndexFunc(policies, func(p driver.Policy) bool { return p.Queue == info.Queue && p.FairShare })
	if i < 0 {
		return "", nil
	}
	shares, capacity, err := c.fairShares(ctx, policies[i], math.MaxInt)
	if err != nil {
		return "", err
	}
	j := slices.IndexFunc(shares, func(s KeyShare) bool { return s.Key == info.Key })
	if j < 0 {
		return "", nil
	}
	s := shares[j]
	key := fmt.Sprintf("key %q", s.Key)
	if s.Key == "" {
		key = "the queue's jobs with no key"
	}
	return fmt.Sprintf(" Queue %q shares its slots fairly: %s runs %d, its share is %.1f of %d (weight %d among %d keys with work); each claim takes the key furthest below its share first.",
		info.Queue, key, s.Running, s.Share, capacity, s.Weight, len(shares)), nil
}

// fairGauges reads each fair-share queue's keys with work and Jain's
// index of their running jobs against their shares (Share), for the
// gauges; no key is named.
func (c *Client) fairGauges(ctx context.Context) ([]metrics.FairQueue, error) {
	policies, err := c.drv.Exec().PolicyList(ctx)
	if err != nil {
		return nil, err
	}
	var out []metrics.FairQueue
	for _, p := range policies {
		if !p.FairShare {
			continue
		}
		shares, _, err := c.fairShares(ctx, p, math.MaxInt)
		if err != nil {
			return nil, err
		}
		out = append(out, metrics.FairQueue{Queue: p.Queue, Keys: len(shares), Index: jain(shares)})
	}
	return out, nil
}

// jain is Jain's fairness index of the keys' running jobs against their
// shares: (sum x)^2 / (n sum x^2) with x = running / share; 1 with no
// key running.
func jain(shares []KeyShare) float64 {
	var sum, squares float64
	for _, s := range shares {
		if s.Share <= 0 {
			continue
		}
		x := float64(s.Running) / s.Share
		sum += x
		squares += x * x
	}
	if squares == 0 {
		return 1
	}
	return sum * sum / (float64(len(shares)) * squares)
}

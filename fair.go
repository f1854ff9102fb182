package bq

import (
	"context"
	"fmt"
	"time"
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

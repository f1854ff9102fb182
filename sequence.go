package bq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// sequenceProblems refuses a Concurrency.Sequence that cannot keep its
// promise: a sequence runs its key's jobs one at a time, in enqueue order,
// and a failing job keeps its key's slot through its retries, so it is a
// limit of 1 on a job's one key, whose jobs wait their turn (Block).
func sequenceProblems[A any](c *Concurrency[A], more []Concurrency[A]) []error {
	var errs []error
	for i, m := range more {
		if m.Sequence || m.SequenceHaltOnFailure {
			errs = append(errs, fmt.Errorf("MoreConcurrency[%d] sets Sequence: a sequence is a job's one key; set Sequence on Concurrency and drop the further keys", i))
		}
	}
	if c != nil && c.SequenceHaltOnFailure && !c.Sequence {
		errs = append(errs, errors.New("Concurrency.SequenceHaltOnFailure without Sequence: it halts a sequence after a failure; set Sequence too, or drop it"))
	}
	if c == nil || !c.Sequence {
		return errs
	}
	if c.To > 1 {
		errs = append(errs, fmt.Errorf("Concurrency.Sequence with To %d: a sequence runs its key's jobs one at a time; set To to 1 (or leave it 0), or drop Sequence to let %d run at once", c.To, c.To))
	}
	if c.OnConflict != Block {
		errs = append(errs, fmt.Errorf("Concurrency.Sequence with OnConflict %s: a sequence's jobs wait their turn; use bq.Block (the default), or drop Sequence", c.OnConflict))
	}
	if c.Debounce != 0 {
		errs = append(errs, errors.New("Concurrency.Sequence with Debounce: a sequence runs every job of its key in order, a debounce only the last of a burst; drop one of them"))
	}
	if len(more) > 0 {
		errs = append(errs, errors.New("Concurrency.Sequence with MoreConcurrency: a sequence is a job's one key; drop the further keys or Sequence"))
	}
	return errs
}

// sequenceKeyProblem refuses a per-enqueue key that would break the
// definition's sequence (Concurrency.Sequence): a limit above 1, a
// conflict other than Block, or further keys.
func sequenceKeyProblem(key string, to int, onConflict *OnConflict, more bool) error {
	switch {
	case to > 1:
		return fmt.Errorf("%w: WithConcurrencyKey(%s, %d) on a job whose Concurrency.Sequence is set: a sequence runs its key's jobs one at a time; pass a limit of 1 (or 0), or define the job without Sequence", ErrInvalidJob, quoted(key), to)
	case onConflict != nil && *onConflict != Block:
		return fmt.Errorf("%w: WithConcurrencyKey(%s) with OnConflict %s on a job whose Concurrency.Sequence is set: a sequence's jobs wait their turn; use bq.Block, or define the job without Sequence", ErrInvalidJob, quoted(key), *onConflict)
	case more:
		return fmt.Errorf("%w: WithMoreConcurrencyKeys on a job whose Concurrency.Sequence is set: a sequence is a job's one key; drop the further keys", ErrInvalidJob)
	}
	return nil
}

// sequenceSummary says what a blocked job of a sequence waits for when its
// key's holder is a job scheduled for a retry keeping its place: "Waiting
// for job 41 of the sequence, attempt 3 of 25, retrying at …", or a
// failed job halting it. Otherwise it returns summary unchanged.
func (c *Client) sequenceSummary(ctx context.Context, k *KeyState, ahead int, summary string, now time.Time) (string, error) {
	i := slices.IndexFunc(k.Holders, func(h Holder) bool { return h.State == StateScheduled || h.State == StateFailed })
	if i < 0 {
		return summary, nil
	}
	info, ok, err := c.drv.Exec().JobGet(ctx, k.Holders[i].JobID)
	if err != nil {
		return "", fmt.Errorf("read the holder of %q: %w", k.Key, err)
	}
	switch {
	case !ok || !info.SlotHeld:
		return summary, nil // it moved on meanwhile
	case info.State == driver.StateFailed:
		return fmt.Sprintf("Waiting for job %d of the sequence, which failed for good (attempt %d of %d) and halts the sequence of key %q: "+
			"retry it (bq retry, Client.RetryFailed) to run it again first, or discard it (bq discard, Client.DiscardFailed) to go on; %s.",
			info.ID, info.Attempt, info.MaxAttempts, k.Key, aheadOf(ahead)), nil
	case info.State != driver.StateScheduled:
		return summary, nil
	}
	retry := "retrying"
	if info.LastError == "" {
		retry = "snoozed until" // no attempt failed: it snoozed
	}
	return fmt.Sprintf("Waiting for job %d of the sequence, attempt %d of %d, %s at %s: the sequence of key %q keeps a failing job's place through its retries; %s.",
		info.ID, info.Attempt+1, info.MaxAttempts, retry, when(info.ScheduledAt, now), k.Key, aheadOf(ahead)), nil
}

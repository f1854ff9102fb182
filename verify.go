package bq

import (
	"context"
	"fmt"

	"github.com/bqueue/bq/internal/verify"
)

// DriftKind names the invariant a Drift breaks.
type DriftKind string

const (
	// DriftFree: a semaphore's free value is not its limit minus the
	// holders of its key (its ready, running and rate-waiting jobs).
	DriftFree DriftKind = "free"
	// DriftBlocked: a semaphore's count of blocked jobs (or of blocked
	// multi-key jobs) is not the number of jobs in its key's line.
	DriftBlocked DriftKind = "blocked"
	// DriftStuck: a key has a free slot while single-key jobs wait in
	// its line, which a release or the dispatcher promotes at once.
	DriftStuck DriftKind = "stuck"
	// DriftUnreaped: a claim of a process silent past ProcessDeadAfter,
	// which the dispatcher has not reaped yet (none runs, or it is
	// behind).
	DriftUnreaped DriftKind = "unreaped"
	// DriftStranded: an unfinished job in no state table (nothing will
	// run it) or in several. Repair leaves it to a person (bq retry, bq
	// cancel): which state is right cannot be told from the rows.
	DriftStranded DriftKind = "stranded"
)

// Drift is one place where the stored rows break an invariant of bq's
// design (docs/concurrency.md, "Verifying the invariants").
type Drift struct {
	Kind DriftKind `json:"kind"`
	// Key is the concurrency key of a semaphore's drift; JobID the job
	// of an unreaped claim.
	Key   string `json:"key,omitzero"`
	JobID int64  `json:"job_id,omitzero"`
	// Detail says what the rows hold against what they should, e.g.
	// "free 3, want 1 (limit 5, 4 holders)".
	Detail string `json:"detail"`
	// Repaired: VerifyOptions.Repair mended it.
	Repaired bool `json:"repaired,omitzero"`
}

// VerifyOptions tunes Client.Verify.
type VerifyOptions struct {
	// Repair mends what it finds under the locks the engine itself takes:
	// a drifted semaphore is recounted from its key's rows (and its free
	// slots go to its line, as a release does); unreaped claims are
	// reaped by one dispatcher pass. Without it, Verify only reads.
	Repair bool
}

// VerifyReport is what Client.Verify checked and found.
type VerifyReport struct {
	// Semaphores is how many keys' semaphores were checked.
	Semaphores int `json:"semaphores"`
	// Drift lists every breach found: semaphores in key order, then
	// stranded jobs and unreaped claims by job id; empty when the rows
	// are consistent.
	Drift []Drift `json:"drift"`
}

// Unrepaired counts the drift that is still there.
func (r *VerifyReport) Unrepaired() int {
	n := 0
	for _, d := range r.Drift {
		if !d.Repaired {
			n++
		}
	}
	return n
}

// Verify checks the stored rows against the invariants the engine keeps
// (each semaphore's free value is its limit minus its holders, its
// blocked count is its line's length, no key has a free slot while its
// line waits, every unfinished job is in exactly one state, no claim of a
// dead process is left unreaped), one key at a time under that key's own
// lock, so it can run beside a working fleet.
// With Repair it also mends what it finds. It never changes a consistent
// row.
func (c *Client) Verify(ctx context.Context, o VerifyOptions) (*VerifyReport, error) {
	r, err := verify.Run(ctx, c.drv, verify.Options{
		Repair: o.Repair, Now: c.cfg.Now, DeadAfter: c.cfg.ProcessDeadAfter,
		Reap: func(ctx context.Context) error { return c.rt.DispatchOnce(ctx) },
	})
	if err != nil {
		return nil, fmt.Errorf("bq.Verify: %w", err)
	}
	out := &VerifyReport{Semaphores: r.Semaphores, Drift: []Drift{}}
	for _, d := range r.Drift {
		out.Drift = append(out.Drift, Drift{Kind: DriftKind(d.Kind), Key: d.Key, JobID: d.JobID, Detail: d.Detail, Repaired: d.Repaired})
	}
	return out, nil
}

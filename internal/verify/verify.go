// Package verify checks the stored rows against the invariants the
// engine keeps, and mends what drifted under the locks the engine itself
// takes (bq verify, Client.Verify).
package verify

import (
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/semaphore"
)

// Kinds of drift (bq.DriftKind).
const (
	Free     = "free"
	Blocked  = "blocked"
	Stuck    = "stuck"
	Unreaped = "unreaped"
	Stranded = "stranded"
)

// Drift is one breach found.
type Drift struct {
	Kind     string
	Key      string
	JobID    int64
	Detail   string
	Repaired bool
}

// Report is what Run checked and found.
type Report struct {
	Semaphores int
	Drift      []Drift
}

// Options tunes Run.
type Options struct {
	// Repair mends what is found: a drifted semaphore is recounted under
	// its lock (semaphore.Reclaim, which also promotes into its free
	// slots); unreaped claims are left to Reap.
	Repair bool
	Now    func() time.Time
	// DeadAfter is the silence after which a process is dead.
	DeadAfter time.Duration
	// Reap runs one dispatcher pass, which reaps the claims of dead
	// processes (Repair only).
	Reap func(ctx context.Context) error
}

// page is how many keys one listing reads.
const page = 500

// maxUnreaped bounds the unreaped claims reported.
const maxUnreaped = 1000

// Run checks every semaphore, one key per transaction under the key's
// own lock (so a release or admission in flight is never read half
// done), then the claims of dead processes.
func Run(ctx context.Context, drv driver.Driver, o Options) (Report, error) {
	var r Report
	after := ""
	for {
		keys, err := drv.Exec().SemaphoreList(ctx, after, page)
		if err != nil {
			return r, err
		}
		for _, key := range keys {
			found, err := checkKey(ctx, drv, key, o)
			if err != nil {
				return r, fmt.Errorf("verify the semaphore of %q: %w", key, err)
			}
			r.Semaphores++
			r.Drift = append(r.Drift, found...)
		}
		if len(keys) < page {
			break
		}
		after = keys[len(keys)-1]
	}
	stranded, err := strandedJobs(ctx, drv)
	if err != nil {
		return r, err
	}
	r.Drift = append(r.Drift, stranded...)
	claims, err := unreaped(ctx, drv, o)
	if err != nil {
		return r, err
	}
	if len(claims) > 0 && o.Repair && o.Reap != nil {
		if err := o.Reap(ctx); err != nil {
			return r, fmt.Errorf("reap the claims of dead processes: %w", err)
		}
		left, err := unreaped(ctx, drv, o)
		if err != nil {
			return r, err
		}
		still := map[int64]bool{}
		for _, d := range left {
			still[d.JobID] = true
		}
		for i := range claims {
			claims[i].Repaired = !still[claims[i].JobID]
		}
	}
	r.Drift = append(r.Drift, claims...)
	return r, nil
}

// checkKey compares key's semaphore with what its rows say it holds, in
// one transaction holding the semaphore's lock, and with Repair recounts
// it there.
func checkKey(ctx context.Context, drv driver.Driver, key string, o Options) ([]Drift, error) {
	var found []Drift
	err := driver.InTx(ctx, drv, func(ex driver.Executor) error {
		found = nil
		row, ok, err := ex.SemaphoreLock(ctx, key, "")
		if err != nil || !ok {
			return err // deleted idle since the listing: nothing to check
		}
		n, err := ex.HolderCount(ctx, key)
		if err != nil {
			return err
		}
		found = compare(key, row, n)
		if len(found) == 0 || !o.Repair {
			return nil
		}
		if _, err := semaphore.Reclaim(ctx, ex, key, o.Now()); err != nil {
			return fmt.Errorf("recount: %w", err)
		}
		for i := range found {
			found[i].Repaired = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}

// compare lists how a semaphore row breaks the invariants against its
// key's rows: its free value is its limit minus its holders; its blocked
// counts are its line's; no free slot while single-key jobs wait.
func compare(key string, row driver.Semaphore, n driver.HolderCount) []Drift {
	var out []Drift
	want := row.Limit - n.Holders
	if row.Value != want {
		out = append(out, Drift{Kind: Free, Key: key,
			Detail: fmt.Sprintf("free %d, want %d (limit %d, %d holders)", row.Value, want, row.Limit, n.Holders)})
	}
	if row.Blocked != n.Blocked || row.Multi != n.Multi {
		out = append(out, Drift{Kind: Blocked, Key: key,
			Detail: fmt.Sprintf("blocked %d (multi-key %d), want %d (%d) as in its line", row.Blocked, row.Multi, n.Blocked, n.Multi)})
	}
	// A line holding multi-key jobs waits on their other keys too, and one
	// holding a job of several slots may have fewer free than its head needs.
	if want > 0 && n.Blocked > 0 && n.Multi == 0 {
		out = append(out, Drift{Kind: Stuck, Key: key,
			Detail: fmt.Sprintf("%d free slots while %d jobs wait in its line", want, n.Blocked)})
	}
	return out
}

// unreaped lists the claims of dead processes the dispatcher has not
// reaped.
func unreaped(ctx context.Context, drv driver.Driver, o Options) ([]Drift, error) {
	var claims []*driver.Claim
	err := driver.Atomic(ctx, drv, func(ex driver.Executor) (err error) {
		claims, err = ex.ClaimListReapable(ctx, o.Now(), o.DeadAfter, maxUnreaped)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list the claims of dead processes: %w", err)
	}
	out := make([]Drift, 0, len(claims))
	for _, c := range claims {
		out = append(out, Drift{Kind: Unreaped, JobID: c.ID, Key: c.Limit.Key,
			Detail: fmt.Sprintf("claimed %s by a process silent past %s", c.ClaimedAt.UTC().Format(time.RFC3339), o.DeadAfter)})
	}
	return out, nil
}

// maxStranded bounds the stranded jobs reported.
const maxStranded = 1000

// strandedJobs lists the unfinished jobs in no state (nothing will ever
// run them) or in several. Repair leaves them: which state is right is
// for a person to say (bq retry, bq cancel).
func strandedJobs(ctx context.Context, drv driver.Driver) ([]Drift, error) {
	var out []Drift
	for after := int64(0); len(out) < maxStranded; {
		jobs, err := drv.Exec().JobListStranded(ctx, after, page)
		if err != nil {
			return nil, err
		}
		for _, j := range jobs {
			detail := "unfinished, in no state (ready, blocked, scheduled, running or failed): nothing will run it"
			if j.StateRows > 1 {
				detail = fmt.Sprintf("in %d states at once (ready, blocked, scheduled, running, failed)", j.StateRows)
			}
			out = append(out, Drift{Kind: Stranded, JobID: j.ID, Detail: detail})
		}
		if len(jobs) < page {
			break
		}
		after = jobs[len(jobs)-1].ID
	}
	return out, nil
}

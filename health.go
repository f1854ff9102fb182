package bq

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/metrics"
	"github.com/bqueue/bq/internal/verify"
)

// Bounds of a Health report: its size never grows with the number of
// keys or processes.
const (
	defaultTopKeys = 10
	maxTopKeys     = 100
	maxGroups      = 100
	maxProcesses   = 100
)

// HealthOptions tunes a Health report. Zero values take the defaults.
type HealthOptions struct {
	// TopKeys is how many keys with blocked jobs to list, most blocked
	// first. Default 10, at most 100.
	TopKeys int
}

// Health answers "what is waiting, on what, and why" for the whole
// database: every queue, every limit group, the most blocked keys and the
// registered processes. Its figures are read one query after another, not
// in one snapshot.
type Health struct {
	At     time.Time     `json:"at"`
	Queues []QueueHealth `json:"queues"`
	Groups []GroupHealth `json:"groups"`
	// Rates sums the rate keys of each group (see Rate).
	Rates     []RateGroupHealth `json:"rates"`
	TopKeys   []KeyHealth       `json:"top_keys"`
	Processes []ProcessHealth   `json:"processes"`
	// FairShares lists the keys of each fair-share queue with live jobs.
	FairShares []FairShareHealth `json:"fair_shares,omitempty"`
	// PausedKeys lists the keys PauseKey stopped, ordered by key: their
	// jobs wait, ready or blocked, until ResumeKey.
	PausedKeys []PausedKey `json:"paused_keys,omitempty"`
	// AdaptedKeys lists up to 100 keys whose adaptive limit throttles
	// lowered (bq.Adaptive), ordered by key, the rate keys whose
	// adaptive rate they lowered (Rate.Adaptive, marked Rate) first.
	AdaptedKeys []AdaptedKey `json:"adapted_keys,omitempty"`
	// Periodic lists the schedules the fleet runs (Config.Periodic):
	// next tick, last tick and its job.
	Periodic []PeriodicStatus `json:"periodic"`
	// InboxPending counts the jobs clients in other languages wrote to
	// the inbox that no process has decided yet (docs/clients.md): a
	// count that stays up means no running process defines their kinds.
	InboxPending int `json:"inbox_pending"`
	// Truncated: there were more groups or processes than a report holds
	// (100 each); the rest are left out.
	Truncated bool `json:"truncated,omitzero"`
}

// QueueHealth counts one queue's live jobs by state.
type QueueHealth struct {
	Queue     string `json:"queue"`
	Ready     int    `json:"ready"`
	Running   int    `json:"running"`
	Scheduled int    `json:"scheduled"`
	Blocked   int    `json:"blocked"`
	Failed    int    `json:"failed"`
	// Waiting: jobs waiting for the jobs they depend on (DependsOn).
	Waiting int `json:"waiting"`
	// OldestReadyAge is how long the oldest ready job has waited for a
	// worker since it became ready; 0 with none ready.
	OldestReadyAge time.Duration `json:"oldest_ready_age_ns"`
	// Paused: PauseQueue stopped its claims; its ready jobs wait.
	Paused bool `json:"paused,omitzero"`
	// FairShare: the queue's policy shares its slots among its keys
	// (Policy.FairShare); Health.FairShares lists them.
	FairShare bool `json:"fair_share,omitzero"`
}

// FairShareHealth is a fair-share queue's keys with work, the furthest
// below its share first (at most 100), and the Capacity their shares
// divide (KeyShare.Share).
type FairShareHealth struct {
	Queue    string     `json:"queue"`
	Capacity int        `json:"capacity"`
	Keys     []KeyShare `json:"keys"`
}

// GroupHealth sums one limit group's keys. A group is the part of a full
// key before its first "/": the Group of a Concurrency spec, which
// defaults to the job's name.
type GroupHealth struct {
	Group string `json:"group"`
	// Keys counts the group's keys that have a semaphore (keys in use).
	Keys int `json:"keys"`
	// MinLimit and MaxLimit bound its keys' limits; they differ when
	// enqueues pass limits of their own (WithConcurrencyKey).
	MinLimit int `json:"min_limit"`
	MaxLimit int `json:"max_limit"`
	// Active counts the slots held: ready and running jobs of its keys.
	Active int `json:"active"`
	// Blocked counts jobs waiting for a slot of one of its keys.
	Blocked int `json:"blocked"`
	// Saturated counts its keys with no free slot.
	Saturated int `json:"saturated_keys"`
}

// RateGroupHealth sums one group's rate keys (see Rate).
type RateGroupHealth struct {
	Group string `json:"group"`
	// Keys counts the group's rate keys stored (in use or lately).
	Keys int `json:"keys"`
	// Waiting counts jobs waiting for a start of one of its keys;
	// Throttled the keys with any.
	Waiting   int `json:"waiting"`
	Throttled int `json:"throttled_keys"`
}

// Limits is the group's limit, or its range when keys differ: "2", "1-5".
func (g GroupHealth) Limits() string {
	if g.MinLimit == g.MaxLimit {
		return strconv.Itoa(g.MinLimit)
	}
	return fmt.Sprintf("%d-%d", g.MinLimit, g.MaxLimit)
}

// KeyHealth is one concurrency key with jobs waiting for it.
type KeyHealth struct {
	Key   string `json:"key"`
	Group string `json:"group"`
	Limit int    `json:"limit"`
	// Holders counts the slots taken (ready and running jobs).
	Holders int `json:"holders"`
	Free    int `json:"free"`
	Blocked int `json:"blocked"`
	// ReleaseInterval is the key's recent release interval (see
	// KeyState.ReleaseInterval): its line of Blocked jobs is expected to
	// clear in Blocked × ReleaseInterval. 0 until one was measured.
	ReleaseInterval time.Duration `json:"release_interval,omitzero"`
}

// ProcessHealth is one registered worker or dispatcher process.
type ProcessHealth struct {
	ID            int64     `json:"id"`
	Kind          string    `json:"kind"`
	Name          string    `json:"name"`
	Hostname      string    `json:"hostname"`
	PID           int       `json:"pid"`
	Queues        []string  `json:"queues"`
	StartedAt     time.Time `json:"started_at"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	// Alive: it heartbeat recently enough not to be reaped.
	Alive bool `json:"alive"`
}

// Health reports the state of every queue, limit group and process.
func (c *Client) Health(ctx context.Context, opts HealthOptions) (*Health, error) {
	top := min(max(cmp.Or(opts.TopKeys, defaultTopKeys), 1), maxTopKeys)
	h, err := c.health(ctx, top)
	if err != nil {
		return nil, fmt.Errorf("health: %w", c.explainErr(ctx, err))
	}
	return h, nil
}

func (c *Client) health(ctx context.Context, top int) (*Health, error) {
	ex := c.drv.Exec()
	now := c.cfg.Now()
	h := &Health{At: now, Queues: []QueueHealth{}, Groups: []GroupHealth{}, TopKeys: []KeyHealth{}, Processes: []ProcessHealth{}}
	counts, paused, err := queueCounts(ctx, ex)
	if err != nil {
		return nil, err
	}
	ages, err := ex.ReadyListAges(ctx)
	if err != nil {
		return nil, err
	}
	oldest := map[string]time.Time{}
	for _, a := range ages {
		oldest[a.Queue] = a.OldestReady
	}
	for _, q := range counts {
		qh := QueueHealth{Queue: q.Queue, Ready: q.Ready, Running: q.Running, Scheduled: q.Scheduled,
			Blocked: q.Blocked, Failed: q.Failed, Waiting: q.Waiting, Paused: paused[q.Queue]}
		if t, ok := oldest[q.Queue]; ok && q.Ready > 0 {
			qh.OldestReadyAge = max(now.Sub(t), 0)
		}
		h.Queues = append(h.Queues, qh)
	}
	if err := c.fairHealth(ctx, h); err != nil {
		return nil, err
	}
	groups, err := ex.GroupListStats(ctx, maxGroups+1)
	if err != nil {
		return nil, err
	}
	for _, g := range cut(h, groups, maxGroups) {
		h.Groups = append(h.Groups, GroupHealth(g))
	}
	rates, err := ex.RateListGroups(ctx, maxGroups+1)
	if err != nil {
		return nil, err
	}
	for _, g := range cut(h, rates, maxGroups) {
		h.Rates = append(h.Rates, RateGroupHealth(g))
	}
	keys, err := ex.SemaphoreListMostBlocked(ctx, top)
	if err != nil {
		return nil, err
	}
	for _, s := range keys {
		h.TopKeys = append(h.TopKeys, keyHealth(s))
	}
	pausedKeys, err := ex.KeyListPaused(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range pausedKeys {
		h.PausedKeys = append(h.PausedKeys, PausedKey(p))
	}
	adapted, err := ex.KeyAdaptList(ctx, maxAdaptedKeys+1)
	if err != nil {
		return nil, err
	}
	for _, a := range cut(h, adapted, maxAdaptedKeys) {
		h.AdaptedKeys = append(h.AdaptedKeys, adaptedKey(a))
	}
	procs, err := ex.ProcessList(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range cut(h, procs, maxProcesses) {
		h.Processes = append(h.Processes, c.processHealth(p, now))
	}
	periodic, err := ex.PeriodicList(ctx)
	if err != nil {
		return nil, err
	}
	if h.Periodic, err = c.periodicStatus(ctx, ex, periodic, now); err != nil {
		return nil, err
	}
	if h.InboxPending, err = ex.InboxCountPending(ctx); err != nil {
		return nil, err
	}
	return h, nil
}

// cut keeps the first max of rows (read with one more, to know), and
// marks the report truncated when there were more.
func cut[T any](h *Health, rows []T, max int) []T {
	if len(rows) > max {
		h.Truncated = true
		return rows[:max]
	}
	return rows
}

func keyHealth(s driver.Semaphore) KeyHealth {
	return KeyHealth{Key: s.Key, Group: driver.GroupOf(s.Key), Limit: s.Limit,
		Holders: s.Limit - s.Value, Free: max(s.Value, 0), Blocked: s.Blocked, ReleaseInterval: s.Interval}
}

func (c *Client) processHealth(p driver.Process, now time.Time) ProcessHealth {
	var queues []string
	if p.Queues != "" {
		queues = strings.Split(p.Queues, ",")
	}
	return ProcessHealth{ID: p.ID, Kind: p.Kind, Name: p.Name, Hostname: p.Hostname, PID: p.PID,
		Queues: queues, StartedAt: p.StartedAt, LastHeartbeat: p.LastHeartbeatAt,
		Alive: c.alive(p.LastHeartbeatAt, p.HeartbeatInterval, now)}
}

// alive tells whether a process that last beat at `beat` looks alive: it
// has not been silent long enough for the reaper (ProcessDeadAfter, or
// two of its own heartbeat intervals when those are longer).
func (c *Client) alive(beat time.Time, interval time.Duration, now time.Time) bool {
	return !beat.IsZero() && now.Sub(beat) < max(c.cfg.ProcessDeadAfter, 2*interval)
}

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

// The wiring of bq's metrics: internal/metrics holds the instruments,
// docs/observability.md describes them.

// maxAdaptedGauge bounds the adapted keys a collection reads.
const maxAdaptedGauge = 10000

// gaugeSnapshot feeds the observable gauges: three aggregate queries per
// collection, bounded by the number of queues and groups.
func (c *Client) gaugeSnapshot(ctx context.Context) (metrics.Snapshot, error) {
	ex := c.drv.Exec()
	queues, err := ex.JobCountByQueue(ctx)
	if err != nil {
		return metrics.Snapshot{}, fmt.Errorf("bq gauges: %w", err)
	}
	groups, err := ex.GroupListStats(ctx, maxGroups)
	if err != nil {
		return metrics.Snapshot{}, fmt.Errorf("bq gauges: %w", err)
	}
	rates, err := ex.RateListGroups(ctx, maxGroups)
	if err != nil {
		return metrics.Snapshot{}, fmt.Errorf("bq gauges: %w", err)
	}
	fair, err := c.fairGauges(ctx)
	if err != nil {
		return metrics.Snapshot{}, fmt.Errorf("bq gauges: %w", err)
	}
	adapted, err := ex.KeyAdaptList(ctx, maxAdaptedGauge)
	if err != nil {
		return metrics.Snapshot{}, fmt.Errorf("bq gauges: %w", err)
	}
	byGroup, byRateGroup := map[string]int{}, map[string]int{}
	for _, a := range adapted {
		if k := adaptedKey(a); k.Rate {
			byRateGroup[driver.GroupOf(k.Key)]++
		} else {
			byGroup[driver.GroupOf(k.Key)]++
		}
	}
	return metrics.Snapshot{Queues: queues, Groups: groups, Rates: rates, Fair: fair, Adapted: byGroup, AdaptedRates: byRateGroup}, nil
}

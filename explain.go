package bq

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/humanize"
)

// Explanation says where a job is and why, with what would move it on.
// Its figures are read one query after another, not in one snapshot.
type Explanation struct {
	Job *JobInfo `json:"job"`
	// Summary is one or two sentences for a person.
	Summary string `json:"summary"`
	// Since is when the job entered its state (ready, blocked, running,
	// failed); zero otherwise.
	Since time.Time `json:"since,omitzero"`
	// DueAt: a scheduled job's due time.
	DueAt time.Time `json:"due_at,omitzero"`
	// CancelRequestedAt: when a cancel (Client.Cancel) asked a running
	// job to stop; zero when none did.
	CancelRequestedAt time.Time `json:"cancel_requested_at,omitzero"`
	// The process running a running job.
	ProcessID    int64  `json:"process_id,omitzero"`
	ProcessName  string `json:"process_name,omitzero"`
	ProcessAlive bool   `json:"process_alive,omitzero"`
	// Token is a running job's fencing token (the JobMeta.Token of its
	// run): the largest a downstream should have accepted from it.
	Token int64 `json:"token,omitzero"`
	// Key is the state of a blocked job's concurrency key.
	Key *KeyState `json:"key,omitempty"`
	// Rate is the state of the rate key a blocked job waits for a start
	// of (it waits in that key's line, not its concurrency key's).
	Rate *RateState `json:"rate,omitempty"`
	// Position is a blocked job's place in its key's line, 1 for next.
	// Explain counts at most MaxCountedAhead jobs ahead: with more,
	// Position is MaxCountedAhead+1 and PositionAtLeast is set.
	Position        int  `json:"position,omitzero"`
	PositionAtLeast bool `json:"position_at_least,omitzero"`
	// ExpectedStart is when a blocked job is expected to start: now plus
	// Position times its key's release interval (Key.ReleaseInterval; see
	// docs/flow-control.md); zero when the key has none measured yet.
	ExpectedStart time.Time `json:"expected_start,omitzero"`
	// UniqueKey is the unique key of a unique job (see Unique), as
	// stored: a SHA-256 in hex; "" for a job that is not unique.
	UniqueKey string `json:"unique_key,omitempty"`
	// WaitingFor are the jobs a waiting job still waits for (DependsOn),
	// in id order; Dependencies is how many it waited for in all.
	WaitingFor   []int64 `json:"waiting_for,omitempty"`
	Dependencies int     `json:"dependencies,omitzero"`
}

// MaxCountedAhead is how many jobs ahead of a blocked job Explain counts
// at most, so that the last of a long line costs no more to explain than
// the first; a job further back is "10,001+" in line.
const MaxCountedAhead = 10000

// Place is Position for a person: "3", "10,001+"; "" for no place.
func (e *Explanation) Place() string {
	if e.Position == 0 {
		return ""
	}
	p := humanize.Thousands(e.Position)
	if e.PositionAtLeast {
		p += "+"
	}
	return p
}

// Explain reports job id's state and what it waits for: for a blocked
// job, its key's limit and free value, the jobs holding the key's slots
// and its place in line.
func (c *Client) Explain(ctx context.Context, id int64) (*Explanation, error) {
	info, err := c.Job(ctx, id)
	if err != nil {
		return nil, err
	}
	e, err := c.explain(ctx, info)
	if err != nil {
		return nil, fmt.Errorf("explain job %d: %w", id, c.explainErr(ctx, err))
	}
	return e, nil
}

func (c *Client) explain(ctx context.Context, info *JobInfo) (*Explanation, error) {
	ex := c.drv.Exec()
	e := &Explanation{Job: info}
	x, _, err := ex.ExecutionGet(ctx, info.ID)
	if err != nil {
		return nil, err
	}
	if e.UniqueKey, err = ex.UniqueGetKey(ctx, info.ID); err != nil {
		return nil, err
	}
	now := c.cfg.Now()
	var procs []driver.Process
	var paused map[string]bool
	switch info.State {
	case StateReady, StateBlocked, StateScheduled, StateRunning:
		// Who would move the job on: its queue's workers, a dispatcher;
		// what holds them back: a paused queue.
		if procs, err = ex.ProcessList(ctx); err != nil {
			return nil, err
		}
		if paused, err = pausedSet(ctx, ex); err != nil {
			return nil, err
		}
	}
	line := info.Key // the line a blocked job waits in
	if info.State == StateBlocked && (info.RateKey != "" || len(info.Keys) > 0) {
		l, ok, err := ex.LineGetKey(ctx, info.ID)
		if err != nil {
			return nil, err
		}
		if info.RateKey != "" && l == driver.RateLine(info.RateKey) {
			return e, c.explainRateWait(ctx, e, x.BlockedSince, procs, now)
		}
		if ok {
			line = l
		}
	}
	switch info.State {
	case StateBlocked:
		e.Since = x.BlockedSince
		if e.Key, err = c.keyState(ctx, line, maxLineShow); err != nil {
			return nil, err
		}
		ahead, err := ex.LineCountAhead(ctx, driver.LineAheadParams{Key: line, Priority: info.Priority, JobID: info.ID, Max: MaxCountedAhead + 1})
		if err != nil {
			return nil, err
		}
		e.place(ahead)
		e.Summary = c.blockedSummary(e.Key, ahead, procs, paused, now) + adaptedSummary(e.Key) + e.expect(now)
		if e.Summary, err = c.sequenceSummary(ctx, e.Key, ahead, e.Summary, now); err != nil {
			return nil, err
		}
		if info.Slots > 1 {
			e.Summary = heavySummary(e.Key, info.Slots, ahead, e.Summary)
		}
		if len(info.Keys) > 0 {
			e.Summary += fmt.Sprintf(" It needs %s of each of its keys %s at once, holding none meanwhile; it waits in the line of %q, the first of them with too few to give.",
				count(info.Slots, "slot"), quotedList(info.Keys), line)
		}
		if e.Summary, err = keyPausedSummary(ctx, ex, info, e.Summary, now); err != nil {
			return nil, err
		}
	case StateReady:
		e.Since = x.ReadySince
		e.Summary = fmt.Sprintf("Ready since %s: waiting for a worker of queue %q.", when(e.Since, now), info.Queue)
		if paused[info.Queue] {
			e.Summary = fmt.Sprintf("Ready since %s, in queue %q, which is paused: no process claims its jobs until it is resumed (client.ResumeQueue or `bq queue resume`).",
				when(e.Since, now), info.Queue)
		} else if !c.worksQueue(procs, info.Queue, now) {
			e.Summary += fmt.Sprintf(" No live process works queue %q: start a worker that does.", info.Queue)
		}
		if e.Summary, err = keyPausedSummary(ctx, ex, info, e.Summary, now); err != nil {
			return nil, err
		}
		fair, err := c.fairWait(ctx, info)
		if err != nil {
			return nil, err
		}
		e.Summary += fair
	case StateRunning:
		e.Since, e.ProcessID, e.ProcessName, e.Token = x.ClaimedAt, x.ProcessID, x.ProcessName, x.Fence
		e.ProcessAlive = c.alive(x.ProcessBeat, 0, now)
		e.Summary = fmt.Sprintf("Running on process %s since %s; attempt %d of %d; fencing token %d.",
			processLabel(x.ProcessID, x.ProcessName), when(e.Since, now), info.Attempts+1, info.MaxAttempts, x.Fence)
		reap := "the dispatcher will reap the claim and run the job again."
		if !x.CancelRequestedAt.IsZero() {
			e.CancelRequestedAt = x.CancelRequestedAt
			e.Summary += fmt.Sprintf(" Cancel requested at %s; the run's context is cancelled; its slot frees when the run ends (cancelled, or completed if it returns no error).",
				when(x.CancelRequestedAt, now))
			reap = "the dispatcher will reap the claim and finish the job cancelled."
		}
		if !c.dispatcherAlive(procs, now) {
			reap = "no live dispatcher is registered to reap the claim: start one (client.Run or `bq dispatcher`) and it will " +
				strings.TrimPrefix(reap, "the dispatcher will ")
		}
		switch {
		case x.ProcessBeat.IsZero():
			e.Summary += " Its process is no longer registered: " + reap
		case !e.ProcessAlive:
			e.Summary += fmt.Sprintf(" Its process's last heartbeat landed at %s: %s", when(x.ProcessBeat, now), reap)
		}
	case StateScheduled:
		e.DueAt = x.DueAt
		e.Summary = c.scheduledSummary(info, x.DueAt, procs, now)
		if info.HoldsSlot {
			e.Summary += fmt.Sprintf(" As a sequence's job it keeps key %q's slot meanwhile: the next job of the key waits for it.", info.Key)
		}
	case StateWaiting:
		w, open, _, err := ex.WaitingGet(ctx, info.ID)
		if err != nil {
			return nil, err
		}
		e.Since, e.WaitingFor, e.Dependencies = w.At, open, w.Total
		e.Summary = waitingSummary(w, open, now)
	case StateFailed:
		e.Since = x.FailedAt
		e.Summary = fmt.Sprintf("Failed at %s after %s: %s. Retry or discard it by hand.",
			when(e.Since, now), count(info.Attempts, "attempt"), firstLine(info.LastError))
		if info.HoldsSlot {
			e.Summary += fmt.Sprintf(" It halts its sequence, keeping key %q's slot: the next job of the key starts once it is retried (and done) or discarded.", info.Key)
		}
	case StateCompleted:
		e.Summary = fmt.Sprintf("Completed at %s after %s.", whenPtr(info.FinishedAt, now), count(info.Attempts, "attempt"))
	case StateDiscarded:
		e.Summary = fmt.Sprintf("Discarded at %s", whenPtr(info.FinishedAt, now))
		if info.Key != "" {
			e.Summary += fmt.Sprintf(": key %q had no free slot when it was admitted and its kind discards on conflict (or it was discarded by hand after failing).", info.Key)
		} else {
			e.Summary += " by hand after failing."
		}
	case StateCancelled:
		e.Summary = fmt.Sprintf("Cancelled at %s after %s", whenPtr(info.FinishedAt, now), count(info.Attempts, "attempt"))
		if info.LastError != "" {
			e.Summary += ": " + firstLine(info.LastError)
		}
		e.Summary += ". It will not run again."
	default:
		e.Summary = "The job is in no state table: it is being moved right now, or its rows are inconsistent."
	}
	if info.Slots > 1 && (info.State == StateReady || info.State == StateRunning) {
		e.Summary += fmt.Sprintf(" It takes %d slots of %s.", info.Slots, keysPhrase(info))
	}
	return e, nil
}

// keysPhrase names a job's concurrency keys: "key \"k\"", or "each of
// its keys \"a\", \"b\"".
func keysPhrase(info *JobInfo) string {
	if len(info.Keys) > 0 {
		return "each of its keys " + quotedList(info.Keys)
	}
	return fmt.Sprintf("key %q", info.Key)
}

// heavySummary is the summary of a blocked job of slots (more than one)
// whose line is k, ahead the jobs before it there; summary is what
// blockedSummary said, kept where it still holds. Such a job starts only
// when its slots are free at once, and the jobs behind it wait for it.
func heavySummary(k *KeyState, slots, ahead int, summary string) string {
	switch {
	case k.Exists && k.Limit < slots:
		return fmt.Sprintf("Blocked on key %q: it needs %d slots; the key's limit is now %d: raise it (client.SetKeyLimit, or the job's To) to at least %d, or it waits for good; %s.",
			k.Key, slots, k.Limit, slots, aheadOf(ahead))
	case k.Exists && ahead == 0 && k.Free < slots:
		return fmt.Sprintf("Blocked on key %q, which has %s of %d: it needs %d slots at once, holding none meanwhile, and starts when its holders give back enough; the jobs behind it wait for it.",
			k.Key, count(max(k.Free, 0), "free slot"), k.Limit, slots)
	}
	return summary + fmt.Sprintf(" It needs %d slots at once.", slots)
}

// explainRateWait explains a job waiting in its rate key's line.
func (c *Client) explainRateWait(ctx context.Context, e *Explanation, since time.Time, procs []driver.Process, now time.Time) error {
	info := e.Job
	var err error
	e.Since = since
	if e.Rate, err = c.rateState(ctx, info.RateKey, maxLineShow); err != nil {
		return err
	}
	ahead, err := c.drv.Exec().LineCountAhead(ctx, driver.LineAheadParams{Key: driver.RateLine(info.RateKey), Priority: info.Priority, JobID: info.ID, Max: MaxCountedAhead + 1})
	if err != nil {
		return err
	}
	e.place(ahead)
	r := e.Rate
	e.Summary = fmt.Sprintf("Waiting for the rate limit of key %q (%s per %s, %d in the last period): %s",
		r.Key, count(r.Limit, "start"), r.Period, r.Recent, aheadOf(ahead))
	if !r.NextStartAt.IsZero() {
		e.Summary += fmt.Sprintf("; next start at %s", when(r.NextStartAt, now))
	}
	e.Summary += "."
	if a := r.Adaptive; a != nil {
		e.Summary += fmt.Sprintf(" The rate adapts to its downstream (Rate.Adaptive): throttled runs lowered it to %d (min %d) at %s; it rises by one after %d more completions.",
			a.Limit, a.Min, a.AdaptedAt.UTC().Format(time.RFC3339), max(a.Limit-a.Successes, 1))
	}
	if len(info.Keys) > 0 {
		e.Summary += fmt.Sprintf(" It holds its slots of concurrency keys %s meanwhile.", quotedList(info.Keys))
	} else if info.Key != "" {
		e.Summary += fmt.Sprintf(" It holds its slot of concurrency key %q meanwhile.", info.Key)
	}
	if !c.dispatcherAlive(procs, now) {
		e.Summary += noDispatcher
	}
	return nil
}

// place sets a blocked job's Position from the jobs counted ahead of it
// in its line: MaxCountedAhead+1 at most, "more than MaxCountedAhead".
func (e *Explanation) place(ahead int) {
	e.Position = min(ahead, MaxCountedAhead) + 1
	e.PositionAtLeast = ahead > MaxCountedAhead
}

// ahead_ says how many jobs wait ahead of a blocked one, for a person.
func aheadOf(ahead int) string {
	switch {
	case ahead > MaxCountedAhead:
		return fmt.Sprintf("more than %s ahead of it", humanize.Thousands(MaxCountedAhead))
	case ahead > 0:
		return fmt.Sprintf("%d ahead of it", ahead)
	}
	return "it is next in line"
}

// noDispatcher is the sentence for work only a dispatcher moves on.
const noDispatcher = " No live dispatcher is registered: start one (client.Run or `bq dispatcher`), or nothing will promote it."

// jobList writes "job 7", "jobs 7 and 8", "jobs 7, 8 and 9".
func jobList(ids []int64) string {
	if len(ids) == 1 {
		return fmt.Sprintf("job %d", ids[0])
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return "jobs " + strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

func (c *Client) scheduledSummary(info *JobInfo, due time.Time, procs []driver.Process, now time.Time) string {
	what := "Scheduled"
	if info.Attempts > 0 {
		what = fmt.Sprintf("Retry %d of %d scheduled", info.Attempts+1, info.MaxAttempts)
	}
	s := fmt.Sprintf("%s: due at %s", what, when(due, now))
	if info.Key != "" {
		s += fmt.Sprintf(", then admitted through key %q (limit %d)", info.Key, info.Limit)
	}
	s += "." + debounceSummary(info, now)
	if !due.After(now) && !c.dispatcherAlive(procs, now) {
		s += " It is due but no live dispatcher is registered to admit it: start one (client.Run or `bq dispatcher`)."
	}
	return s
}

// dispatcherAlive reports a live process that runs a dispatcher (kind
// "dispatcher" or "worker+dispatcher").
func (c *Client) dispatcherAlive(procs []driver.Process, now time.Time) bool {
	return c.anyAlive(procs, now, func(p driver.Process) bool { return strings.Contains(p.Kind, "dispatcher") })
}

// worksQueue reports a live process that works queue.
func (c *Client) worksQueue(procs []driver.Process, queue string, now time.Time) bool {
	return c.anyAlive(procs, now, func(p driver.Process) bool { return slices.Contains(strings.Split(p.Queues, ","), queue) })
}

func (c *Client) anyAlive(procs []driver.Process, now time.Time, match func(driver.Process) bool) bool {
	return slices.ContainsFunc(procs, func(p driver.Process) bool {
		return match(p) && c.alive(p.LastHeartbeatAt, p.HeartbeatInterval, now)
	})
}

func processLabel(id int64, name string) string {
	if name == "" {
		return fmt.Sprintf("#%d", id)
	}
	return fmt.Sprintf("%s (#%d)", name, id)
}

// when writes t for a sentence, after "at" or "since":
// "2025-01-02T15:04:05Z (3m0s ago)".
func when(t, now time.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	return fmt.Sprintf("%s (%s)", humanize.Time(t), humanize.Ago(t, now))
}

func whenPtr(t *time.Time, now time.Time) string {
	if t == nil {
		return "an unknown time"
	}
	return when(*t, now)
}

// count writes "1 job", "2 jobs".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// firstLine shortens an error (a panic's stack, say) for a sentence.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// quotedList is keys, each quoted, joined by commas.
func quotedList(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = strconv.Quote(k)
	}
	return strings.Join(q, ", ")
}

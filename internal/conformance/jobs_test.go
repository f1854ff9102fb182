package conformance

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

// Args drive the suite's jobs: Test routes in-process runs to the test's
// recorder, Mode picks a behaviour.
type Args struct {
	Test    string
	Key     string
	Seq     int
	SleepMS int
	Mode    string // "", "fail-first", "fail-n", "fail", "permanent", "permanent-first", "panic", "wait-ctx", "ignore-ctx", "poll-ctx", "poll-ctx-first", "snooze-first", "snooze-zero", "throttle-first", "rerun-n"
	N       int    // for decode tests: the wrong type is written as a string; for snooze-first, the delay in ms; for rerun-n, a later attempt's sleep in ms; for fail-n, the attempts that fail
	// Until, for poll-ctx: a file whose appearance ends the run early, so
	// a test can end a long run (and its re-runs) once it has seen enough.
	Until string `json:",omitempty"`
	// Downstream, for mode "downstream": a file counting the calls in
	// flight to a fake downstream that answers 429 (bq.Throttled, retry
	// after SleepMS) above N of them at once (adaptive_test.go).
	Downstream string `json:",omitempty"`
	// PeriodMS, for mode "downstream-rate": the downstream answers 429
	// (bq.Throttled, retry after PeriodMS) to a call that finds N calls
	// it accepted within the last PeriodMS; an accepted call takes
	// SleepMS (adaptiverate_test.go).
	PeriodMS int `json:",omitempty"`
}

func keyOf(a Args) string { return a.Key }

var (
	unkeyedJob = bq.Define("c.unkeyed", behave, bq.JobOptions[Args]{})
	limit1Job  = bq.Define("c.limit1", behave, bq.JobOptions[Args]{
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 1}})
	limit2Job = bq.Define("c.limit2", behave, bq.JobOptions[Args]{
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 2}})
	discard1Job = bq.Define("c.discard1", behave, bq.JobOptions[Args]{
		Backoff:     func(int) time.Duration { return 0 },
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 1, OnConflict: bq.Discard}})
	groupAJob = bq.Define("c.groupA", behave, bq.JobOptions[Args]{
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 1, Group: "c.shared"}})
	groupBJob = bq.Define("c.groupB", behave, bq.JobOptions[Args]{
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 1, Group: "c.shared"}})
	retryJob = bq.Define("c.retry", behave, bq.JobOptions[Args]{
		MaxAttempts: 2, Backoff: func(int) time.Duration { return 0 }})
	onceJob    = bq.Define("c.once", behave, bq.JobOptions[Args]{MaxAttempts: 1})
	timeoutJob = bq.Define("c.timeout", behave, bq.JobOptions[Args]{
		MaxAttempts: 1, Timeout: 50 * time.Millisecond})
	// policyKeyedJob sets no To: its queue's policy decides.
	policyKeyedJob = bq.Define("c.policykeyed", behave, bq.JobOptions[Args]{
		Queue: "pq", Concurrency: &bq.Concurrency[Args]{Key: keyOf}})
	backlogJob = bq.Define("c.backlog", behave, bq.JobOptions[Args]{
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 1, MaxBlocked: 2}})
)

// run is one execution as the job saw it.
type run struct {
	JobID   int64
	Kind    string
	Key     string
	Seq     int
	Attempt int
	PID     int
	Start   time.Time
	End     time.Time
}

// recorder collects in-process runs of one test.
type recorder struct {
	mu   sync.Mutex
	runs []run
}

var recorders sync.Map // test id -> *recorder

func (h *harness) recorder() *recorder {
	r, _ := recorders.LoadOrStore(h.test, &recorder{})
	return r.(*recorder)
}

func (r *recorder) all() []run {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.runs)
}

// helperDB is set in helper processes: runs are written to test_runs.
var helperDB *sql.DB
var helperDialect string

func behave(ctx context.Context, a Args) error {
	meta, _ := bq.JobFromContext(ctx)
	rn := run{JobID: meta.ID, Kind: meta.Kind, Key: a.Key, Seq: a.Seq, Attempt: meta.Attempt, PID: os.Getpid(), Start: time.Now()}
	if helperDB != nil {
		// Not under the run's context: a run whose lease lapsed while its
		// process was frozen mid-insert has its context cancelled at the
		// resume, and a cancelled insert may still commit (modernc's SQLite
		// reports the cancel after the row is in). The run then returned
		// without its end, and looked endless to the overlap checks.
		if _, err := helperDB.ExecContext(context.WithoutCancel(ctx), rebind(helperDialect,
			`INSERT INTO test_runs (job_id, test, kind, jkey, pid, started_ns) VALUES (?, ?, ?, ?, ?, ?)`),
			meta.ID, a.Test, meta.Kind, a.Key, os.Getpid(), rn.Start.UnixNano()); err != nil {
			return fmt.Errorf("record start: %w", err)
		}
	}
	err := act(ctx, a, meta)
	rn.End = time.Now()
	if helperDB != nil {
		// The end is the evidence the overlap checks read: a write lost to
		// a busy database (SQLite, just after a frozen writer resumes) would
		// make the run look endless, so it is tried again, and said.
		q := rebind(helperDialect, `UPDATE test_runs SET ended_ns = ?, outcome = ? WHERE job_id = ? AND started_ns = ?`)
		outcome := outcomeOf(ctx, err)
		for try := 1; ; try++ {
			_, werr := helperDB.ExecContext(context.WithoutCancel(ctx), q, rn.End.UnixNano(), outcome, meta.ID, rn.Start.UnixNano())
			if werr == nil {
				break
			}
			fmt.Fprintf(os.Stderr, "conformance helper: record the end of a run of job %d (try %d): %v\n", meta.ID, try, werr)
			if try == 100 {
				return fmt.Errorf("record end: %w", werr)
			}
			time.Sleep(100 * time.Millisecond)
		}
	} else {
		r, _ := recorders.LoadOrStore(a.Test, &recorder{})
		rec := r.(*recorder)
		rec.mu.Lock()
		rec.runs = append(rec.runs, rn)
		rec.mu.Unlock()
	}
	return err
}

// outcomeOf says how a run ended, as test_runs.outcome records it: "ok",
// "ctx: <cause>" when its context ended, else "error: <message>".
func outcomeOf(ctx context.Context, err error) string {
	var s string
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		s = "ctx: " + cmp.Or(context.Cause(ctx), err).Error()
	default:
		s = "error: " + err.Error()
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

func act(ctx context.Context, a Args, meta bq.JobMeta) error {
	switch a.Mode {
	case "permanent-first":
		if meta.Attempt == 1 {
			return bq.Permanent(errors.New("first attempt fails for good"))
		}
	case "poll-ctx", "poll-ctx-first":
		// Job code that checks its context every 10 ms, as a loop over
		// work items would; with poll-ctx-first only the first attempt
		// does, later ones end at once.
		if a.Mode == "poll-ctx-first" && meta.Attempt > 1 {
			return nil
		}
		for end := time.Now().Add(time.Duration(a.SleepMS) * time.Millisecond); time.Now().Before(end); {
			if err := ctx.Err(); err != nil {
				return err
			}
			if a.Until != "" {
				if _, err := os.Stat(a.Until); err == nil {
					return nil
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		return nil
	case "fenced-write":
		// Job code that writes to another system without looking at its
		// context first, fenced by its token: a first attempt waits until
		// the clock jumps (its process was paused past its lease), then
		// writes as if nothing happened; a later attempt writes at once.
		if meta.Attempt == 1 {
			prev := time.Now()
			for end := prev.Add(time.Duration(a.SleepMS) * time.Millisecond); prev.Before(end); {
				time.Sleep(time.Millisecond)
				now := time.Now()
				if now.Sub(prev) > chaosDeadAfter {
					break
				}
				prev = now
			}
		}
		res, err := helperDB.ExecContext(context.WithoutCancel(ctx), rebind(helperDialect,
			`UPDATE test_downstream SET token = ?, writer = ? WHERE rkey = ? AND token < ?`),
			meta.Token, meta.Attempt, a.Test, meta.Token)
		if err != nil {
			return fmt.Errorf("write downstream: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("downstream refused the write of token %d (%d rows, %v)", meta.Token, n, err)
		}
		return nil
	case "spin-ctx":
		// A first attempt that checks its context in a busy loop and
		// notices a pause by the jump of the clock between two checks:
		// the first check after the jump must already see ctx end
		// (no timer or other goroutine has had time to run). Later
		// attempts end at once.
		if meta.Attempt > 1 {
			return nil
		}
		prev := time.Now()
		for end := prev.Add(time.Duration(a.SleepMS) * time.Millisecond); prev.Before(end); {
			now := time.Now()
			err := ctx.Err()
			// Past ProcessDeadAfter no lease can hold. A shorter gap is
			// not a pause to catch: a loaded machine stalls a -race
			// process for a second now and then (1.018 s seen), and the
			// lease rightly still holds then.
			if gap := now.Sub(prev); gap > chaosDeadAfter && err == nil {
				return fmt.Errorf("stale check: ctx.Err() was nil at the first check after a %s jump of the clock", gap.Round(time.Millisecond))
			}
			if err != nil {
				return err
			}
			prev = now
			runtime.Gosched()
		}
		return nil
	case "snooze-first":
		// The job's first run (in-process: the recorder has none of it
		// yet) sleeps, then snoozes for N ms; later runs just sleep. A
		// snooze spends no attempt, so meta.Attempt cannot tell them apart.
		time.Sleep(time.Duration(a.SleepMS) * time.Millisecond)
		r, _ := recorders.LoadOrStore(a.Test, &recorder{})
		if !slices.ContainsFunc(r.(*recorder).all(), func(rn run) bool { return rn.JobID == meta.ID }) {
			return bq.Snooze(time.Duration(a.N) * time.Millisecond)
		}
		return nil
	case "snooze-zero":
		return bq.Snooze(0)
	case "throttle-first":
		// As snooze-first, its first run (in-process) throttled for N ms:
		// bq.Throttled, which spends no attempt either.
		r, _ := recorders.LoadOrStore(a.Test, &recorder{})
		if !slices.ContainsFunc(r.(*recorder).all(), func(rn run) bool { return rn.JobID == meta.ID }) {
			return bq.Throttled(errors.New("429 Too Many Requests"), time.Duration(a.N)*time.Millisecond)
		}
		return nil
	case "downstream":
		return callDownstream(ctx, a)
	case "downstream-rate":
		return callRatedDownstream(ctx, a)
	case "rerun-n":
		// A first attempt sleeps SleepMS, later ones N ms: a re-run that
		// is still running when its first attempt's late outcome lands.
		if meta.Attempt > 1 {
			a.SleepMS = a.N
		}
	case "fail-n":
		// The first N attempts fail, after SleepMS each; then it completes.
		if meta.Attempt <= a.N {
			time.Sleep(time.Duration(a.SleepMS) * time.Millisecond)
			return fmt.Errorf("attempt %d of the first %d fails", meta.Attempt, a.N)
		}
	case "fail-first":
		if meta.Attempt == 1 {
			return errors.New("first attempt fails")
		}
	case "fail":
		return errors.New("boom")
	case "permanent":
		return bq.Permanent(errors.New("bad input"))
	case "ignore-ctx":
		time.Sleep(time.Duration(a.SleepMS) * time.Millisecond)
		return nil
	case "panic":
		panic("job exploded")
	case "wait-ctx":
		<-ctx.Done()
		return ctx.Err()
	}
	select {
	case <-time.After(time.Duration(a.SleepMS) * time.Millisecond):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rebind turns ? placeholders into $n for PostgreSQL; SQLite and MySQL
// take ? as it is.
func rebind(dialect, q string) string {
	if dialect != "postgres" {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// maxOverlap returns, per key, the most runs that were in progress at once.
func maxOverlap(runs []run) map[string]int {
	type event struct {
		at    time.Time
		delta int
	}
	byKey := map[string][]event{}
	for _, r := range runs {
		byKey[r.Key] = append(byKey[r.Key], event{r.Start, +1}, event{r.End, -1})
	}
	out := map[string]int{}
	for key, evs := range byKey {
		// At equal instants ends go first: touching runs do not overlap.
		slices.SortFunc(evs, func(a, b event) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			return a.delta - b.delta
		})
		cur := 0
		for _, e := range evs {
			cur += e.delta
			out[key] = max(out[key], cur)
		}
	}
	return out
}

func TestMain(m *testing.M) {
	if os.Getenv("BQ_HELPER") != "" {
		os.Exit(helperMain())
	}
	os.Exit(m.Run())
}
